"""Colocated vs DPD, cell by cell: % improvements, GPU-normalized throughput, cost, SLO checks and a verdict.

Sign convention (AWS's charts: "higher bars indicate larger DPD advantage"): latency improvement =
(colocated - dpd) / colocated, throughput improvement = (dpd - colocated) / colocated, both in percent.

Two experiments, never mixed: ``aws-reference`` (AWS's layouts, compared with AWS's published statements, with
the setup's deviations from AWS's listed next to it) and ``equal-gpu`` (the configured endpoint against colocated
replicas on as many GPUs: the only basis of the verdicts). A DPD run whose requests did not take the path its
scenario declares (``dpd-path.json``: the prefill pods' finished requests), and a run of either mode that ran on
other GPUs than it records (``serving.json``), is invalid: shown, never compared.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_analysis.report.results import Measurement
from hyperpod_core.config import Config
from hyperpod_core.instances import DPD_INSTANCE_GPUS

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

METRICS = ("tpot", "e2e_p50", "e2e_p90", "ttft", "output_throughput")
LABELS = {"tpot": "TPOT (mean)", "e2e_p50": "E2E P50", "e2e_p90": "E2E P90", "ttft": "TTFT (mean)",
          "output_throughput": "Output throughput", "output_throughput_per_gpu": "Output tokens/s per GPU"}


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

    After each DPD run ``bench`` stores the prefill pods' finished requests during the run (``dpd-path.json``).
    The requests of the scenarios that declare the DPD path must have reached them (at least :data:`PATH_SHARE`
    of those the run completed; warm-up requests only add), and a run of only ``direct`` scenarios must have
    left them nearly idle. D(4096,256) sits at the routing threshold, and the router's token estimate is its own:
    without this check a "DPD" run may have measured decode alone."""
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


def reference_deviations(config: Config, cells: list[Cell]) -> list[str]:
    """How this run of the aws-reference experiment differs from AWS's published setup (one line each)."""
    ref, e = AWS_REFERENCE_SETUP, config.endpoint
    ours = {"instance_type": e.instance_type, "tensor_parallel_size": e.tensor_parallel_size,
            "max_model_len": e.max_model_len, "prefill_gpus": e.prefill.gpus, "decode_gpus": e.decode.gpus,
            "prefill_enforce_eager": "--enforce-eager" in e.prefill.extra_args}
    out = [f"{k}: {v} (AWS: {ref[k]})" for k, v in ours.items() if v != ref[k]]
    strategies = sorted({str(c.dpd.record.get("routing_strategy") or e.routing_strategy) for c in cells})
    if strategies != [ref["routing_strategy"]]:
        out.append(f"routing: {', '.join(strategies)} instead of AWS's kvaware (KV-aware routing needs "
                   "endpoint.invocation_path v1/completions, and genai-bench 0.0.5's OpenAI client posts to "
                   "/v1/chat/completions only)")
    if ref["model"].lower().replace(".", "-") not in config.model.name.lower().replace(".", "-"):
        out.append(f"model: {config.model.name} (AWS: {ref['model']})")
    return out


def planner_estimates(config: Config, traffics: list[str], levels: list[int], *, experiment: str = "equal-gpu"
                      ) -> tuple[dict[tuple[str, int], dict[str, Any]] | None, str]:
    """The sizing planner's estimate of ``experiment``'s layouts per (traffic, concurrency), when
    ``hyperpod_analysis.plan`` is installed: equal-gpu, the configured DPD endpoint vs colocated on as many GPUs;
    aws-reference, 1 prefill + 1 decode replica vs one colocated replica (``estimate_experiment``).

    Returns ``(estimates or None, note)``; the note says why there is none.
    """
    try:
        estimate_experiment = importlib.import_module("hyperpod_analysis.plan").estimate_experiment
    except (ImportError, AttributeError):
        return None, "planner not installed (hyperpod_analysis.plan): no estimates"
    try:
        rows = estimate_experiment(config, experiment, traffics, levels)
    except Exception as exc:  # the planner is optional: its failure must not lose the measurements
        return None, f"planner failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
    return ({(str(r["traffic"]), int(r["concurrency"])): r for r in rows},
            "planner estimates from hyperpod_analysis.plan")


