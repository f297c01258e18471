"""PromQL from catalogue metrics: role selectors, helpers, and the named queries every consumer shares.

The only place that turns a :class:`~.catalogue.Metric` into query text, so label names (``labels.py``)
and the pod-name convention are written once. The named queries at the end (``prefill_queue``,
``decode_kv_usage``, ``kv_hit_ratio``...) are used by the dashboards, the alerts *and* the autoscaling
triggers of the endpoint manifest, so the three cannot disagree.

Role and endpoint come from the pod name, which the operator fixes (``operator.md`` section e); the
``inference.sagemaker.aws.amazon.com/dpd-role`` pod label is not known to reach Prometheus:

* DPD prefill pods  ``prefill-<endpoint>-<replicaset-hash>-<pod-hash>``
* DPD decode pods   ``decode-<endpoint>-<replicaset-hash>-<pod-hash>``
* colocated pods    ``<endpoint>-<replicaset-hash>-<pod-hash>``: the colocated manifest keeps the DPD
  endpoint's name (it is the rollback), so the baseline is the same name without a role prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.catalogue import (
    KV_CACHE_USAGE,
    LMCACHE_HIT_TOKENS,
    LMCACHE_REQUESTED_TOKENS,
    LMCACHE_TIME_TO_RETRIEVE,
    MODEL_ERRORS,
    MODEL_INVOCATIONS,
    NUM_REQUESTS_WAITING,
    POD_RESTARTS,
    REQUEST_SUCCESS,
    Metric,
)

Role = Literal["prefill", "decode", "worker", "any"]
"""``prefill``/``decode``: the DPD roles (both map to the single worker pool of a colocated endpoint);
``worker``: a colocated endpoint's pods; ``any``: every serving pod of the endpoint."""
EndpointKind = Literal["dpd", "colocated"]

#: ``<replicaset-hash>-<pod-hash>`` of a Deployment's pod: exactly two more segments, so endpoint ``x``
#: never matches the pods of ``x-y``.
POD_SUFFIX: Final = "[a-z0-9]+-[a-z0-9]+"
RATE_INTERVAL: Final = "$__rate_interval"


@dataclass(frozen=True, kw_only=True)
class Target:
    """The pods of one inference endpoint: its namespace, its name and whether it is DPD or colocated."""

    namespace: str
    endpoint: str
    kind: EndpointKind
    collector: lbl.CollectorLabels = field(default_factory=lbl.CollectorLabels)
    """Pod and namespace labels of DCGM / kube-state-metrics series. Default: ``pod`` / ``namespace``."""

    @property
    def roles(self) -> tuple[Role, ...]:
        """Roles that have their own pods: prefill and decode for DPD, the worker for colocated."""
        return ("prefill", "decode") if self.kind == "dpd" else ("worker",)

    def pod_regex(self, role: Role) -> str:
        if self.kind == "colocated":
            return f"{self.endpoint}-{POD_SUFFIX}"
        if role in ("prefill", "decode"):
            return f"{role}-{self.endpoint}-{POD_SUFFIX}"
        if role == "any":
            return f"(prefill|decode)-{self.endpoint}-{POD_SUFFIX}"
        raise ValueError(f"role {role!r} does not exist on a {self.kind} endpoint")

    def selector(self, metric: Metric, role: Role, *, matchers: str = "") -> str:
        """``{namespace="...", pod_name=~"..."}`` for ``metric`` on ``role``'s pods, in the labels its path keeps."""
        parts = [f'{metric.namespace_label(self.collector)}="{self.namespace}"',
                 f'{metric.pod_label(self.collector)}=~"{self.pod_regex(role)}"']
        if matchers:
            parts.append(matchers)
        return "{" + ", ".join(parts) + "}"


def series(metric: Metric, target: Target, role: Role, *, suffix: str = "", matchers: str = "") -> str:
    """An instant-vector selector, e.g. ``vllm:num_requests_waiting{namespace="x", pod_name=~"prefill-..."}``."""
    return metric.series(suffix) + target.selector(metric, role, matchers=matchers)


def _agg(agg: str, by: tuple[str, ...], inner: str) -> str:
    """``sum(x)`` or ``sum by (a, b) (x)``."""
    return f"{agg} by ({', '.join(by)}) ({inner})" if by else f"{agg}({inner})"


