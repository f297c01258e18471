"""Panels and segments: the middle layer between catalogue metrics and dashboards.

A segment is a titled group of panels about one concern (traffic, latency, ...) for one
:class:`~.queries.Target`. Segments are pure data; ``render.py`` turns them into Grafana JSON, so the same
segment serves the DPD overview and both columns of the DPD-vs-colocated comparison. The autoscaling
signals are shown with exactly the query the endpoint manifest's triggers use (``queries.prefill_queue``,
``queries.decode_kv_usage``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from hyperpod_core.config import SloConfig
from hyperpod_core.prices import InstancePrice
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.queries import (
    Role,
    Target,
    cost_per_million_tokens,
    decode_kv_usage,
    error_ratio,
    failed_requests,
    gauge,
    idle_gpu_share,
    kv_hit_ratio,
    kv_retrieve_speed,
    kv_tokens_received,
    mean,
    pod_restarts,
    prefill_leg_quantile,
    prefill_queue,
    quantile,
    rate_sum,
    user_ttft_mean,
)

PanelKind = Literal["timeseries", "stat"]
RUN_RANGE: Final = "$__range"
"""Grafana's length of the (panel's) time range: a run-summary stat covers exactly the run's window."""


@dataclass(frozen=True, kw_only=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True, kw_only=True)
class PanelSpec:
    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    kind: PanelKind = "timeseries"
    slo: float | None = None
    """Threshold drawn on the panel (the SLO from ``observability.slo``). Default: none."""
    time_shift: str | None = None
    """Grafana panel time shift (e.g. ``$baseline_shift``), so a run in another window lines up. Default: none."""


@dataclass(frozen=True, kw_only=True)
class Segment:
    title: str
    panels: tuple[PanelSpec, ...]

    def shifted(self, time_shift: str, prefix: str) -> Segment:
        return Segment(title=self.title, panels=tuple(
            replace(p, title=f"{prefix}: {p.title}", time_shift=time_shift) for p in self.panels))


SegmentBuilder = Callable[[Target, SloConfig], Segment]
_QUANTILES = (0.5, 0.95, 0.99)
_POD = lbl.POD_NAME


def slo_resolution(bound: float, *metrics: m.Metric) -> str:
    """What a p95 curve against an SLO line can tell: ``histogram_quantile`` interpolates inside the bucket that
    holds the p95, so around the line it is only as fine as the buckets of the histogram the curve reads there.
    A panel whose curves read several histograms (DPD's users' TTFT: the decode TTFT and the prefill leg's E2E)
    names each one's."""

    def step(metric: m.Metric) -> str:
        below = max((b for b in metric.buckets if b < bound), default=0.0)
        above = min((b for b in metric.buckets if b > bound), default=None)
        return f"{below:g} -> {bound:g}" + (f" -> {above:g}" if above is not None else "") + " s"

    if len(metrics) == 1:
        (metric,) = metrics
        where = f"a bucket boundary of {metric.name}"
        around = f"the p95 curves are interpolated inside that histogram's buckets ({step(metric)} around the line)"
    else:
        where = "a bucket boundary of " + " and ".join(x.name for x in metrics)
        around = ("each p95 curve is interpolated inside the buckets of the histogram it reads ("
                  + "; ".join(f"{x.name}: {step(x)}" for x in metrics) + " around the line)")
    return (f"Line: the p95 SLO, {bound:g} s, {where}. Resolution: {around}, so a curve near the line may sit a "
            f"bucket away from the true p95; the alert counts the requests within {bound:g} s exactly.")


def _quantiles(metric: m.Metric, t: Target, role: Role, label: str = "") -> tuple[Query, ...]:
    return tuple(Query(expr=quantile(q, metric, t, role), legend=f"{label}p{round(q * 100)}")
                 for q in _QUANTILES)


