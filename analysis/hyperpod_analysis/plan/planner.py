"""Colocated vs DPD estimates per scenario and concurrency, and a recommendation that is simulated like them.

Public entry points for other code: :func:`estimate_scenarios` (``plan --json``'s scenarios) and
:func:`estimate_experiment` (the benchmark report: the layouts each experiment measures). Both size one endpoint:
they take its :class:`~hyperpod_core.config.spec.EndpointSpec` (or a config file and the endpoint's name).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from hyperpod_analysis.plan import terms
from hyperpod_analysis.plan.engine import EFFICIENCIES, AiConfiguratorEngine, Efficiencies, RooflineEngine, StepModel
from hyperpod_analysis.plan.facts import PINNED_PRICES, ModelShape, PriceTable, instance_facts, resolve_model
from hyperpod_analysis.plan.simulate import DpdParams, EngineSpec, Metrics, simulate
from hyperpod_analysis.plan.traffic import Traffic, parse
from hyperpod_core.config import load_config
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.instances import InstanceFacts
from hyperpod_core.prices import configured_table

#: vLLM's default token budget per step for the OpenAI server on >= 70 GiB GPUs (``max_num_batched_tokens``).
MAX_NUM_BATCHED_TOKENS = 8192
#: Activation and CUDA-graph memory each engine keeps outside the KV cache (AIConfigurator's h100_sxm.yaml
#: ``other_mem`` is 3.5 GiB; we use the same).
RESERVED_BYTES_PER_GPU = 3.5 * (1 << 30)
#: Largest number of prefill nodes the recommendation considers (whole nodes; decode is limited by the operator).
MAX_PREFILL_NODES = 4
MAX_COLOCATED_NODES = 6
IMPROVEMENT_KEYS = ("tpot", "e2e_p50", "output_throughput")
#: The uncertainty of each estimate, recorded from :func:`hyperpod_analysis.plan.validation.validate` (the test
#: recomputes it): the largest left-out error of each improvement metric, in points, and the root-mean-square
#: left-out error of the step times, in percent. :func:`recommend` calls a split uncertain within them.
BANDS: dict[str, float] = {"tpot": 9.1, "e2e_p50": 4.8, "output_throughput": 16.3, "time_pct": 8.5}


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """Everything an estimate depends on, taken from the endpoint's spec and the flags."""

    model: ModelShape
    instance: InstanceFacts
    tp: int
    max_model_len: int
    gpu_memory_utilization: float
    prefill_max_num_seqs: int
    decode_max_num_seqs: int
    prefill_eager: bool
    decode_eager: bool
    routing_threshold_tokens: int
    pd_buffer_size_bytes: int
    prefill_replicas: int
    decode_replicas: int
    max_decode_replicas: int
    roles_share_nodes: bool = False
    """Prefill and decode may land on one instance group (:func:`_roles_share_a_group`): their engines pack onto the
    same nodes (``nodes_for(P + D)``); else each role takes whole nodes of its own."""
    routing_strategy: str = "prefixaware"
    kv_transfer_bytes_per_s: float = terms.MEASURED_KV_TRANSFER_BYTES_PER_S
    prefix_reuse: float = 0.0
    ttft_slo_s: float = 2.0
    tpot_slo_s: float = 0.1
    prices: PriceTable = PINNED_PRICES
    engine: str = "roofline"
    efficiencies: Efficiencies = EFFICIENCIES
    requests_per_run: int = 320
    """Completed requests per closed-loop run (``benchmark.max_requests_per_run``, as genai-bench stops)."""
    warmup_ratio: float = 0.1
    """Share of a run's first completions left out of the latency statistics (``benchmark.warmup_ratio``)."""


