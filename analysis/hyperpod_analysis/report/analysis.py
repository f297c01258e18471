"""Colocated vs DPD, cell by cell: % improvements, GPU-normalized throughput, cost per token, SLO checks, a verdict.

Sign convention (AWS's charts: "higher bars indicate larger DPD advantage"): latency improvement =
(colocated - dpd) / colocated, throughput improvement = (dpd - colocated) / colocated, both in percent.

Two experiments, never mixed: ``aws-reference`` (AWS's layouts, compared with AWS's published statements, with
the setup's deviations from AWS's listed next to it) and ``equal-gpu`` (the configured endpoint against colocated
replicas on as many GPUs: the only basis of the verdicts). A DPD run whose requests did not take the path its
scenario declares (``dpd-path.json``: the prefill pods' finished requests), and a run of either mode that ran on
other GPUs than it records (``serving.json``), is invalid: shown, never compared. A run whose statistics cover fewer
than :data:`MIN_REQUESTS` requests is shown with its n and neither checked against the SLO nor used in a verdict.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_analysis.report.results import Measurement
from hyperpod_core.config import SloConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.prices import InstancePrice

#: AWS's published H100 result for D(4096,256), the reference line of the report.
#: Source: AWS ML blog "Disaggregated prefill and decode for LLM inference on SageMaker HyperPod" (2026-07-10,
#: section "Benchmarking performance"): genai-bench, 4,096 input / 256 output tokens, concurrency 8, 16, 32;
#: DPD 1 prefiller + 1 decoder on 2x ml.p5.48xlarge (16 GPUs, KV-aware routing) vs one colocated node
#: (8 GPUs); Llama-3.3-70B-Instruct, TP 8, max-model-len 16,384. The text gives: TPOT improvement "22% at low
#: concurrency to 66% at high concurrency"; output throughput "up to 35%" at higher concurrency; E2E P50
#: "14-32%". Per-concurrency values exist only in the charts (images); we use only what the text states.
AWS_H100_REFERENCE: dict[str, Any] = {
    "traffic": "D(4096,256)",
    "source": "https://aws.amazon.com/blogs/machine-learning/"
              "disaggregated-prefill-and-decode-for-llm-inference-on-sagemaker-hyperpod/",
    "setup": "Llama-3.3-70B, ml.p5.48xlarge (H100): DPD 1P+1D (16 GPUs) vs 1 colocated node (8 GPUs)",
    "points": {"tpot": {8: 22.0, 32: 66.0}},  # stated at low (8) and high (32) concurrency
    "ranges": {"e2e_p50": (14.0, 32.0)},  # stated as a range over 8-32
    "up_to": {"output_throughput": 35.0},  # "up to", at higher concurrency
}

#: What AWS's reference run was (same source as AWS_H100_REFERENCE): every difference of ours is a deviation
#: printed next to the reference result.
AWS_REFERENCE_SETUP: dict[str, Any] = {
    "model": "Llama-3.3-70B-Instruct", "instance_type": "ml.p5.48xlarge", "tensor_parallel_size": 8,
    "max_model_len": 16384, "routing_strategy": "kvaware", "prefill_gpus": 8, "decode_gpus": 8,
    "prefill_enforce_eager": True,
}
#: A DPD run is valid when at least this share of the requests that should reach the prefill pods did; a
#: ``direct`` run when at most 1 - this share of its requests went there.
PATH_SHARE = 0.9
#: Fewest requests behind a run's statistics for its SLO check and its verdict. The SLO is a p95: with n requests
#: the number at or below the true p95 is Binomial(n, 0.95), so below 59 even the slowest request is not an upper
#: bound of the p95 with 95 % confidence (0.95^59 < 0.05), and of 100 sorted, the 90th and the 99th bound it on both
#: sides (P(90 <= B < 99) = 0.951: a distribution-free 95 % interval, five requests above the p95). The default
#: run (``benchmark.max_requests_per_run`` 320, warm-up 10 %) has 288.
MIN_REQUESTS = 100

METRICS = ("tpot", "e2e_p50", "e2e_p90", "ttft", "output_throughput")
#: Each improvement with the statistic it compares (``Cell.improvement``); throughput is tokens over the run's
#: duration, no statistic over requests.
LABELS = {"tpot": "TPOT (mean)", "e2e_p50": "E2E (p50)", "e2e_p90": "E2E (p90)", "ttft": "client TTFT (mean)",
          "output_throughput": "output throughput", "output_throughput_per_gpu": "output tokens/s per GPU"}


def pct_lower_is_better(colocated: float, dpd: float) -> float:
    return 100.0 * (colocated - dpd) / colocated if colocated else math.nan


def pct_higher_is_better(colocated: float, dpd: float) -> float:
    return 100.0 * (dpd - colocated) / colocated if colocated else math.nan


@dataclass(frozen=True, kw_only=True)
class Cell:
    """Both modes at one scenario and concurrency."""

    scenario: str
    traffic: str
    concurrency: int
    colocated: Measurement
    dpd: Measurement
    estimate: dict[str, Any] | None
    experiment: str = "equal-gpu"
    invalid: str | None = None
    """Why the cell does not count: its DPD run's requests did not take the DPD path, or a run of it ran on other
    GPUs than it records. Default: valid."""

    def improvement(self) -> dict[str, float]:
        c, d = self.colocated, self.dpd
        return {
            "tpot": pct_lower_is_better(c.tpot_ms["mean"], d.tpot_ms["mean"]),
            "e2e_p50": pct_lower_is_better(c.e2e_ms["p50"], d.e2e_ms["p50"]),
            "e2e_p90": pct_lower_is_better(c.e2e_ms["p90"], d.e2e_ms["p90"]),
            "ttft": pct_lower_is_better(c.ttft_ms["mean"], d.ttft_ms["mean"]),
            "output_throughput": pct_higher_is_better(c.output_tokens_per_s, d.output_tokens_per_s),
            "output_throughput_per_gpu": pct_higher_is_better(c.tokens_per_s_per_gpu, d.tokens_per_s_per_gpu),
        }


def build_cells(measurements: list[Measurement], cells: list[tuple[str, int]],
                estimates: dict[tuple[str, int], dict[str, Any]] | None, *, experiment: str = "equal-gpu",
                invalid: dict[str, str] | None = None) -> list[Cell]:
    """The cells of ``experiment``; ``invalid`` maps a run folder (of either mode) to why it does not count.
    ``estimates`` (:func:`planner_estimates`) must be the planner's estimate of this experiment's layouts: one of
    another experiment is never drawn beside these measurements."""
    by = {(m.mode, m.scenario, m.concurrency): m for m in measurements if m.experiment == experiment}
    out = []
    for scenario, n in cells:
        d, c = by[("dpd", scenario, n)], by[("colocated", scenario, n)]
        est = (estimates or {}).get((d.traffic, n))
        if est is not None and est.get("experiment") != experiment:
            est = None
        why = [(invalid or {})[m.folder] for m in (d, c) if m.folder in (invalid or {})]
        out.append(Cell(scenario=scenario, traffic=d.traffic, concurrency=n, colocated=c, dpd=d, estimate=est,
                        experiment=experiment, invalid="; ".join(why) or None))
    return out


def expected_path(m: Measurement, paths: Mapping[str, str]) -> str:
    """The router path the run's scenario declares (``paths``: scenario name -> path from the config; else the
    run's own record): ``dpd`` (also for ``reference``: AWS's run was disaggregated) or ``direct``."""
    path = paths.get(m.scenario) or str(m.record.get("path") or "dpd")
    return "direct" if path == "direct" else "dpd"


def dpd_path_problems(measurements: list[Measurement], paths: Mapping[str, str]) -> dict[str, str]:
    """DPD run folder -> why its requests did not provably take the declared path (valid folders are absent).

    After each DPD run ``bench`` stores the prefill pods' finished requests during the run (``dpd-path.json``,
    one count per run folder: a Job of the benchmark manifests runs one scenario at one concurrency, so one cell).
    The requests of the scenarios that declare the DPD path must have reached them (at least :data:`PATH_SHARE`
    of those the run completed; warm-up requests only add), and a run of only ``direct`` scenarios must have
    left them nearly idle. D(4096,256) sits at the routing threshold, and the router's token estimate is its own:
    without this check a "DPD" run may have measured decode alone. A folder whose runs declare different paths
    (a runner given ``BENCH_SCENARIO="a;b"``) is not verified: its one count is the same whether the long prompts
    went through prefill and the short ones straight to decode, or the other way round. A folder of several runs
    on one path is judged on their sum, and the report marks its count ``folder-level``."""
    folders: dict[str, list[Measurement]] = {}
    for m in measurements:
        if m.mode == "dpd":
            folders.setdefault(m.folder, []).append(m)
    problems: dict[str, str] = {}
    for folder, runs in folders.items():
        record = runs[0].dpd_path
        if record is None:
            problems[folder] = "DPD path not verified: no dpd-path.json (hyperpod-dpd bench writes it)"
            continue
        if record.get("error") or record.get("prefill_requests") is None:
            problems[folder] = f"DPD path not verified: {record.get('error') or 'no prefill request count'}"
            continue
        declared = {m.scenario: expected_path(m, paths) for m in runs}
        if len(set(declared.values())) > 1:  # one count over both paths: long prompts direct and short ones
            # through prefill would add up to the same number as the declared routing
            problems[folder] = ("DPD path not verified: one prefill request count for scenarios that declare "
                                f"different paths ({', '.join(f'{s}: {p}' for s, p in sorted(declared.items()))}) "
                                "cannot tell which requests took which path; run each path in its own Job")
            continue
        prefill = float(record["prefill_requests"])
        expected = sum(m.completed for m in runs if expected_path(m, paths) == "dpd")
        completed = sum(m.completed for m in runs)
        if expected and prefill < PATH_SHARE * expected:
            problems[folder] = (f"only {prefill:.0f} of {expected} requests reached the prefill pods "
                                f"({record.get('source')}): the router sent them straight to decode")
        elif not expected and prefill > (1 - PATH_SHARE) * completed:
            problems[folder] = (f"{prefill:.0f} of {completed} requests of a direct scenario reached the prefill "
                                f"pods ({record.get('source')})")
    return problems


def serving_problems(measurements: list[Measurement]) -> dict[str, str]:
    """Run folder -> why it ran on other GPUs than it records (``serving.json``, written by ``bench``: the ready
    GPUs before and after the run); valid folders and folders without the file are absent. The GPUs a run records
    normalize every per-GPU number, so such a run is never compared."""
    problems: dict[str, str] = {}
    for m in measurements:
        record = m.serving
        if record is None or m.folder in problems:
            continue
        why = record.get("invalid")
        if why is None and "invalid" not in record:  # a record of an older bench: judge it the same way
            off = [f"{record[f'ready_gpus_{w}']} GPUs ready {w} the run" for w in ("before", "after")
                   if isinstance(record.get(f"ready_gpus_{w}"), int)
                   and record[f"ready_gpus_{w}"] != record.get("gpus_recorded")]
            why = f"{', '.join(off)}, the run records {record.get('gpus_recorded')}" if off else None
        if why:
            problems[m.folder] = f"{m.mode} run: {why} (serving.json)"
    return problems


def reference_deviations(spec: EndpointSpec, cells: list[Cell]) -> list[str]:
    """How this run of the aws-reference experiment on ``spec``'s endpoint differs from AWS's published setup (one
    line each)."""
    ref, e = AWS_REFERENCE_SETUP, spec.endpoint
    ours = {"instance_type": e.instance_type, "tensor_parallel_size": e.tensor_parallel_size,
            "max_model_len": e.max_model_len, "prefill_gpus": e.prefill.gpus, "decode_gpus": e.decode.gpus,
            "prefill_enforce_eager": "--enforce-eager" in e.prefill.extra_args}
    out = [f"{k}: {v} (AWS: {ref[k]})" for k, v in ours.items() if v != ref[k]]
    strategies = sorted({str(c.dpd.record.get("routing_strategy") or e.routing_strategy) for c in cells})
    if strategies != [ref["routing_strategy"]]:
        out.append(f"routing: {', '.join(strategies)} instead of AWS's kvaware (KV-aware routing needs "
                   "endpoint.invocation_path v1/completions, and genai-bench 0.0.5's OpenAI client posts to "
                   "/v1/chat/completions only)")
    if ref["model"].lower().replace(".", "-") not in spec.model.name.lower().replace(".", "-"):
        out.append(f"model: {spec.model.name} (AWS: {ref['model']})")
    return out


def planner_estimates(spec: EndpointSpec, traffics: list[str], levels: list[int], *, experiment: str = "equal-gpu"
                      ) -> tuple[dict[tuple[str, int], dict[str, Any]] | None, str]:
    """The sizing planner's estimate of ``experiment``'s layouts of ``spec``'s endpoint per (traffic, concurrency),
    when
    ``hyperpod_analysis.plan`` is installed: equal-gpu, the configured DPD endpoint vs colocated on as many GPUs;
    aws-reference, 1 prefill + 1 decode replica vs one colocated replica (``estimate_experiment``).

    Returns ``(estimates or None, note)``; the note says why there is none.
    """
    try:
        estimate_experiment = importlib.import_module("hyperpod_analysis.plan").estimate_experiment
    except (ImportError, AttributeError):
        return None, "planner not installed (hyperpod_analysis.plan): no estimates"
    try:
        rows = estimate_experiment(spec, experiment, traffics, levels)
    except Exception as exc:  # the planner is optional: its failure must not lose the measurements
        return None, f"planner failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return ({(str(r["traffic"]), int(r["concurrency"])): r for r in rows},
            "planner estimates from hyperpod_analysis.plan")


# --- SLO, cost, verdict -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SloCheck:
    ok: bool
    misses: list[str]


def slo_check(m: Measurement, slo: SloConfig) -> SloCheck:
    """The endpoint's SLO (:attr:`EndpointSpec.slo`: ``observability.slo`` with its own ``slo`` keys): TTFT p95,
    TPOT p95 and the error ratio the alerts use."""
    misses = []
    ttft = m.ttft_ms.get("p95", m.ttft_ms["mean"]) / 1000
    tpot = m.tpot_ms.get("p95", m.tpot_ms["mean"]) / 1000
    if ttft > slo.ttft_p95_seconds:
        misses.append(f"TTFT p95 {ttft:.2f} s > {slo.ttft_p95_seconds:g} s")
    if tpot > slo.tpot_p95_seconds:
        misses.append(f"TPOT p95 {tpot * 1000:.0f} ms > {slo.tpot_p95_seconds * 1000:g} ms")
    if m.error_rate > slo.error_ratio:
        misses.append(f"errors {m.error_rate:.1%} > {slo.error_ratio:.0%}")
    return SloCheck(ok=not misses, misses=misses)


def judged(m: Measurement) -> bool:
    """Whether the run's statistics cover enough requests (:data:`MIN_REQUESTS`) to check a p95 SLO with them."""
    return m.n >= MIN_REQUESTS