def traffic(t: Target, slo: SloConfig) -> Segment:
    total = rate_sum(m.REQUEST_SUCCESS, t, "decode")
    split: tuple[Query, ...] = (Query(expr=total, legend="total"),)
    if t.kind == "dpd":
        # Every request finishes on decode; only those above the routing threshold also ran on prefill.
        disaggregated = rate_sum(m.REQUEST_SUCCESS, t, "prefill")
        split += (Query(expr=disaggregated, legend="disaggregated (prefill + decode)"),
                  Query(expr=f"clamp_min({total} - {disaggregated}, 0)", legend="direct (decode only)"))
    return Segment(title="Traffic", panels=(
        PanelSpec(title="Request rate", unit="reqps", queries=split,
                  description="Finished requests per second; on DPD, split into disaggregated and direct "
                              "by the router's routing threshold."),
        PanelSpec(title="Tokens per second", unit="short", queries=(
            Query(expr=rate_sum(m.GENERATION_TOKENS, t, "decode"), legend="output"),
            Query(expr=rate_sum(m.PROMPT_TOKENS, t, "prefill"), legend="input (prefilled)"),
        ), description="Output tokens generated and prompt tokens prefilled per second."),
    ))


#: Suffix of DPD's run-summary TTFT p95 stat, which shows each leg's p95 (the users' p95 is not in the series).
PER_LEG: Final = " (per leg)"
#: Title of the user-facing TTFT panel (tests find it by this title).
USER_TTFT_TITLE: Final = "Time to first token as users see it (lower bound)"
#: What every user-TTFT panel says it leaves out (vLLM measures each interval from its own ``arrival_time``).
LOWER_BOUND: Final = ("A lower bound: vLLM measures each interval inside the engine, from its own arrival_time "
                      "(vLLM docs/design/metrics.md, 'Frontend Stats Collection'), so the router, the reverse "
                      "proxies, the network hops, the load balancer and streaming the first chunk back are "
                      "not in it; the benchmark report's client TTFT is the end-to-end value.")


def user_ttft(t: Target, slo: SloConfig) -> PanelSpec:
    """The engines' share of the TTFT the client feels, a lower bound of it. On DPD the router finishes the
    prefill leg before it opens the decode request, so it is the prefill leg (queue + prefill) plus the decode TTFT
    (KV transfer, first token)."""
    if t.kind == "colocated":
        return PanelSpec(title=USER_TTFT_TITLE, unit="s", slo=slo.ttft_p95_seconds, queries=(
            Query(expr=user_ttft_mean(t), legend="mean"),
            Query(expr=quantile(0.95, m.TIME_TO_FIRST_TOKEN, t, "worker"), legend="p95"),
        ), description="TTFT of the colocated engine (prefill and decode in one). " + LOWER_BOUND + " "
                       + slo_resolution(slo.ttft_p95_seconds, m.TIME_TO_FIRST_TOKEN))
    return PanelSpec(title=USER_TTFT_TITLE, unit="s", slo=slo.ttft_p95_seconds, queries=(
        Query(expr=user_ttft_mean(t), legend="mean (prefill leg + decode TTFT)"),
        Query(expr=prefill_leg_quantile(0.95, t), legend="prefill leg p95"),
        Query(expr=quantile(0.95, m.TIME_TO_FIRST_TOKEN, t, "decode"), legend="decode TTFT p95"),
    ), description="The router runs the prefill leg to completion before it opens the decode request, so a "
                   "disaggregated request's TTFT holds its prefill leg (queue + prefill, on the prefill pods) and "
                   "the decode TTFT (KV transfer, first token). Means add: the mean is the sum of the two legs' "
                   "means over all requests. " + LOWER_BOUND + " Quantiles do not add: the users' p95 is at least "
                   "the decode TTFT p95 and, when every request is disaggregated, at least the larger of the two "
                   "p95s shown (the legs are non-negative); the two p95s give no upper bound (quantiles are not "
                   "subadditive). " + slo_resolution(slo.ttft_p95_seconds, m.TIME_TO_FIRST_TOKEN, m.E2E_LATENCY))