def inputs_of(spec: EndpointSpec, *, model: str | None = None, **overrides: Any) -> PlanInputs:
    """The planner's inputs for one endpoint: its model, instance type, TP, roles, threshold, buffer and SLOs (its
    own ``slo`` over ``observability.slo``), and the benchmark's run length."""
    from hyperpod_core import pins

    e = spec.endpoint
    inst = instance_facts(e.instance_type)
    terms.replicas_per_node(e.tensor_parallel_size, inst.gpus)
    shape = resolve_model(model) if model else _configured_model(spec)
    inputs = PlanInputs(
        model=shape, instance=inst, tp=e.tensor_parallel_size, max_model_len=e.max_model_len,
        gpu_memory_utilization=e.gpu_memory_utilization,
        prefill_max_num_seqs=e.prefill.max_num_seqs, decode_max_num_seqs=e.decode.max_num_seqs,
        prefill_eager="--enforce-eager" in e.prefill.extra_args, decode_eager="--enforce-eager" in e.decode.extra_args,
        routing_threshold_tokens=e.routing_threshold_tokens, pd_buffer_size_bytes=e.pd_buffer_size_bytes,
        prefill_replicas=e.prefill.replicas, decode_replicas=e.decode.replicas,
        max_decode_replicas=pins.DPD_MAX_DECODE_REPLICAS, roles_share_nodes=_roles_share_a_group(spec),
        routing_strategy=e.routing_strategy,
        ttft_slo_s=spec.slo.ttft_p95_seconds, tpot_slo_s=spec.slo.tpot_p95_seconds,
        requests_per_run=spec.benchmark.max_requests_per_run, warmup_ratio=spec.benchmark.warmup_ratio,
        prices=configured_table(e.instance_type, spec.benchmark.instance_hour_usd))
    return replace(inputs, **overrides)


def _roles_share_a_group(spec: EndpointSpec) -> bool:
    """Both roles may land on one instance group (:meth:`EndpointSpec.role_groups`: the group both name, or groups
    neither role's selector keeps the other off), so the scheduler may put a prefill and a decode engine on one
    node."""
    prefill = {g.name for g in spec.role_groups("prefill")}
    return not prefill.isdisjoint(g.name for g in spec.role_groups("decode"))


def _configured_model(spec: EndpointSpec) -> ModelShape:
    """The endpoint's model by ``model.name``, else by its S3 folder name (``models/Llama-3.3-70B-Instruct/``)."""
    from hyperpod_core.models import MODELS, known_model, s3_folder

    m = spec.model
    shape = known_model(m.name, m.s3_prefix)
    if shape is not None:
        return shape
    raise UsageError(f"--model is needed: {spec.model_field('name')} {m.name!r} (s3 folder "
                     f"{s3_folder(m.s3_prefix)!r}) is not one the planner knows ({', '.join(MODELS)}); "
                     "pass --model NAME or a Hugging Face config.json, got none")


def _spec(spec: EndpointSpec | str | Path, endpoint: str | None) -> EndpointSpec:
    """``spec``, or the endpoint ``endpoint`` of the config file at ``spec`` (its only one when ``None``)."""
    return spec if isinstance(spec, EndpointSpec) else load_config(spec).spec(endpoint)


def check_traffic(inputs: PlanInputs, traffic: Traffic) -> Traffic:
    """Every request must fit ``max_model_len`` (vLLM rejects longer ones)."""
    if traffic.max_total() > inputs.max_model_len:
        raise UsageError(f"--traffic {traffic.text} needs prompt + output up to {traffic.max_total()} tokens, which "
                         f"must fit endpoint.max_model_len ({inputs.max_model_len}), got more")
    return traffic


def step_model(inputs: PlanInputs) -> StepModel:
    if inputs.engine == "roofline":
        return RooflineEngine(inputs.model, inputs.instance.gpu, inputs.tp, inputs.efficiencies)
    if inputs.engine == "aiconfigurator":
        return AiConfiguratorEngine(inputs.model, inputs.instance.gpu, inputs.tp, inputs.efficiencies)
    raise UsageError(f"--engine must be roofline or aiconfigurator, got {inputs.engine!r}")


def kv_capacity_tokens(inputs: PlanInputs, *, pd_buffer: bool) -> int:
    """KV-cache tokens one engine holds: (HBM x utilization - weights - reserve [- PD buffer]) per GPU."""
    per_gpu = inputs.instance.gpu.memory_bytes * inputs.gpu_memory_utilization - inputs.model.weight_bytes / inputs.tp \
        - RESERVED_BYTES_PER_GPU - (inputs.pd_buffer_size_bytes if pd_buffer else 0)
    tokens = int(per_gpu * inputs.tp / terms.kv_bytes_per_token(inputs.model))
    if tokens < inputs.max_model_len:
        raise UsageError(f"endpoint.tensor_parallel_size {inputs.tp} leaves room for {max(tokens, 0)} KV tokens of "
                         f"{inputs.model.name} on {inputs.instance.gpu.name}; must hold endpoint.max_model_len "
                         f"({inputs.max_model_len}), got too few GPUs per engine")
    return tokens