# --- SLO, cost, verdict -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SloCheck:
    ok: bool
    misses: list[str]


def slo_check(m: Measurement, config: Config) -> SloCheck:
    """``observability.slo``: TTFT p95, TPOT p95 and the error ratio the alerts use."""
    slo = config.observability.slo
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


def cost_text(m: Measurement, config: Config) -> str:
    gpu_h = m.gpu_hours_per_million_output_tokens()
    price = config.benchmark.instance_hour_usd
    text = f"{gpu_h:.2f} GPU-h"
    if price is not None:
        usd = gpu_h * price / DPD_INSTANCE_GPUS.get(config.endpoint.instance_type, 8)
        text += f" (${usd:.2f})"
    return text + " per 1M output tokens"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    scenario: str
    split: bool | None
    """True: use DPD; False: stay colocated; None: neither mode meets the SLO at any measured load."""
    reason: str


def verdict(scenario: str, cells: list[Cell], config: Config) -> Verdict:
    """Per shape: the cheapest SLO-meeting load of each mode (GPU-hours per 1M output tokens) decides.

    Only valid cells count; none valid: no verdict."""
    bad = [c for c in cells if c.invalid]
    cells = [c for c in cells if not c.invalid]
    if not cells:
        return Verdict(scenario=scenario, split=None,
                       reason=f"no valid DPD run ({bad[0].invalid if bad else 'no cell'}); re-run after fixing "
                              "the routing (e.g. endpoint.routing_threshold_tokens) before deciding")
    best: dict[str, Measurement | None] = {}
    for mode in ("dpd", "colocated"):
        ok = [getattr(c, mode) for c in cells if slo_check(getattr(c, mode), config).ok]
        best[mode] = min(ok, key=lambda m: m.gpu_hours_per_million_output_tokens()) if ok else None
    d, c = best["dpd"], best["colocated"]
    top = max(cells, key=lambda x: x.concurrency)
    if d is None and c is None:
        miss = "; ".join(slo_check(top.dpd, config).misses + slo_check(top.colocated, config).misses)
        return Verdict(scenario=scenario, split=None,
                       reason=f"neither mode meets observability.slo at any measured concurrency "
                              f"(at {top.concurrency}: {miss}); size up before deciding")
    if c is None:
        assert d is not None
        miss = "; ".join(slo_check(top.colocated, config).misses)
        return Verdict(scenario=scenario, split=True,
                       reason=f"only DPD meets observability.slo (colocated at concurrency {top.concurrency}: "
                              f"{miss}); DPD at concurrency {d.concurrency}: {cost_text(d, config)}")
    if d is None:
        miss = "; ".join(slo_check(top.dpd, config).misses)
        return Verdict(scenario=scenario, split=False,
                       reason=f"DPD misses observability.slo ({miss} at concurrency {top.concurrency}); "
                              f"colocated meets it: {cost_text(c, config)} at concurrency {c.concurrency}")
    dc, cc = d.gpu_hours_per_million_output_tokens(), c.gpu_hours_per_million_output_tokens()
    margin = config.benchmark.split_min_saving
    split = dc < cc * (1 - margin)
    costs = (f"DPD {cost_text(d, config)} (concurrency {d.concurrency}) vs colocated {cost_text(c, config)} "
             f"(concurrency {c.concurrency})")
    if split:
        why = "DPD is cheaper per output token"
    elif dc < cc:
        why = f"DPD is cheaper by less than benchmark.split_min_saving ({margin:.0%}), not worth a second pool"
    else:
        why = "colocated is cheaper per output token"
    return Verdict(scenario=scenario, split=split, reason=f"both meet observability.slo; {why}: {costs}")
