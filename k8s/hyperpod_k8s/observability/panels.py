"""Panels and segments: the middle layer between catalogue metrics and dashboards.

A segment is a titled group of panels about one concern (traffic, latency, ...) for one
:class:`~.promql.Target`. Segments are pure data; ``grafana.py`` renders them, so the same segment serves
the DPD overview and both columns of the DPD-vs-colocated comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hyperpod_k8s.observability import catalogue as m
from hyperpod_k8s.observability.promql import Role, Target, gauge, mean, quantile, rate_sum, series

PanelKind = Literal["timeseries", "stat"]


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


@dataclass(frozen=True, kw_only=True)
class Segment:
    title: str
    panels: tuple[PanelSpec, ...]


SegmentBuilder = Callable[[Target], Segment]
_QUANTILES = (0.5, 0.95, 0.99)


def _quantiles(metric: m.Metric, t: Target, role: Role, label: str = "") -> tuple[Query, ...]:
    return tuple(Query(expr=quantile(q, metric, t, role), legend=f"{label}p{round(q * 100)}")
                 for q in _QUANTILES)


def traffic(t: Target) -> Segment:
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


def latency(t: Target) -> Segment:
    return Segment(title="Latency", panels=(
        PanelSpec(title="Time to first token", unit="s", queries=_quantiles(m.TIME_TO_FIRST_TOKEN, t, "decode"),
                  description="TTFT seen by the engine that streams the answer (decode on DPD): includes "
                              "remote prefill and KV transfer."),
        PanelSpec(title="Prefill time", unit="s", queries=(
            *_quantiles(m.PREFILL_TIME, t, "prefill"),
            Query(expr=quantile(0.95, m.QUEUE_TIME, t, "prefill"), legend="queue p95"),
        ), description="Time in the PREFILL phase and in the queue before it, on the prefill pods."),
        PanelSpec(title="Time per output token / inter-token latency", unit="s", queries=(
            *_quantiles(m.INTER_TOKEN_LATENCY, t, "decode", "ITL "),
            Query(expr=quantile(0.95, m.REQUEST_TPOT, t, "decode"), legend="TPOT p95"),
        ), description="ITL between tokens and per-request TPOT on the decode pods."),
        PanelSpec(title="End-to-end latency", unit="s", queries=(
            *_quantiles(m.E2E_LATENCY, t, "decode"),
            Query(expr=mean(m.E2E_LATENCY, t, "decode"), legend="mean"),
        ),
                  description="Request latency inside the engine that finishes the request."),
    ))


def capacity(t: Target) -> Segment:
    return Segment(title="Queues and KV cache", panels=(
        PanelSpec(title="Prefill queue", unit="short", queries=(
            Query(expr=gauge("sum", m.NUM_REQUESTS_WAITING, t, "prefill", by=("pod",)), legend="{{pod}}"),
        ), description="Requests waiting on each prefill pod (the prefill autoscaling signal)."),
        PanelSpec(title="Decode running sequences", unit="short", queries=(
            Query(expr=gauge("sum", m.NUM_REQUESTS_RUNNING, t, "decode", by=("pod",)), legend="{{pod}}"),
        ), description="Sequences in the decode batch, per pod (bounded by max_num_seqs)."),
        PanelSpec(title="Decode KV-cache usage", unit="percentunit", queries=(
            Query(expr=gauge("max", m.KV_CACHE_USAGE, t, "decode", by=("pod",)), legend="{{pod}}"),
        ), description="Fraction of GPU KV blocks in use on decode (the decode autoscaling signal)."),
        PanelSpec(title="Decode preemptions", unit="short", queries=(
            Query(expr=rate_sum(m.NUM_PREEMPTIONS, t, "decode", by=("pod",)), legend="{{pod}}"),
        ), description="Preemptions per second: the KV cache ran out and sequences were evicted."),
    ))


def kv_transfer(t: Target) -> Segment:
    return Segment(title="KV transfer (LMCache)", panels=(
        PanelSpec(title="KV retrieve time on decode", unit="s", queries=(
            *_quantiles(m.LMCACHE_TIME_TO_RETRIEVE, t, "decode"),
            Query(expr=quantile(0.95, m.LMCACHE_TIME_TO_STORE, t, "prefill"), legend="store p95 (prefill)"),
        ), description="Time decode waits for the prefilled KV (LMCache retrieve) and prefill spends storing it."),
        PanelSpec(title="KV transfer throughput", unit="short", queries=(
            Query(expr=rate_sum(m.LMCACHE_RETRIEVE_RETRIEVED_TOKENS, t, "decode"), legend="retrieved tokens/s"),
            Query(expr=quantile(0.5, m.LMCACHE_RETRIEVE_SPEED, t, "decode"), legend="retrieve speed p50 (tokens/s)"),
        ), description="KV tokens received by decode per second, and per-retrieve speed."),
        PanelSpec(title="KV retrieved / requested", unit="percentunit", queries=(
            Query(expr=f"{rate_sum(m.LMCACHE_RETRIEVE_RETRIEVED_TOKENS, t, 'decode')} / "
                       f"{rate_sum(m.LMCACHE_RETRIEVE_REQUESTED_TOKENS, t, 'decode')}", legend="retrieved ratio"),
        ), description="Below 1: decode recomputed KV that did not arrive (transfer failure or miss)."),
    ))


def errors(t: Target) -> Segment:
    invocations = rate_sum(m.MODEL_INVOCATIONS, t, "any")
    return Segment(title="Errors and restarts", panels=(
        PanelSpec(title="Error ratio", unit="percentunit", queries=(
            Query(expr=f"{rate_sum(m.MODEL_ERRORS, t, 'any')} / {invocations}", legend="errors / invocations"),
        ), description="Failed / all invocations at the operator's reverse-proxy sidecar."),
        PanelSpec(title="Aborted requests", unit="reqps", queries=(
            Query(expr=rate_sum(m.REQUEST_SUCCESS, t, "any", by=("pod",), matchers='finished_reason="abort"'),
                  legend="{{pod}}"),
        ), description="Requests the engine aborted (client disconnects, KV-transfer timeouts)."),
        PanelSpec(title="Pod restarts (1h)", unit="short", queries=(
            Query(expr=f"sum by (pod) (increase({series(m.POD_RESTARTS, t, 'any')}[1h]))", legend="{{pod}}"),
        ), description="Container restarts in the last hour, per pod."),
    ))


def gpu(t: Target) -> Segment:
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


def router(t: Target) -> Segment:
    return Segment(title="Router (provisional metric names)", panels=(
        PanelSpec(title="Router healthy backends", unit="short", queries=(
            Query(expr=gauge("min", m.ROUTER_HEALTHY_PODS, t, "router"), legend="healthy"),
        ), description="Backends the router considers healthy."),
        PanelSpec(title="Router QPS per backend", unit="reqps", queries=(
            Query(expr=gauge("sum", m.ROUTER_CURRENT_QPS, t, "router", by=("server",)), legend="{{server}}"),
        ), description="Requests per second the router sends to each backend."),
    ))


#: Segments that mean the same on a DPD and a colocated endpoint (the comparison dashboard).
COMMON_SEGMENTS: tuple[SegmentBuilder, ...] = (traffic, latency, capacity, errors, gpu)
#: The DPD overview: the common segments plus what only exists with disaggregation.
DPD_SEGMENTS: tuple[SegmentBuilder, ...] = (traffic, latency, capacity, kv_transfer, errors, gpu, router)