@dataclass(frozen=True, kw_only=True)
class Layout:
    """Replicas per role; nodes follow from HyperPod's whole-node granularity (each role's own nodes, or the two
    roles packed together when they share an instance group: :attr:`PlanInputs.roles_share_nodes`)."""

    colocated_replicas: int = 0
    prefill_replicas: int = 0
    decode_replicas: int = 0
    routing_threshold_tokens: int = 0

    @property
    def split(self) -> bool:
        return self.prefill_replicas > 0

    def nodes(self, inputs: PlanInputs) -> int:
        n = inputs.instance.gpus
        if self.split and inputs.roles_share_nodes:
            return terms.nodes_for(self.prefill_replicas + self.decode_replicas, inputs.tp, n)
        if self.split:
            return terms.nodes_for(self.prefill_replicas, inputs.tp, n) + terms.nodes_for(self.decode_replicas,
                                                                                          inputs.tp, n)
        return terms.nodes_for(self.colocated_replicas, inputs.tp, n)


def run(inputs: PlanInputs, model: StepModel, traffic: Traffic, layout: Layout, *, concurrency: int | None,
        request_rate: float | None, pd_buffer_bytes: int | None = None) -> Metrics:
    """One simulated run of one layout."""
    client: dict[str, Any] = {"requests": inputs.requests_per_run, "warmup_ratio": inputs.warmup_ratio}
    if not layout.split:
        spec = EngineSpec(max_num_seqs=inputs.decode_max_num_seqs, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                          kv_capacity_tokens=kv_capacity_tokens(inputs, pd_buffer=False), eager=inputs.decode_eager)
        return simulate(model=model, traffic=traffic, concurrency=concurrency, request_rate=request_rate,
                        prefix_reuse=inputs.prefix_reuse, colocated=spec, colocated_replicas=layout.colocated_replicas,
                        **client)
    connector = model.connector_seconds()
    buffer_bytes = pd_buffer_bytes or inputs.pd_buffer_size_bytes
    prefill = EngineSpec(max_num_seqs=inputs.prefill_max_num_seqs, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                         kv_capacity_tokens=kv_capacity_tokens(inputs, pd_buffer=False), eager=inputs.prefill_eager,
                         connector_seconds_per_step=connector)
    decode = EngineSpec(max_num_seqs=inputs.decode_max_num_seqs, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                        kv_capacity_tokens=kv_capacity_tokens(inputs, pd_buffer=True), eager=inputs.decode_eager,
                        connector_seconds_per_step=connector)
    rate = terms.kv_transfer_bytes_per_s(inputs.instance, inputs.kv_transfer_bytes_per_s)
    dpd = DpdParams(
        transfer_seconds_per_token=terms.kv_transfer_seconds(1, inputs.model, rate),
        handoff_seconds=inputs.efficiencies.handoff_seconds, routing_threshold_tokens=layout.routing_threshold_tokens,
        pd_buffer_tokens=int(buffer_bytes * inputs.tp / terms.kv_bytes_per_token(inputs.model)))
    return simulate(model=model, traffic=traffic, concurrency=concurrency, request_rate=request_rate,
                    prefix_reuse=inputs.prefix_reuse, prefill=prefill, prefill_replicas=layout.prefill_replicas,
                    decode=decode, decode_replicas=layout.decode_replicas, dpd=dpd, **client)


def _phase(m: Metrics) -> dict[str, float]:
    return {"ttft_ms": round(m.ttft_ms, 1), "tpot_ms": round(m.tpot_ms, 2), "e2e_p50_ms": round(m.e2e_p50_ms, 1),
            "output_tokens_per_s": round(m.output_tokens_per_s, 1)}