def gpu_hours_text(gpu_hours: float | None, price: InstancePrice | None) -> str:
    """``2.22 GPU-h ($17.58)``: GPU-hours, and their price when there is one."""
    if gpu_hours is None or math.isnan(gpu_hours):
        return "n/a"
    if math.isinf(gpu_hours):
        return "inf GPU-h"
    usd = f" (${gpu_hours * price.usd_per_gpu_hour:.2f})" if price is not None else ""
    return f"{gpu_hours:.2f} GPU-h{usd}"


def cost_text(m: Measurement, price: InstancePrice | None) -> str:
    """All the run's GPU-hours per 1M output tokens: what the verdict compares (same price on both sides)."""
    return f"{gpu_hours_text(m.gpu_hours_per_million_output_tokens(), price)} per 1M output tokens"


@dataclass(frozen=True, kw_only=True)
class RolePods:
    """A role's ready pods when the run started (``serving.json``)."""

    replicas: int
    gpus: int


def role_pods(m: Measurement) -> dict[str, RolePods] | None:
    """``prefill``/``decode`` (DPD) or ``colocated``: the ready pods and their GPUs, from the run's
    ``serving.json`` (before the run, else after); None without one."""
    for when in ("before", "after"):
        seen = (m.serving or {}).get(when)
        if not isinstance(seen, dict) or not seen:
            continue
        out: dict[str, RolePods] = {}
        for deployment, d in seen.items():
            role = deployment.split("-", 1)[0] if m.mode == "dpd" else "colocated"
            if role not in ("prefill", "decode", "colocated"):
                continue
            had = out.get(role, RolePods(replicas=0, gpus=0))
            out[role] = RolePods(replicas=had.replicas + int(d["ready"]),
                                 gpus=had.gpus + int(d["ready"]) * int(d["gpus_per_pod"]))
        return out
    return None