def latency(t: Target, slo: SloConfig) -> Segment:
    decode_leg = " (decode leg)" if t.kind == "dpd" else ""
    return Segment(title="Latency", panels=(
        user_ttft(t, slo),
        PanelSpec(title=f"Time to first token{decode_leg}", unit="s", slo=slo.ttft_p95_seconds,
                  queries=_quantiles(m.TIME_TO_FIRST_TOKEN, t, "decode"),
                  description="TTFT seen by the engine that streams the answer. On DPD the decode pods' TTFT "
                              "starts when the router opens the decode request, after the prefill leg: it holds "
                              "the KV transfer, not the prefill queue and compute (see the panel above). "
                              + slo_resolution(slo.ttft_p95_seconds, m.TIME_TO_FIRST_TOKEN)),
        PanelSpec(title="Prefill time", unit="s", queries=(
            *_quantiles(m.PREFILL_TIME, t, "prefill"),
            Query(expr=quantile(0.95, m.QUEUE_TIME, t, "prefill"), legend="queue p95"),
        ), description="Time in the PREFILL phase and in the queue before it, on the prefill pods."),
        PanelSpec(title="Time per output token / inter-token latency", unit="s", slo=slo.tpot_p95_seconds,
                  queries=(
                      *_quantiles(m.INTER_TOKEN_LATENCY, t, "decode", "ITL "),
                      Query(expr=quantile(0.95, m.REQUEST_TPOT, t, "decode"), legend="TPOT p95"),
                  ), description="ITL between tokens and per-request TPOT on the decode pods. "
                                 + slo_resolution(slo.tpot_p95_seconds, m.REQUEST_TPOT)),
        PanelSpec(title=f"End-to-end latency{decode_leg}", unit="s", queries=(
            *_quantiles(m.E2E_LATENCY, t, "decode"),
            Query(expr=mean(m.E2E_LATENCY, t, "decode"), legend="mean"),
        ), description="Request latency inside the engine that finishes the request; on DPD the prefill leg "
                       "comes before it."),
    ))


def capacity(t: Target, slo: SloConfig) -> Segment:
    return Segment(title="Queues and KV cache", panels=(
        PanelSpec(title="Prefill queue", unit="short", queries=(
            Query(expr=prefill_queue(t), legend="total (prefill autoscaling signal)"),
            Query(expr=gauge("sum", m.NUM_REQUESTS_WAITING, t, "prefill", by=(_POD,)), legend=f"{{{{{_POD}}}}}"),
        ), description="Requests waiting on the prefill pods; the total is the prefill autoscaling query."),
        PanelSpec(title="Decode running sequences", unit="short", queries=(
            Query(expr=gauge("sum", m.NUM_REQUESTS_RUNNING, t, "decode", by=(_POD,)), legend=f"{{{{{_POD}}}}}"),
        ), description="Sequences in the decode batch, per pod (bounded by max_num_seqs)."),
        PanelSpec(title="Decode KV-cache usage", unit="percentunit", slo=slo.kv_cache_usage_ratio, queries=(
            Query(expr=decode_kv_usage(t), legend="max (decode autoscaling signal)"),
            Query(expr=gauge("max", m.KV_CACHE_USAGE, t, "decode", by=(_POD,)), legend=f"{{{{{_POD}}}}}"),
        ), description="Fraction of GPU KV blocks in use on decode; the max is the decode autoscaling query. "
                       "Line: the alert threshold."),
        PanelSpec(title="Decode preemptions", unit="short", queries=(
            Query(expr=rate_sum(m.NUM_PREEMPTIONS, t, "decode", by=(_POD,)), legend=f"{{{{{_POD}}}}}"),
        ), description="Preemptions per second: the KV cache ran out and sequences were evicted."),
    ))


def kv_transfer(t: Target, slo: SloConfig) -> Segment:
    return Segment(title="KV transfer (LMCache)", panels=(
        PanelSpec(title="KV retrieve time on decode", unit="s", queries=(
            *_quantiles(m.LMCACHE_TIME_TO_RETRIEVE, t, "decode"),
            Query(expr=quantile(0.95, m.LMCACHE_TIME_TO_STORE, t, "prefill"), legend="store p95 (prefill)"),
        ), description="Time decode waits for the prefilled KV (LMCache retrieve) and prefill spends storing it."),
        PanelSpec(title="KV transfer throughput", unit="short", queries=(
            Query(expr=kv_tokens_received(t), legend="KV tokens received/s"),
            Query(expr=kv_retrieve_speed(t), legend="retrieve speed (tokens per second retrieving)"),
        ), description="KV tokens decode receives per second, and tokens per second of retrieve time (a rate "
                       "ratio: LMCache's retrieve_speed histogram saturates far below EFA speeds). Each TP "
                       "rank counts the same tokens, so one rank per pod is counted."),
        PanelSpec(title="KV hit ratio", unit="percentunit", slo=1 - slo.kv_transfer_miss_ratio, queries=(
            Query(expr=kv_hit_ratio(t), legend="hit / requested tokens"),
        ), description="Below 1: decode recomputed KV that did not arrive (transfer failure or miss). "
                       "Line: the alert threshold."),
    ))