def rate_sum(metric: Metric, target: Target, role: Role, *, by: tuple[str, ...] = (),
             window: str = RATE_INTERVAL, suffix: str = "", matchers: str = "", fn: str = "rate") -> str:
    """``sum(rate(counter[window]))``: per-second rate over all selected pods (``fn="increase"``: a total)."""
    if metric.type == "gauge":
        raise ValueError(f"{metric.name} is a gauge; rate() needs a counter or histogram")
    inner = series(metric, target, role, suffix=suffix, matchers=matchers)
    return _agg("sum", by, f"{fn}({inner}[{window}])")


def quantile(q: float, metric: Metric, target: Target, role: Role, *, by: tuple[str, ...] = (),
             window: str = RATE_INTERVAL, fn: str = "rate") -> str:
    """``histogram_quantile`` of a catalogue histogram over the selected pods."""
    if metric.type != "histogram":
        raise ValueError(f"{metric.name} is a {metric.type}; quantiles need a histogram")
    buckets = rate_sum(metric, target, role, by=(lbl.LE, *by), window=window, suffix="_bucket", fn=fn)
    return f"histogram_quantile({q}, {buckets})"


def mean(metric: Metric, target: Target, role: Role, *, window: str = RATE_INTERVAL) -> str:
    """Mean of a histogram's observations: ``rate(_sum) / rate(_count)``."""
    return (f"{rate_sum(metric, target, role, window=window, suffix='_sum')} / "
            f"{rate_sum(metric, target, role, window=window, suffix='_count')}")


def gauge(agg: Literal["sum", "avg", "max", "min", "count"], metric: Metric, target: Target, role: Role,
          *, by: tuple[str, ...] = ()) -> str:
    """An aggregation of a gauge over the selected pods."""
    if metric.type != "gauge":
        raise ValueError(f"{metric.name} is a {metric.type}; use rate_sum() for counters")
    return _agg(agg, by, series(metric, target, role))


# --- named queries: one definition for dashboards, alerts and autoscaling ------------------------------


def prefill_queue(t: Target) -> str:
    """Requests waiting in the prefill engines, summed (KEDA ``Average`` divides by replicas)."""
    return gauge("sum", NUM_REQUESTS_WAITING, t, "prefill")


def decode_kv_usage(t: Target) -> str:
    """KV-cache usage (0-1) of the fullest decoder: decode is bound by KV memory, not by a queue."""
    return gauge("max", KV_CACHE_USAGE, t, "decode")


def kv_hit_ratio(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Share of the KV tokens decode requested from LMCache that arrived (below 1: decode recomputes)."""
    return (f"{rate_sum(LMCACHE_HIT_TOKENS, t, 'decode', window=window)} / "
            f"{rate_sum(LMCACHE_REQUESTED_TOKENS, t, 'decode', window=window)}")


def kv_retrieve_speed(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """KV tokens delivered per second of retrieve time on decode: a rate ratio, which does not saturate
    the way a quantile of ``lmcache:retrieve_speed`` does at its largest bucket (SOURCES.md)."""
    return (f"{rate_sum(LMCACHE_HIT_TOKENS, t, 'decode', window=window)} / "
            f"{rate_sum(LMCACHE_TIME_TO_RETRIEVE, t, 'decode', window=window, suffix='_sum')}")


def failed_requests(t: Target, role: Role, *, window: str = RATE_INTERVAL, by: tuple[str, ...] = ()) -> str:
    """Requests that finished with ``abort`` or ``error`` (a failed KV load is ``error``) per second."""
    reasons = "|".join(lbl.KV_LOAD_FAILURE_REASONS)
    return rate_sum(REQUEST_SUCCESS, t, role, window=window, by=by,
                    matchers=f'{lbl.FINISHED_REASON}=~"{reasons}"')


def error_ratio(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Failed / all invocations at the operator's reverse-proxy sidecar."""
    return (f"{rate_sum(MODEL_ERRORS, t, 'any', window=window)} / "
            f"{rate_sum(MODEL_INVOCATIONS, t, 'any', window=window)}")


def pod_restarts(t: Target, *, window: str) -> str:
    """Container restarts per pod over ``window`` (kube-state-metrics)."""
    pod = POD_RESTARTS.pod_label(t.collector)
    return f"sum by ({pod}) (increase({series(POD_RESTARTS, t, 'any')}[{window}]))"