@dataclass(frozen=True, kw_only=True)
class TokenCost:
    """What one run's GPU-hours bought: GPU-hours per 1M input and per 1M output tokens, and the idle share.

    The run's GPU-hours (all its GPUs over its duration) are split between the two token classes: on DPD the
    prefill pods' go to input tokens and the decode pods' to output tokens; colocated, by the input tokens' share
    of engine step time (:func:`step_time_input_shares`). Idle GPU-hours stay in the class whose pods idled."""

    input_share: float | None
    """Share of the run's GPU-hours charged to input tokens. None: unknown (then both costs are n/a)."""
    basis: str
    """How the GPU-hours were split, in words."""
    input_gpu_hours: float | None
    """GPU-hours per 1M input tokens."""
    output_gpu_hours: float | None
    """GPU-hours per 1M output tokens."""
    idle_share: float | None
    """At least this share of the run's GPU-hours went to pods with no request running (``num_requests_running
    == 0``); None: unknown."""


def _per_million(gpus: float, tokens_per_s: float) -> float | None:
    return gpus * 1e6 / (tokens_per_s * 3600) if tokens_per_s > 0 else None


def _busy(requests_in_flight: float, replicas: int) -> float:
    """Share of the time a role's pods run a request, at most: ``requests_in_flight`` (Little's law: rate x time
    each request spends there) spread over ``replicas`` pods, a pod with two requests counting once."""
    return min(1.0, requests_in_flight / replicas) if replicas > 0 else 0.0