def improvement(colocated: Metrics, dpd: Metrics) -> dict[str, float]:
    """Percent improvement of DPD over colocated; positive when DPD is better."""
    return {
        "tpot": round(100 * (colocated.tpot_ms - dpd.tpot_ms) / colocated.tpot_ms, 1),
        "e2e_p50": round(100 * (colocated.e2e_p50_ms - dpd.e2e_p50_ms) / colocated.e2e_p50_ms, 1),
        "output_throughput": round(
            100 * (dpd.output_tokens_per_s - colocated.output_tokens_per_s) / colocated.output_tokens_per_s, 1),
    }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One scenario at one load: colocated one node, colocated on DPD's GPUs, DPD, and the recommended layout."""

    traffic: Traffic
    concurrency: int | None
    request_rate: float | None
    layout: Layout
    colocated: Metrics
    colocated_equal_gpus: Metrics
    dpd: Metrics
    recommended: tuple[Layout, Metrics] | None = None
    """The recommendation's layout, simulated like the others (None: it is one of the rows above)."""

    def as_dict(self) -> dict[str, Any]:
        """The issue's --json scenario structure."""
        load: dict[str, Any] = ({"concurrency": self.concurrency} if self.concurrency is not None
                                else {"request_rate": self.request_rate})
        return {"traffic": self.traffic.text, **load, "colocated": _phase(self.colocated), "dpd": _phase(self.dpd),
                "improvement_pct": improvement(self.colocated, self.dpd)}


def compare(inputs: PlanInputs, model: StepModel, traffic: Traffic, *, concurrency: int | None = None,
            request_rate: float | None = None, layout: Layout | None = None,
            recommended: Layout | None = None) -> Comparison:
    dpd_layout = layout or Layout(prefill_replicas=inputs.prefill_replicas, decode_replicas=inputs.decode_replicas,
                                  routing_threshold_tokens=inputs.routing_threshold_tokens)
    per_node = terms.replicas_per_node(inputs.tp, inputs.instance.gpus)
    one_node = Layout(colocated_replicas=per_node)
    equal = Layout(colocated_replicas=per_node * dpd_layout.nodes(inputs))
    extra = None
    if recommended is not None and recommended not in (one_node, equal, dpd_layout):
        extra = (recommended, run(inputs, model, traffic, recommended, concurrency=concurrency,
                                  request_rate=request_rate))
    return Comparison(
        traffic=traffic, concurrency=concurrency, request_rate=request_rate, layout=dpd_layout,
        colocated=run(inputs, model, traffic, one_node, concurrency=concurrency, request_rate=request_rate),
        colocated_equal_gpus=run(inputs, model, traffic, equal, concurrency=concurrency, request_rate=request_rate),
        dpd=run(inputs, model, traffic, dpd_layout, concurrency=concurrency, request_rate=request_rate),
        recommended=extra)


def recommended_layout(rec: dict[str, Any]) -> Layout:
    return Layout(**rec["layout"])


def estimate_scenarios(spec: EndpointSpec | str | Path, traffic: Sequence[str], concurrencies: Sequence[int], *,
                       endpoint: str | None = None, model: str | None = None,
                       **overrides: Any) -> list[dict[str, Any]]:
    """Colocated (one node) vs DPD (the endpoint's prefill and decode replicas) per scenario and concurrency, as the
    ``scenarios`` entries of ``hyperpod-dpd plan --json`` (improvement positive when DPD is better).

    ``spec`` is an endpoint's spec (``Config.spec(name)``) or a config file path, with ``endpoint`` its endpoint's
    name (``None``: the only one); ``overrides`` are :class:`PlanInputs` fields (e.g.
    ``kv_transfer_bytes_per_s=7e9``, ``prefix_reuse=0.3``, ``engine="aiconfigurator"``).
    """
    inputs = inputs_of(_spec(spec, endpoint), model=model, **overrides)
    sm = step_model(inputs)
    return [compare(inputs, sm, check_traffic(inputs, parse(t)), concurrency=c).as_dict()
            for t in traffic for c in concurrencies]


Experiment = Literal["aws-reference", "equal-gpu"]


def _gpus(inputs: PlanInputs, layout: Layout) -> int:
    """GPUs the layout's replicas hold (``replicas x tensor parallel``), as the benchmark counts them."""
    replicas = layout.prefill_replicas + layout.decode_replicas if layout.split else layout.colocated_replicas
    return replicas * inputs.tp