def errors(t: Target, slo: SloConfig) -> Segment:
    return Segment(title="Errors and restarts", panels=(
        PanelSpec(title="Error ratio", unit="percentunit", slo=slo.error_ratio, queries=(
            Query(expr=error_ratio(t), legend="failed / all requests"),
        ), description="Failed / all inference requests (every POST through the reverse-proxy sidecar but probes "
                       "and control calls, whatever path the client posts to), from the sidecar's counters. A "
                       "disaggregated request is two invocations (prefill leg, decode leg) and counts once."),
        PanelSpec(title="Aborted or failed requests", unit="reqps", queries=(
            Query(expr=failed_requests(t, "any", by=(_POD,)), legend=f"{{{{{_POD}}}}}"),
        ), description="Requests that finished with 'abort' (client disconnect, timeout) or 'error' (a failed "
                       "KV load finishes this way)."),
        PanelSpec(title="Pod restarts (1h)", unit="short", queries=(
            Query(expr=pod_restarts(t, window="1h"), legend=f"{{{{{m.POD_RESTARTS.pod_label(t.collector)}}}}}"),
        ), description="Container restarts in the last hour, per pod (kube-state-metrics)."),
    ))


def gpu(t: Target, slo: SloConfig) -> Segment:
    util = tuple(Query(expr=gauge("avg", m.GPU_UTIL, t, r), legend=r) for r in t.roles)
    memory = tuple(Query(
        expr=f"{gauge('sum', m.GPU_FB_USED, t, r)} / ({gauge('sum', m.GPU_FB_USED, t, r)} + "
             f"{gauge('sum', m.GPU_FB_FREE, t, r)})", legend=r) for r in t.roles)
    return Segment(title="GPU", panels=(
        PanelSpec(title="GPU utilisation per role", unit="percent", queries=util,
                  description="Mean DCGM GPU utilisation over the role's GPUs."),
        PanelSpec(title="GPU memory used per role", unit="percentunit", queries=memory,
                  description="Framebuffer used / total over the role's GPUs."),
    ))