def token_cost(m: Measurement, *, input_share: float | None, share_basis: str,
               prefill_requests: float | None) -> TokenCost:
    """The run's :class:`TokenCost`. ``input_share``/``share_basis``: the colocated split (ignored for DPD);
    ``prefill_requests``: the requests the prefill pods served during this run (DPD; None: unknown).

    Idle share, a lower bound from what the run records: in a closed-loop run at concurrency c, the decode pods
    (and colocated replicas) hold at most c requests, so at least ``1 - c / replicas`` of their time is idle; a
    prefill pod holds a request at most for its TTFT (the client's TTFT holds the prefill leg, the KV transfer
    and the hops), so the prefill pods are busy at most ``prefill requests/s x mean TTFT / replicas``."""
    pods = role_pods(m)
    busy: dict[str, float] = {}
    if m.mode == "dpd":
        if pods is None or not {"prefill", "decode"} <= set(pods):
            return TokenCost(input_share=None, basis="GPUs per role unknown (no serving.json)",
                             input_gpu_hours=None, output_gpu_hours=None, idle_share=None)
        prefill, decode = pods["prefill"], pods["decode"]
        input_share = prefill.gpus / (prefill.gpus + decode.gpus)
        share_basis = f"prefill {prefill.gpus} GPUs -> input, decode {decode.gpus} GPUs -> output"
        busy["decode"] = _busy(m.concurrency, decode.replicas)
        if prefill_requests is not None and m.run_seconds > 0:
            busy["prefill"] = _busy(prefill_requests / m.run_seconds * m.ttft_ms["mean"] / 1000, prefill.replicas)
    elif pods is not None and "colocated" in pods:
        busy["colocated"] = _busy(m.concurrency, pods["colocated"].replicas)
    idle = (sum(pods[r].gpus * (1 - b) for r, b in busy.items()) / sum(p.gpus for p in pods.values())
            if pods and len(busy) == len(pods) else None)
    if input_share is None:
        return TokenCost(input_share=None, basis=share_basis, input_gpu_hours=None, output_gpu_hours=None,
                         idle_share=idle)
    return TokenCost(input_share=input_share, basis=share_basis,
                     input_gpu_hours=_per_million(m.gpus * input_share, m.input_tokens_per_s),
                     output_gpu_hours=_per_million(m.gpus * (1 - input_share), m.output_tokens_per_s),
                     idle_share=idle)