def experiment_layouts(inputs: PlanInputs, experiment: Experiment) -> tuple[Layout, Layout]:
    """(colocated, DPD) layouts the benchmark's ``experiment`` runs (``hyperpod_k8s.benchmark``):

    * ``aws-reference``: AWS's comparison, 1 prefill + 1 decode replica vs ONE colocated replica
      (``reference_props``: the same props with only the replica counts changed);
    * ``equal-gpu``: the configured DPD endpoint vs colocated replicas on as many GPUs (``compare``'s
      ``colocated_equal_gpus`` when TP fills a node; the colocated manifest holds ``DPD GPUs // TP`` replicas,
      ``endpoint_props``)."""
    threshold = inputs.routing_threshold_tokens
    if experiment == "aws-reference":
        return (Layout(colocated_replicas=1),
                Layout(prefill_replicas=1, decode_replicas=1, routing_threshold_tokens=threshold))
    dpd = Layout(prefill_replicas=inputs.prefill_replicas, decode_replicas=inputs.decode_replicas,
                 routing_threshold_tokens=threshold)
    return Layout(colocated_replicas=max(1, _gpus(inputs, dpd) // inputs.tp)), dpd


def estimate_experiment(spec: EndpointSpec | str | Path, experiment: Experiment, traffic: Sequence[str],
                        concurrencies: Sequence[int], *, endpoint: str | None = None, model: str | None = None,
                        **overrides: Any) -> list[dict[str, Any]]:
    """The planner's estimate of the layouts ``experiment`` measures, per scenario and concurrency: the
    ``scenarios`` entry shape of ``plan --json`` plus ``experiment`` and each side's ``gpus``. The report draws
    it beside that experiment's cells only, so a one-node estimate never sits beside an equal-GPU measurement.
    ``spec`` and ``endpoint``: as :func:`estimate_scenarios`'s."""
    inputs = inputs_of(_spec(spec, endpoint), model=model, **overrides)
    sm = step_model(inputs)
    colocated, dpd = experiment_layouts(inputs, experiment)
    rows = []
    for t in traffic:
        tr = check_traffic(inputs, parse(t))
        for n in concurrencies:
            c = run(inputs, sm, tr, colocated, concurrency=n, request_rate=None)
            d = run(inputs, sm, tr, dpd, concurrency=n, request_rate=None)
            rows.append({"experiment": experiment, "traffic": tr.text, "concurrency": n, "colocated": _phase(c),
                         "dpd": _phase(d), "improvement_pct": improvement(c, d),
                         "gpus": {"colocated": _gpus(inputs, colocated), "dpd": _gpus(inputs, dpd)}})
    return rows


# --- cost -----------------------------------------------------------------------------------------------


def node_hours_per_million(nodes: int, tokens_per_s: float) -> float:
    """Instance-hours one million output tokens take: what the recommendation minimizes (price or not)."""
    return round(nodes / tokens_per_s * 1e6 / 3600, 3) if tokens_per_s > 0 else math.inf


def cost_per_million_output_tokens(inputs: PlanInputs, nodes: int, tokens_per_s: float) -> float | None:
    """USD per 1M output tokens, or None without a price for the instance type."""
    usd = inputs.prices.price(inputs.instance.instance_type)
    return None if usd is None else round(usd * node_hours_per_million(nodes, tokens_per_s), 2)


def tokens_per_s_per_gpu(inputs: PlanInputs, nodes: int, tokens_per_s: float) -> float:
    return round(tokens_per_s / (nodes * inputs.instance.gpus), 1)


def price_note(inputs: PlanInputs) -> str:
    usd = inputs.prices.price(inputs.instance.instance_type)
    if usd is None:
        return (f"no price for {inputs.instance.instance_type} (none pinned from a public price page): cost columns "
                f"left out; pass --price {inputs.instance.instance_type}=USD_PER_HOUR for them")
    return f"price {usd:g} USD per instance-hour ({inputs.prices.source}, {inputs.prices.as_of})"


# --- recommendation -------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Candidate:
    layout: Layout
    nodes: int
    worst_ttft_p95_s: float
    worst_tpot_p95_s: float
    node_hours_per_million: float
    peak_buffer_tokens: int
    tokens_per_s: float = 0.0

    def meets(self, inputs: PlanInputs) -> bool:
        return self.worst_ttft_p95_s <= inputs.ttft_slo_s and self.worst_tpot_p95_s <= inputs.tpot_slo_s

    def slo_margin(self, inputs: PlanInputs) -> float:
        """How far under (positive) or over (negative) the tighter SLO it lands, as a share of that SLO."""
        return 1 - max(self.worst_ttft_p95_s / inputs.ttft_slo_s, self.worst_tpot_p95_s / inputs.tpot_slo_s)


#: The loads a candidate is evaluated under: (traffic, concurrency, request rate) per scenario.
_Loads = list[tuple[Traffic, int | None, float | None]]


def _evaluate(inputs: PlanInputs, model: StepModel, loads: _Loads, layout: Layout) -> Candidate:
    nodes = layout.nodes(inputs)
    ttft = tpot = 0.0
    tokens = seconds = 0.0
    peak = 0
    for traffic, c, rate in loads:
        m = run(inputs, model, traffic, layout, concurrency=c, request_rate=rate, pd_buffer_bytes=64 << 30)
        ttft, tpot = max(ttft, math.inf if m.saturated else m.ttft_p95_ms / 1e3), max(tpot, m.tpot_p95_ms / 1e3)
        tokens += m.output_tokens_per_s
        seconds += 1
        peak = max(peak, m.peak_buffer_tokens)
    return Candidate(layout=layout, nodes=nodes, worst_ttft_p95_s=ttft, worst_tpot_p95_s=tpot,
                     node_hours_per_million=node_hours_per_million(nodes, tokens / seconds), peak_buffer_tokens=peak,
                     tokens_per_s=tokens / seconds)


def recommend(inputs: PlanInputs, model: StepModel, traffics: Sequence[Traffic], concurrencies: Sequence[int],
              request_rate: float | None = None, bands: dict[str, float] | None = None) -> dict[str, Any]:
    """The layout with the fewest instance-hours per 1M output tokens (the cheapest at any one price) that meets
    the SLOs at the highest load of every scenario; split when it is DPD. ``bands`` (default :data:`BANDS`) say
    when the estimate cannot tell split from no split. Raises :class:`CommandFailed` when nothing meets the SLOs."""
    top = max(concurrencies) if concurrencies else None
    loads = [(t, top, request_rate if top is None else None) for t in traffics]
    candidates = _candidates(inputs, model, loads)
    feasible = [c for c in candidates if c.meets(inputs)]
    if not feasible:
        raise _nothing_meets_the_slo(inputs, candidates, traffics, top, request_rate)
    chosen = _with_tuned_threshold(inputs, model, loads,
                                   min(feasible, key=lambda c: (c.node_hours_per_million, c.nodes)))
    best_coloc, best_dpd = (min((c for c in candidates if c.layout.split == split and c.meets(inputs)),
                                key=lambda c: c.node_hours_per_million, default=None) for split in (False, True))
    other = best_coloc if chosen.layout.split else best_dpd
    uncertain, why = _crosses_line(inputs, chosen, other, candidates, bands or BANDS)
    return {
        **_settings(inputs, chosen, max(t.mean_input for t in traffics), top),
        **_estimates(inputs, model, chosen, best_coloc, best_dpd),
        "reason": _reason(chosen, other),
        "uncertain": uncertain,
        "uncertainty": why,
        "layout": {"colocated_replicas": chosen.layout.colocated_replicas,
                   "prefill_replicas": chosen.layout.prefill_replicas,
                   "decode_replicas": chosen.layout.decode_replicas,
                   "routing_threshold_tokens": chosen.layout.routing_threshold_tokens},
    }



def _candidates(inputs: PlanInputs, model: StepModel, loads: _Loads) -> list[Candidate]:
    """Colocated on 1 to :data:`MAX_COLOCATED_NODES` nodes, then DPD with 1 to :data:`MAX_PREFILL_NODES` prefill
    nodes beside the configured decode replicas (at most the operator's limit), each evaluated under ``loads``."""
    per_node = terms.replicas_per_node(inputs.tp, inputs.instance.gpus)
    layouts = [Layout(colocated_replicas=per_node * n) for n in range(1, MAX_COLOCATED_NODES + 1)]
    decode_replicas = min(max(inputs.decode_replicas, 1), inputs.max_decode_replicas)
    layouts += [Layout(prefill_replicas=per_node * p_nodes, decode_replicas=decode_replicas,
                       routing_threshold_tokens=inputs.routing_threshold_tokens)
                for p_nodes in range(1, MAX_PREFILL_NODES + 1)]
    return [_evaluate(inputs, model, loads, layout) for layout in layouts]


def _nothing_meets_the_slo(inputs: PlanInputs, candidates: list[Candidate], traffics: Sequence[Traffic],
                           top: int | None, request_rate: float | None) -> CommandFailed:
    """The error when no candidate meets the SLOs, naming the closest one."""
    best = min(candidates, key=lambda c: (max(c.worst_ttft_p95_s / inputs.ttft_slo_s,
                                               c.worst_tpot_p95_s / inputs.tpot_slo_s), -c.tokens_per_s))
    return CommandFailed(
        f"no layout meets the SLO (TTFT p95 <= {inputs.ttft_slo_s:g} s, TPOT p95 <= {inputs.tpot_slo_s:g} s) for "
        f"{', '.join(t.text for t in traffics)} at {_load_text(top, request_rate)}: neither colocated on up to "
        f"{MAX_COLOCATED_NODES} nodes nor DPD with up to {MAX_PREFILL_NODES} prefill nodes; closest: "
        f"{layout_text(best.layout)} with TTFT p95 {_seconds(best.worst_ttft_p95_s)}, TPOT p95 "
        f"{1e3 * best.worst_tpot_p95_s:.0f} ms")


def _with_tuned_threshold(inputs: PlanInputs, model: StepModel, loads: _Loads, chosen: Candidate) -> Candidate:
    """A DPD choice at the routing threshold (the configured one, 1024, 2048, 4096 or 8192, below
    ``max_model_len``) that meets the SLOs with at least 2 % fewer instance-hours; else ``chosen``."""
    thresholds = sorted({inputs.routing_threshold_tokens, 1024, 2048, 4096, 8192} - {0})
    thresholds = [t for t in thresholds if t < inputs.max_model_len]
    if not chosen.layout.split or len(thresholds) <= 1:
        return chosen
    trials = [_evaluate(inputs, model, loads, replace(chosen.layout, routing_threshold_tokens=t))
              for t in thresholds]
    better = [c for c in trials if c.meets(inputs)
              and c.node_hours_per_million < chosen.node_hours_per_million * 0.98]
    return min(better, key=lambda c: c.node_hours_per_million) if better else chosen


def _settings(inputs: PlanInputs, chosen: Candidate, mean_isl: float, top: int | None) -> dict[str, Any]:
    """The recommendation's endpoint settings (what ``plan --write`` merges into the config)."""
    split = chosen.layout.split
    per_decoder = math.ceil((top or 1) / max(chosen.layout.decode_replicas, 1)) if top else inputs.decode_max_num_seqs
    decode_seqs = min(max(inputs.decode_max_num_seqs, 1 << max(0, math.ceil(math.log2(max(per_decoder, 1))))), 256)
    prefill_seqs = max(inputs.prefill_max_num_seqs, math.ceil(MAX_NUM_BATCHED_TOKENS / max(mean_isl, 1)))
    n = inputs.instance.gpus
    # The router picks the prefiller: prefixaware/kvaware for one, roundrobin for several (operator.md, DPD guide).
    strategy = "roundrobin" if split and chosen.layout.prefill_replicas > 1 else inputs.routing_strategy
    return {
        "split": split,
        "instance_type": inputs.instance.instance_type,
        "prefill_replicas": chosen.layout.prefill_replicas if split else 0,
        "decode_replicas": chosen.layout.decode_replicas if split else 0,
        "colocated_replicas": 0 if split else chosen.layout.colocated_replicas,
        "prefill_nodes": terms.nodes_for(chosen.layout.prefill_replicas, inputs.tp, n) if split else 0,
        "decode_nodes": terms.nodes_for(chosen.layout.decode_replicas, inputs.tp, n) if split else 0,
        "nodes": chosen.nodes,
        "routing_threshold_tokens": (chosen.layout.routing_threshold_tokens if split
                                     else inputs.routing_threshold_tokens),
        # Only ever raised: AWS's guidance is to raise PD_BUFFER_SIZE on OOM, and the decoder also buffers bursts.
        "pd_buffer_size_bytes": max(inputs.pd_buffer_size_bytes, terms.pd_buffer_bytes(
            max(chosen.peak_buffer_tokens, int(mean_isl)), inputs.model, inputs.tp)),
        "routing_strategy": strategy,
        "max_num_seqs": {"prefill": prefill_seqs, "decode": decode_seqs},
    }


def _estimates(inputs: PlanInputs, model: StepModel, chosen: Candidate, best_coloc: Candidate | None,
               best_dpd: Candidate | None) -> dict[str, Any]:
    """What the recommendation expects: the chosen layout's latencies, and each side's cost at its best."""
    usd = inputs.prices.price(inputs.instance.instance_type)
    return {
        "ttft_p95_ms": round(1e3 * chosen.worst_ttft_p95_s, 1),
        "tpot_p95_ms": round(1e3 * chosen.worst_tpot_p95_s, 2),
        "instance_hours_per_1m_output_tokens": {
            "colocated": best_coloc.node_hours_per_million if best_coloc else None,
            "dpd": best_dpd.node_hours_per_million if best_dpd else None},
        "cost_per_1m_output_tokens_usd": None if usd is None else {
            "colocated": round(usd * best_coloc.node_hours_per_million, 2) if best_coloc else None,
            "dpd": round(usd * best_dpd.node_hours_per_million, 2) if best_dpd else None},
        "price_usd_per_instance_hour": usd,
        "price_source": f"{inputs.prices.source} ({inputs.prices.as_of})" if usd is not None else None,
        "engine": model.name,
    }


def _reason(chosen: Candidate, other: Candidate | None) -> str:
    """Why this side: its instance-hours against the other side's best layout, named (it may be none of the
    printed rows, e.g. DPD with 2 prefill nodes)."""
    split = chosen.layout.split
    if other is None:
        return f"no {'colocated' if split else 'DPD'} layout meets the SLO"
    return (f"{'DPD' if split else 'colocated'} takes {chosen.node_hours_per_million:.3g} instance-hours per 1M "
            f"output tokens vs {other.node_hours_per_million:.3g} with {layout_text(other.layout)} "
            f"({other.nodes} nodes), the best {'colocated' if split else 'DPD'} layout that meets the SLO")


def _crosses_line(inputs: PlanInputs, chosen: Candidate, other: Candidate | None, candidates: list[Candidate],
                  band: dict[str, float]) -> tuple[bool, str]:
    """Whether the validation's band reaches the other side of the split/no-split decision."""
    tokens_band = band["output_throughput"]
    time_band = band["time_pct"] / 100
    if other is not None:
        gap = 100 * (other.node_hours_per_million / chosen.node_hours_per_million - 1)
        if gap <= tokens_band:
            return True, (f"the two sides differ by {gap:.0f} % in instance-hours per token, inside the throughput "
                          f"band of +-{tokens_band:.0f} points: benchmark both (hyperpod-dpd bench) before deciding")
    if chosen.slo_margin(inputs) < time_band:
        return True, (f"the chosen layout meets the SLO by {100 * chosen.slo_margin(inputs):.0f} %, inside the time "
                      f"band of +-{100 * time_band:.0f} %: benchmark it (hyperpod-dpd bench) before deciding")
    near = [c for c in candidates if c.layout.split != chosen.layout.split and not c.meets(inputs)
            and c.slo_margin(inputs) > -time_band
            and c.node_hours_per_million < chosen.node_hours_per_million]
    if near:
        return True, (f"{layout_text(near[0].layout)} misses the SLO by less than the time band (+-"
                      f"{100 * time_band:.0f} %) and would take fewer instance-hours: benchmark both before deciding")
    return False, (f"the other side is outside the bands (throughput +-{tokens_band:.0f} points, times "
                   f"+-{100 * time_band:.0f} %)")


def _seconds(s: float) -> str:
    return "unbounded (overloaded)" if math.isinf(s) else f"{s:.2f} s"


def _load_text(concurrency: int | None, rate: float | None) -> str:
    return f"concurrency {concurrency}" if concurrency is not None else f"{rate:g} requests/s"


def layout_text(layout: Layout) -> str:
    if layout.split:
        return f"DPD {layout.prefill_replicas} prefill + {layout.decode_replicas} decode"
    return f"colocated x{layout.colocated_replicas}"
