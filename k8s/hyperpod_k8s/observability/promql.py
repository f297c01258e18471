"""PromQL built from catalogue metrics: pod selectors per DPD role, rates, quantiles.

The only place that turns a :class:`~.catalogue.Metric` into query text, so label names and the pod-name
convention (see ``catalogue.py``) are written once. Values may be literals (alerts) or Grafana variables
such as ``$endpoint`` (dashboards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_k8s.observability.catalogue import ROUTER, Metric

Role = Literal["prefill", "decode", "worker", "any", "router"]
"""``prefill``/``decode``: the DPD roles (both map to the single worker pool of a colocated endpoint);
``worker``: a colocated endpoint's pods; ``any``: every serving pod of the endpoint; ``router``: the router."""
EndpointKind = Literal["dpd", "colocated"]

ROUTER_NAMESPACE: Final = "hyperpod-inference-system"
#: ``<replicaset-hash>-<pod-hash>`` of a Deployment's pod: exactly two more segments, so endpoint ``x``
#: never matches the pods of ``x-colocated``.
_POD_SUFFIX: Final = "[a-z0-9]+-[a-z0-9]+"
RATE_INTERVAL: Final = "$__rate_interval"


@dataclass(frozen=True, kw_only=True)
class Target:
    """The pods of one inference endpoint: its namespace, its name and whether it is DPD or colocated."""

    namespace: str
    endpoint: str
    kind: EndpointKind

    @property
    def roles(self) -> tuple[Role, ...]:
        """Roles that have their own pods: prefill and decode for DPD, the worker for colocated."""
        return ("prefill", "decode") if self.kind == "dpd" else ("worker",)

    def pod_regex(self, role: Role) -> str:
        if role == "router":
            return f"{self.endpoint}-{self.namespace}-router-{_POD_SUFFIX}"
        if self.kind == "colocated" and role in ("prefill", "decode", "worker", "any"):
            return f"{self.endpoint}-{_POD_SUFFIX}"
        if self.kind == "dpd" and role in ("prefill", "decode"):
            return f"{role}-{self.endpoint}-{_POD_SUFFIX}"
        if self.kind == "dpd" and role == "any":
            return f"(prefill|decode)-{self.endpoint}-{_POD_SUFFIX}"
        raise ValueError(f"role {role!r} does not exist on a {self.kind} endpoint")

    def selector(self, metric: Metric, role: Role, *, matchers: str = "") -> str:
        """``{namespace="...", pod=~"..."}`` for ``metric`` on ``role``'s pods (router metrics: the router)."""
        if (metric.source is ROUTER) != (role == "router"):
            raise ValueError(f"{metric.name} is not exposed by the {role} pods")
        namespace = ROUTER_NAMESPACE if role == "router" else self.namespace
        parts = [f'namespace="{namespace}"', f'{metric.pod_label}=~"{self.pod_regex(role)}"']
        if matchers:
            parts.append(matchers)
        return "{" + ", ".join(parts) + "}"


def series(metric: Metric, target: Target, role: Role, *, suffix: str = "", matchers: str = "") -> str:
    """An instant-vector selector, e.g. ``vllm:num_requests_waiting{namespace="x", pod=~"prefill-..."}``."""
    return metric.series(suffix) + target.selector(metric, role, matchers=matchers)


def _by(labels: tuple[str, ...]) -> str:
    return f" by ({', '.join(labels)})" if labels else ""


def rate_sum(metric: Metric, target: Target, role: Role, *, by: tuple[str, ...] = (),
             window: str = RATE_INTERVAL, suffix: str = "", matchers: str = "") -> str:
    """``sum(rate(counter[window]))``: per-second rate over all selected pods."""
    if metric.type == "gauge":
        raise ValueError(f"{metric.name} is a gauge; rate() needs a counter or histogram")
    inner = series(metric, target, role, suffix=suffix, matchers=matchers)
    return f"sum{_by(by)} (rate({inner}[{window}]))"


def quantile(q: float, metric: Metric, target: Target, role: Role, *, by: tuple[str, ...] = (),
             window: str = RATE_INTERVAL) -> str:
    """``histogram_quantile`` of a catalogue histogram over the selected pods."""
    if metric.type != "histogram":
        raise ValueError(f"{metric.name} is a {metric.type}; quantiles need a histogram")
    return f"histogram_quantile({q}, {rate_sum(metric, target, role, by=('le', *by), window=window, suffix='_bucket')})"


def mean(metric: Metric, target: Target, role: Role, *, window: str = RATE_INTERVAL) -> str:
    """Mean of a histogram's observations: ``rate(_sum) / rate(_count)``."""
    return (f"{rate_sum(metric, target, role, window=window, suffix='_sum')} / "
            f"{rate_sum(metric, target, role, window=window, suffix='_count')}")


def gauge(agg: Literal["sum", "avg", "max", "min", "count"], metric: Metric, target: Target, role: Role,
          *, by: tuple[str, ...] = ()) -> str:
    """An aggregation of a gauge over the selected pods."""
    if metric.type != "gauge":
        raise ValueError(f"{metric.name} is a {metric.type}; use rate_sum() for counters")
    return f"{agg}{_by(by)} ({series(metric, target, role)})"