def _input_share(model: Any, *, isl: int, osl: int, batch: int, eager: bool, chunk: int) -> float:
    """Input tokens' share of one request's engine time in the step model: its prompt as prefill-only steps of at
    most ``chunk`` tokens, against its other ``osl - 1`` tokens as 1/``batch`` of a decode-only step each (the
    running batch at the mean context, prompt plus half the output)."""
    prefill, done = 0.0, 0
    while done < isl:
        n = min(chunk, isl - done)
        prefill += model.step_seconds(decode_tokens=0, decode_context=0, prefill_tokens=n,
                                      prefill_attention=n * (done + n / 2), eager=eager)
        done += n
    step = model.step_seconds(decode_tokens=batch, decode_context=batch * (isl + osl // 2), prefill_tokens=0,
                              prefill_attention=0.0, eager=eager)
    decode = max(osl - 1, 0) * step / batch
    return prefill / (prefill + decode) if prefill + decode > 0 else 0.0


def step_time_input_shares(spec: EndpointSpec, measurements: list[Measurement]) -> tuple[dict[str, float], str]:
    """Colocated run (by ``source``) -> input tokens' share of engine step time, from the planner's step model
    (``hyperpod_analysis.plan``: the configured model, instance and tensor parallel size); with the note that
    says how, or why there is none.

    The run records no engine-side timing (the client sees requests, not steps), so the share is the model's:
    each request's prefill costs its prompt's prefill-only steps, each further output token 1/B of a decode-only
    step at B = the run's concurrency per replica, and the engine's time splits in that ratio."""
    try:
        planner = importlib.import_module("hyperpod_analysis.plan.planner")
    except ImportError:
        return {}, "colocated GPU-hours not split between input and output: planner not installed"
    try:
        inputs = planner.inputs_of(spec)
        model = planner.step_model(inputs)
        out: dict[str, float] = {}
        for m in measurements:
            if m.mode != "colocated":
                continue
            pods = role_pods(m)
            replicas = pods["colocated"].replicas if pods and "colocated" in pods else max(1, m.gpus // inputs.tp)
            out[m.source] = _input_share(model, isl=round(m.input_tokens_mean), osl=round(m.output_tokens_mean),
                                         batch=max(1, round(m.concurrency / max(replicas, 1))),
                                         eager=inputs.decode_eager, chunk=planner.MAX_NUM_BATCHED_TOKENS)
    except Exception as exc:  # the planner is optional: its failure must not lose the measurements
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {}, ("colocated GPU-hours not split between input and output: planner failed: "
                    f"{type(exc).__name__}: {why}")
    return out, (f"colocated GPU-hours split by the input tokens' share of engine step time in the planner's "
                 f"{model.name} step model (docs/benchmark.md, 'Cost per token')")


def token_costs(measurements: list[Measurement], spec: EndpointSpec) -> tuple[dict[str, TokenCost], str]:
    """Every run (by ``source``) -> its :class:`TokenCost`, and how the colocated runs were split. A DPD run's
    prefill requests are its share of its folder's count (``dpd-path.json``) by completed requests: one folder
    holds one declared path (:func:`dpd_path_problems`)."""
    shares, note = step_time_input_shares(spec, measurements)
    folders: dict[str, list[Measurement]] = {}
    for m in measurements:
        folders.setdefault(m.folder, []).append(m)
    out: dict[str, TokenCost] = {}
    for m in measurements:
        record = m.dpd_path or {}
        prefill: float | None = None
        if m.mode == "dpd" and record.get("prefill_requests") is not None:
            completed = sum(x.completed for x in folders[m.folder])
            prefill = float(record["prefill_requests"]) * m.completed / completed if completed else None
        share = shares.get(m.source)
        basis = (f"step model: input tokens {share:.0%} of engine time" if share is not None
                 else "not split (no step model)")
        out[m.source] = token_cost(m, input_share=share, share_basis=basis, prefill_requests=prefill)
    return out, note


@dataclass(frozen=True, kw_only=True)
class Verdict:
    scenario: str
    split: bool | None
    """True: use DPD; False: stay colocated; None: neither mode meets the SLO at any measured load."""
    reason: str


def verdict(scenario: str, cells: list[Cell], spec: EndpointSpec, price: InstancePrice | None = None) -> Verdict:
    """Per shape: the cheapest SLO-meeting load of each mode (GPU-hours per 1M output tokens) decides.

    Only valid cells whose runs cover at least :data:`MIN_REQUESTS` requests count (the others are named in the
    reason); none left: no verdict."""
    bad = [c for c in cells if c.invalid]
    few = [c for c in cells if not c.invalid and not (judged(c.dpd) and judged(c.colocated))]
    cells = [c for c in cells if not c.invalid and judged(c.dpd) and judged(c.colocated)]
    if not cells and few:
        fewest = min(few, key=lambda c: min(c.dpd.n, c.colocated.n))
        n = min(fewest.dpd.n, fewest.colocated.n)
        return Verdict(scenario=scenario, split=None,
                       reason=f"too few requests for a p95: n = {n} at concurrency {fewest.concurrency} (the fewest), "
                              f"below {MIN_REQUESTS} in every cell (docs/benchmark.md); re-run with more requests "
                              "per run (benchmark.max_requests_per_run) before deciding")
    if not cells:
        return Verdict(scenario=scenario, split=None,
                       reason=f"no valid DPD run ({bad[0].invalid if bad else 'no cell'}); re-run after fixing "
                              "the routing (e.g. endpoint.routing_threshold_tokens) before deciding")
    left_out = "".join(f"; concurrency {c.concurrency} left out (n = {min(c.dpd.n, c.colocated.n)} < "
                       f"{MIN_REQUESTS})" for c in few)
    found = _verdict(scenario, cells, spec, price)
    return Verdict(scenario=scenario, split=found.split, reason=found.reason + left_out)


def _verdict(scenario: str, cells: list[Cell], spec: EndpointSpec, price: InstancePrice | None) -> Verdict:
    slo = spec.slo
    best: dict[str, Measurement | None] = {}
    for mode in ("dpd", "colocated"):
        ok = [getattr(c, mode) for c in cells if slo_check(getattr(c, mode), slo).ok]
        best[mode] = min(ok, key=lambda m: m.gpu_hours_per_million_output_tokens()) if ok else None
    d, c = best["dpd"], best["colocated"]
    top = max(cells, key=lambda x: x.concurrency)
    if d is None and c is None:
        miss = "; ".join(slo_check(top.dpd, slo).misses + slo_check(top.colocated, slo).misses)
        return Verdict(scenario=scenario, split=None,
                       reason=f"neither mode meets the endpoint's SLO at any measured concurrency "
                              f"(at {top.concurrency}: {miss}); size up before deciding")
    if c is None:
        assert d is not None
        miss = "; ".join(slo_check(top.colocated, slo).misses)
        return Verdict(scenario=scenario, split=True,
                       reason=f"only DPD meets the endpoint's SLO (colocated at concurrency {top.concurrency}: "
                              f"{miss}); DPD at concurrency {d.concurrency}: {cost_text(d, price)}")
    if d is None:
        miss = "; ".join(slo_check(top.dpd, slo).misses)
        return Verdict(scenario=scenario, split=False,
                       reason=f"DPD misses the endpoint's SLO ({miss} at concurrency {top.concurrency}); "
                              f"colocated meets it: {cost_text(c, price)} at concurrency {c.concurrency}")
    dc, cc = d.gpu_hours_per_million_output_tokens(), c.gpu_hours_per_million_output_tokens()
    margin = spec.benchmark.split_min_saving
    split = dc < cc * (1 - margin)
    costs = (f"DPD {cost_text(d, price)} (concurrency {d.concurrency}) vs colocated {cost_text(c, price)} "
             f"(concurrency {c.concurrency})")
    if split:
        why = "DPD is cheaper per output token"
    elif dc < cc:
        why = f"DPD is cheaper by less than benchmark.split_min_saving ({margin:.0%}), not worth a second pool"
    else:
        why = "colocated is cheaper per output token"
    return Verdict(scenario=scenario, split=split, reason=f"both meet the endpoint's SLO; {why}: {costs}")