def run_summary(t: Target, slo: SloConfig) -> Segment:
    """One number per run over the panel's whole window (``$__range``): what a benchmark report compares."""
    def over_run(q: float, metric: m.Metric) -> str:
        return quantile(q, metric, t, "decode", window=RUN_RANGE, fn="increase")

    if t.kind == "dpd":
        # Neither leg's p95 is the users' p95, so neither is coloured against the SLO (a green decode leg would
        # say "met" while users wait the prefill leg on top); the comparable number is the mean above.
        ttft_p95 = PanelSpec(title=f"TTFT p95 over the run{PER_LEG}", unit="s", kind="stat", queries=(
            Query(expr=prefill_leg_quantile(0.95, t, window=RUN_RANGE, fn="increase"), legend="prefill leg p95"),
            Query(expr=over_run(0.95, m.TIME_TO_FIRST_TOKEN), legend="decode-leg TTFT p95"),
        ), description="The two legs' p95 over the whole window, not coloured: the users' p95 is at least the "
                       "decode-leg p95 and, when every request is disaggregated, at least the larger of the two; "
                       "it has no upper bound from them. Compare the mean above, the legs' sum on both sides.")
    else:
        ttft_p95 = PanelSpec(title="TTFT p95 over the run", unit="s", kind="stat", slo=slo.ttft_p95_seconds,
                             queries=(Query(expr=over_run(0.95, m.TIME_TO_FIRST_TOKEN), legend="TTFT p95"),),
                             description="TTFT p95 of the colocated engine (the users' TTFT) over the whole "
                                         "window; red above the SLO. "
                                         + slo_resolution(slo.ttft_p95_seconds, m.TIME_TO_FIRST_TOKEN))
    return Segment(title="Run summary (over the run's window)", panels=(
        PanelSpec(title="TTFT mean over the run, as users see it (lower bound)", unit="s", kind="stat", queries=(
            Query(expr=user_ttft_mean(t, window=RUN_RANGE), legend="TTFT mean"),
        ), description="Mean TTFT over the whole window; on DPD the prefill leg plus the decode TTFT (means add). "
                       + LOWER_BOUND),
        ttft_p95,
        PanelSpec(title="TPOT p95 over the run", unit="s", kind="stat", slo=slo.tpot_p95_seconds, queries=(
            Query(expr=over_run(0.95, m.REQUEST_TPOT), legend="TPOT p95"),
        ), description="Per-request TPOT p95 over the whole window; red above the SLO. "
                       + slo_resolution(slo.tpot_p95_seconds, m.REQUEST_TPOT)),
        PanelSpec(title="Output tokens per second over the run", unit="short", kind="stat", queries=(
            Query(expr=rate_sum(m.GENERATION_TOKENS, t, "decode", window=RUN_RANGE), legend="tokens/s"),
        ), description="Mean output throughput over the whole window."),
        PanelSpec(title="Error ratio over the run", unit="percentunit", kind="stat", slo=slo.error_ratio, queries=(
            Query(expr=error_ratio(t, window=RUN_RANGE), legend="failed / all requests"),
        ), description="Failed / all inference requests (every POST but probes and control calls) over the whole "
                       "window; red above the SLO."),
    ))


def cost_per_token(price: InstancePrice | None) -> SegmentBuilder:
    """The cost row at ``price`` (``hyperpod_core.prices.instance_price``: ``benchmark.instance_hour_usd``, else the
    pinned table), in GPU-hours without one: what 1M input and 1M output tokens cost, and the idle share."""
    per_gpu_hour = price.usd_per_gpu_hour if price is not None else 1.0
    unit, what = ("currencyUSD", "USD") if price is not None else ("short", "GPU-hours")
    priced = (f"Price: {price.text()}." if price is not None else
              "No price for the instance type (benchmark.instance_hour_usd unset, not in the pinned table): "
              "GPU-hours.")

    def build(t: Target, slo: SloConfig) -> Segment:
        split = ("The prefill pods' GPUs go to input tokens, the decode pods' to output tokens." if t.kind == "dpd"
                 else "The workers' GPUs split by the input tokens' share of engine step time: the share of the "
                      "workers' busy time spent in requests' prefill intervals "
                      "(vllm:request_prefill_time_seconds), capped at 1.")
        return Segment(title="Cost per token", panels=(
            PanelSpec(title=f"{what} per 1M tokens", unit=unit, queries=(
                Query(expr=cost_per_million_tokens(t, "input", per_gpu_hour), legend="input tokens"),
                Query(expr=cost_per_million_tokens(t, "output", per_gpu_hour), legend="output tokens"),
            ), description=f"What 1M input and 1M output tokens cost at the current rate: GPUs (DCGM, one series "
                           f"per GPU) x {what} per GPU-hour / 3600 / tokens per second (input: every prompt once, "
                           f"on the pods that finish the requests). {split} Idle GPUs are paid for too (panel "
                           f"beside). {priced}"),
            PanelSpec(title="Idle GPU share", unit="percentunit", queries=(
                Query(expr=idle_gpu_share(t), legend="GPUs of pods with no request running"),
            ), description="Share of the endpoint's GPUs whose pod runs no request (vllm:num_requests_running == "
                           "0): over a time range, the idle share of its GPU-hours."),
        ))

    return build


#: Segments that mean the same on a DPD and a colocated endpoint (the comparison dashboard).
COMMON_SEGMENTS: tuple[SegmentBuilder, ...] = (run_summary, traffic, latency, capacity, errors, gpu)
#: The DPD overview: live segments plus what only exists with disaggregation.
DPD_SEGMENTS: tuple[SegmentBuilder, ...] = (traffic, latency, capacity, kv_transfer, errors, gpu)
