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
  endpoint's name (one replaces the other), so the baseline is the same name without a role prefix.

After a blue/green rollout (``hyperpod-dpd rollout``) the endpoint is served by the InferenceEndpointConfig
``<endpoint>-r<N>``, so its pods are ``prefill-<endpoint>-r<N>-<rs>-<pod>`` (and its router
``<endpoint>-r<N>-<ns>-router-...``): an endpoint's pods are those of every revision (:data:`REVISION`), which the
dashboards and alerts follow; an InferenceEndpointConfig's own autoscaling queries select its own pods only
(``Target.revisions`` false; rollout re-anchors them on the revision's name).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.catalogue import (
    E2E_LATENCY,
    GENERATION_TOKENS,
    GPU_UTIL,
    KV_CACHE_USAGE,
    LMCACHE_HIT_TOKENS,
    LMCACHE_REQUESTED_TOKENS,
    LMCACHE_TIME_TO_RETRIEVE,
    MODEL_ERRORS,
    MODEL_INVOCATIONS,
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    POD_READY,
    POD_RESTARTS,
    PREFILL_TIME,
    PROMPT_TOKENS,
    REQUEST_SUCCESS,
    TIME_TO_FIRST_TOKEN,
    Metric,
)

Role = Literal["prefill", "decode", "worker", "any"]
"""``prefill``/``decode``: the DPD roles (both map to the single worker pool of a colocated endpoint);
``worker``: a colocated endpoint's pods; ``any``: every serving pod of the endpoint."""
EndpointKind = Literal["dpd", "colocated"]

#: ``<replicaset-hash>-<pod-hash>`` of a Deployment's pod: exactly two more segments, so endpoint ``x``
#: never matches the pods of ``x-y``.
POD_SUFFIX: Final = "[a-z0-9]+-[a-z0-9]+"
#: A blue/green revision's ``r<N>-`` after the endpoint's name (:func:`hyperpod_dpd.rollout.plan.revision_name`),
#: or nothing: the endpoint's own InferenceEndpointConfig. No endpoint name ends in ``-r<N>`` (the config rules), so
#: endpoint ``x``'s pattern never matches another endpoint's pods.
REVISION: Final = "(r[0-9]+-)?"
RATE_INTERVAL: Final = "$__rate_interval"


@dataclass(frozen=True, kw_only=True)
class Target:
    """The pods of one inference endpoint: its namespace, its name and whether it is DPD or colocated."""

    namespace: str
    endpoint: str
    kind: EndpointKind
    collector: lbl.CollectorLabels = field(default_factory=lbl.CollectorLabels)
    """Pod and namespace labels of DCGM / kube-state-metrics series. Default: ``pod`` / ``namespace``."""
    revisions: bool = True
    """Select the pods of every revision of the endpoint (``<endpoint>-r<N>``, module docstring), as the dashboards
    and alerts do; ``False``: only those of the InferenceEndpointConfig named :attr:`endpoint` (its own autoscaling
    queries). Default: every revision."""

    @property
    def _name(self) -> str:
        """The endpoint's part of a pod name, up to the pod suffix."""
        return f"{self.endpoint}-{REVISION if self.revisions else ''}"

    @property
    def roles(self) -> tuple[Role, ...]:
        """Roles that have their own pods: prefill and decode for DPD, the worker for colocated."""
        return ("prefill", "decode") if self.kind == "dpd" else ("worker",)

    def pod_regex(self, role: Role) -> str:
        if self.kind == "colocated":
            return f"{self._name}{POD_SUFFIX}"
        if role in ("prefill", "decode"):
            return f"{role}-{self._name}{POD_SUFFIX}"
        if role == "any":
            return f"(prefill|decode)-{self._name}{POD_SUFFIX}"
        raise ValueError(f"role {role!r} does not exist on a {self.kind} endpoint")

    @property
    def qualified(self) -> str:
        """``<namespace>/<endpoint>``, as messages name the endpoint."""
        return f"{self.namespace}/{self.endpoint}"

    def router_pod_regex(self) -> str:
        """The router Deployment's pods: ``<iec>-<ns>-router-<rs>-<pod>`` in the operator's namespace (operator.md
        (e))."""
        return f"{self._name}{self.namespace}-router-{POD_SUFFIX}"

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


def share_at_most(metric: Metric, t: Target, role: Role, bound: float, *, window: str = RATE_INTERVAL,
                  fn: str = "rate") -> str:
    """Share of the requests whose observation is at most ``bound``, a bucket boundary of ``metric``:
    ``sum(rate(_bucket{le="bound"})) / sum(rate(_count))``. Exact (a histogram counts each boundary exactly), unlike
    a quantile read back from the buckets, which interpolates inside a bucket (``objectives.py``)."""
    if metric.type != "histogram":
        raise ValueError(f"{metric.name} is a {metric.type}; shares need a histogram")
    within = rate_sum(metric, t, role, window=window, suffix="_bucket", matchers=metric.le_matcher(bound), fn=fn)
    return f"{within} / {rate_sum(metric, t, role, window=window, suffix='_count', fn=fn)}"


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


def lmcache_rate(metric: Metric, t: Target, role: Role, *, window: str = RATE_INTERVAL, suffix: str = "") -> str:
    """Per-second rate of an LMCache counter over the role's pods, each pod counted once.

    LMCache labels its series ``model_name, worker_id, role``, and every TP rank (``worker_id``) runs its own
    engine that counts the same tokens (``lmcache/observability.py``, ``v1/cache_engine.py``, 0.4.3): a plain
    sum over the ranks is TP times too high. ``max by (namespace, pod_name)`` keeps one rank per pod (it also
    folds the scheduler- and worker-side engines, should both count)."""
    if metric.source.name != "LMCache":
        raise ValueError(f"{metric.name} is not an LMCache series; use rate_sum()")
    inner = _agg("max", (lbl.NAMESPACE, lbl.POD_NAME),
                 f"rate({series(metric, t, role, suffix=suffix)}[{window}])")
    return f"sum({inner})"


def kv_tokens_received(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """KV tokens decode receives from prefill per second (LMCache hits, one TP rank per pod)."""
    return lmcache_rate(LMCACHE_HIT_TOKENS, t, "decode", window=window)


def kv_hit_ratio(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Share of the KV tokens decode requested from LMCache that arrived (below 1: decode recomputes)."""
    return (f"{lmcache_rate(LMCACHE_HIT_TOKENS, t, 'decode', window=window)} / "
            f"{lmcache_rate(LMCACHE_REQUESTED_TOKENS, t, 'decode', window=window)}")


def kv_retrieve_speed(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """KV tokens delivered per second of retrieve time on decode: a rate ratio, which does not saturate
    the way a quantile of ``lmcache:retrieve_speed`` does at its largest bucket (SOURCES.md)."""
    return (f"{lmcache_rate(LMCACHE_HIT_TOKENS, t, 'decode', window=window)} / "
            f"{lmcache_rate(LMCACHE_TIME_TO_RETRIEVE, t, 'decode', window=window, suffix='_sum')}")


def user_ttft_mean(t: Target, *, window: str = RATE_INTERVAL, fn: str = "rate") -> str:
    """A lower bound of the mean time to first token the client sees: the engines' share of it.

    DPD: the router runs the prefill leg to completion (``max_tokens=1``) before it opens the decode request
    (production-stack ``request_service/request.py``, ``route_disaggregated_prefill_request``), so the decode
    pods' TTFT leaves out the prefill queue and compute. Means add: (sum of prefill-leg E2E + sum of decode
    TTFT) / requests. Every request finishes on decode; only the disaggregated ones also ran on prefill, so the
    sum over the prefill legs divided by all requests is right for mixed traffic too. Colocated: the engine's
    TTFT. Each interval starts at the engine's own ``arrival_time`` (vLLM ``docs/design/metrics.md``, "Frontend
    Stats Collection": TTFT "relative to when the request was first received by the frontend", E2E "between
    frontend arrival_time and the frontend receiving the final token"), so the router's work, the reverse proxies,
    the hops between them, the load balancer and streaming the first chunk back are not in it: the client's TTFT
    (the benchmark report's) is this plus those. Quantiles do not add; see :func:`prefill_leg_quantile`."""
    ttft_sum = rate_sum(TIME_TO_FIRST_TOKEN, t, "decode", window=window, suffix="_sum", fn=fn)
    ttft_count = rate_sum(TIME_TO_FIRST_TOKEN, t, "decode", window=window, suffix="_count", fn=fn)
    if t.kind == "colocated":
        return f"{ttft_sum} / {ttft_count}"
    prefill_legs = rate_sum(E2E_LATENCY, t, "prefill", window=window, suffix="_sum", fn=fn)
    return f"(({prefill_legs} or vector(0)) + {ttft_sum}) / {ttft_count}"


def prefill_leg_quantile(q: float, t: Target, *, window: str = RATE_INTERVAL, fn: str = "rate") -> str:
    """Quantile of the prefill leg (queue + prefill + the one token) that the router waits for: the part of
    the user's TTFT the decode pods never see."""
    return quantile(q, E2E_LATENCY, t, "prefill", window=window, fn=fn)


def failed_requests(t: Target, role: Role, *, window: str = RATE_INTERVAL, by: tuple[str, ...] = ()) -> str:
    """Requests that finished with ``abort`` or ``error`` (a failed KV load is ``error``) per second."""
    reasons = "|".join(lbl.KV_LOAD_FAILURE_REASONS)
    return rate_sum(REQUEST_SUCCESS, t, role, window=window, by=by,
                    matchers=f'{lbl.FINISHED_REASON}=~"{reasons}"')


def invocation_matchers() -> str:
    """The sidecar series of inference requests: ``method="POST", uri!~"/ping|/health.*|..."``, every ``POST`` but to
    the paths that are no inference request (``labels.NON_INFERENCE_URIS``). AWS's HyperPod inference dashboard
    counts ``method="POST", uri="/invocations"``, but the router posts both legs to the path the client used, so
    an allow-list of paths can miss every real request; probes (``GET``, or ``POST /ping``), scrapes and the
    router's control calls would dilute the ratio."""
    return f'{lbl.METHOD}="{lbl.INVOCATION_METHOD}", {lbl.URI}!~"{"|".join(lbl.NON_INFERENCE_URIS)}"'


def error_ratio(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Failed inference requests / all inference requests, from the operator's reverse-proxy sidecar counters,
    counting only the inference requests (:func:`invocation_matchers`).

    The sidecar counts invocations per pod, so a disaggregated request is two invocations (its prefill leg and
    its decode leg). Per request on DPD (the router's published flow: prefill first, decode only after the
    prefill leg succeeded): requests = decode invocations + prefill legs that failed (those never reached
    decode); failed requests = errors on decode + errors on prefill. Colocated: errors / invocations."""
    only = invocation_matchers()

    def total(metric: Metric, role: Role) -> str:
        return rate_sum(metric, t, role, window=window, matchers=only)

    if t.kind == "colocated":
        return f"{total(MODEL_ERRORS, 'worker')} / {total(MODEL_INVOCATIONS, 'worker')}"
    prefill_errors = f"({total(MODEL_ERRORS, 'prefill')} or vector(0))"
    decode_errors = f"({total(MODEL_ERRORS, 'decode')} or vector(0))"
    requests = f"({total(MODEL_INVOCATIONS, 'decode')} + {prefill_errors})"
    return f"({decode_errors} + {prefill_errors}) / {requests}"


# --- cost per token: GPU-seconds of a role's pods over the tokens they served -----------------------------


def role_gpus(t: Target, role: Role) -> str:
    """GPUs the role's pods hold: DCGM exports one series per GPU, labelled with the pod it is assigned to."""
    return f"count({series(GPU_UTIL, t, role)})"


def input_tokens(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Input tokens per second, every request's prompt once: the decode pods (colocated: the workers) count each
    request they finish, its prompt included when its KV came from prefill (vLLM ``vllm/v1/metrics/stats.py``
    ``PromptTokenStats``: computed + local cache hits + external KV transfer - recomputed = total, the
    ``vllm:prompt_tokens_total`` increment)."""
    return rate_sum(PROMPT_TOKENS, t, "decode", window=window)


def output_tokens(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Output tokens per second (the decode pods; colocated: the workers)."""
    return rate_sum(GENERATION_TOKENS, t, "decode", window=window)


def busy_pods(t: Target, role: Role, *, window: str = RATE_INTERVAL) -> str:
    """Pods of ``role`` running at least one request, averaged over ``window`` (a subquery over the gauge)."""
    running = series(NUM_REQUESTS_RUNNING, t, role)
    return f"sum(avg_over_time(({running} > bool 0)[{window}:]))"


def prefill_step_share(t: Target, *, window: str = RATE_INTERVAL) -> str:
    """Colocated: the input tokens' share of engine step time, as the share of the workers' busy time that some
    request spent in its prefill interval (vLLM ``vllm:request_prefill_time_seconds``: from the request's
    scheduling to its first token; vLLM ``docs/design/metrics.md``, "Interval Calculations"). A step that carries
    a prefill chunk is the chunk's (a chunk of hundreds of tokens outweighs the decode batch's one token each);
    the other steps are the output tokens'. Overlapping prefill intervals are capped at 1."""
    prefill = rate_sum(PREFILL_TIME, t, "worker", window=window, suffix="_sum")
    return f"clamp_max({prefill} / {busy_pods(t, 'worker', window=window)}, 1)"


def cost_per_million_tokens(t: Target, tokens: Literal["input", "output"], per_gpu_hour: float, *,
                            window: str = RATE_INTERVAL) -> str:
    """What 1M ``tokens`` cost at ``per_gpu_hour`` (USD per GPU-hour, or 1 for GPU-hours) of the pods' GPUs.

    DPD: the prefill pods' GPUs go to input tokens, the decode pods' to output tokens. Colocated: the workers'
    GPUs split by :func:`prefill_step_share`. Idle pods cost as much as busy ones: their share is
    :func:`idle_gpu_share`."""
    rate = input_tokens(t, window=window) if tokens == "input" else output_tokens(t, window=window)
    if t.kind == "dpd":
        gpus = role_gpus(t, "prefill" if tokens == "input" else "decode")
        return f"{gpus} * {per_gpu_hour:g} / 3600 * 1e6 / {rate}"
    share = prefill_step_share(t, window=window)
    part = share if tokens == "input" else f"(1 - {share})"
    return f"{role_gpus(t, 'worker')} * {per_gpu_hour:g} / 3600 * 1e6 * {part} / {rate}"


def idle_gpus(t: Target, role: Role) -> str:
    """GPUs of the role's pods that run no request (``vllm:num_requests_running == 0``): idle pods x GPUs per pod
    (the role's pods share one Deployment's template, so each holds the same GPUs); 0 when every pod is busy."""
    running = f"max by ({lbl.POD_NAME}) ({series(NUM_REQUESTS_RUNNING, t, role)})"  # a pod's busiest engine
    return f"(count({running} == 0) or vector(0)) * {role_gpus(t, role)} / count({running})"


def idle_gpu_share(t: Target) -> str:
    """Share of the endpoint's GPUs whose pod runs no request: over time, the idle share of its GPU-hours."""
    idle = " + ".join(f"{idle_gpus(t, r)}" for r in t.roles)
    total = " + ".join(role_gpus(t, r) for r in t.roles)
    return f"({idle}) / ({total})"


Component = Literal["prefill", "decode", "worker", "router"]
#: The router Deployment's pods: ``<iec>-<ns>-router-<rs>-<pod>`` in the operator's namespace (operator.md (e)).
OPERATOR_NAMESPACE: Final = "hyperpod-inference-system"


def _namespace_of(t: Target, component: Component) -> str:
    return OPERATOR_NAMESPACE if component == "router" else t.namespace


def ready_series(t: Target, component: Component) -> str:
    """kube-state-metrics' ``kube_pod_status_ready{condition="true"}`` of the pods of ``component``: 1 while a pod
    is Ready. A pod without a Ready condition (Pending, e.g. unschedulable) has no such series at all."""
    if component == "router":
        regex = t.router_pod_regex()
    else:
        regex = t.pod_regex("decode" if component == "worker" else component)
    c = t.collector
    return (f'{POD_READY.series()}{{{POD_READY.namespace_label(c)}="{_namespace_of(t, component)}", '
            f'{POD_READY.pod_label(c)}=~"{regex}", {lbl.CONDITION}="true"}}')


def ready_pods(t: Target, component: Component) -> str:
    """Pods of ``component`` whose Ready condition is true (kube-state-metrics), summed."""
    return f"sum({ready_series(t, component)})"


def cluster_series(c: lbl.CollectorLabels) -> str:
    """kube-state-metrics' Ready series of every pod of the cluster, in the labels the queries use.

    Whether the cluster metrics arrive is a question about the cluster, not about one namespace: kube-system always
    runs pods, while the endpoint's namespace is empty before the endpoint is applied and its pods may have no
    Ready condition yet. kube-state-metrics writes ``kube_pod_status_ready`` only for a pod whose status holds a
    Ready condition (kubernetes/kube-state-metrics, ``internal/store/pod.go``,
    ``createPodStatusReadyFamilyGenerator``: it loops over ``Status.Conditions`` and emits only ``PodReady``), and a
    Pending pod the scheduler cannot place has only ``PodScheduled=False``. Both labels must be non-empty, so a
    collector that renames the namespace or pod label (``observability.collector_labels``, ``c``) counts as not
    seen."""
    return f'{POD_READY.series()}{{{POD_READY.namespace_label(c)}=~".+", {POD_READY.pod_label(c)}=~".+"}}'


def cluster_series_absent(c: lbl.CollectorLabels) -> str:
    """One series while kube-state-metrics reports no pod anywhere in the cluster: the add-on's ``clusterMetrics``
    is off, or the collector relabels (``observability.collector_labels``). An empty namespace is no such case."""
    return f"absent({cluster_series(c)})"


def components(t: Target) -> tuple[Component, ...]:
    """What must be ready for ``t`` to serve: its role pods and the router (both manifests enable
    intelligent routing, so the router exists in either mode)."""
    return ("prefill", "decode", "router") if t.kind == "dpd" else ("worker", "router")


def not_ready(t: Target, component: Component) -> str:
    """One series labelled ``component=<component>`` while no pod of it is ready, absent and Pending pods included
    (a Pending pod has no Ready series: :func:`cluster_series`), but only while kube-state-metrics reports the
    cluster's pods: missing cluster metrics are :func:`cluster_series_absent`'s alert, not an outage."""
    seen = f"count({cluster_series(t.collector)}) > 0"
    down = f"(({ready_pods(t, component)} or vector(0)) < 1) and on() ({seen})"
    return f'label_replace({down}, "{lbl.COMPONENT}", "{component}", "", "")'


def serving(t: Target) -> str:
    """One series while every component of ``t`` has a ready pod, nothing otherwise."""
    return " and on() ".join(f"({ready_pods(t, c)} >= 1)" for c in components(t))


def endpoint_down(applied: Target, other: Target) -> str:
    """A series per component of the ``applied`` endpoint with no ready pod, unless the ``other`` mode of the
    same endpoint serves instead (a benchmark switch, or a rollout to the other ``endpoint.apply``)."""
    down = " or ".join(not_ready(applied, c) for c in components(applied))
    return f"({down}) unless on() ({serving(other)})"


_ROLE_COMPONENT: Final[dict[Role, Component]] = {"prefill": "prefill", "decode": "decode", "worker": "worker"}


def _ready_pods_by_name(t: Target, role: Role) -> str:
    """One series per Ready pod of ``role``, labelled like the inference series (``namespace``, ``pod_name``), so it
    can be compared pod by pod with them (kube-state-metrics writes its own labels, ``collector_labels``)."""
    c = t.collector
    ready = f"{ready_series(t, _ROLE_COMPONENT[role])} == 1"
    renamed = f'label_replace({ready}, "{lbl.POD_NAME}", "$1", "{POD_READY.pod_label(c)}", "(.+)")'
    if POD_READY.namespace_label(c) != lbl.NAMESPACE:
        renamed = f'label_replace({renamed}, "{lbl.NAMESPACE}", "$1", "{POD_READY.namespace_label(c)}", "(.+)")'
    return f"max by ({lbl.NAMESPACE}, {lbl.POD_NAME}) ({renamed})"


def inference_series_absent(t: Target, *, window: str) -> str:
    """One series per pod (``pod_name``, and ``component`` = its role) that is Ready but sends no inference series:
    no vLLM series (its gauges exist from the engine's start), or no sidecar series of inference requests
    (:func:`invocation_matchers`) although vLLM finished requests there (the sidecar's counters appear with the
    first request). Pod by pod, so one replica that goes silent among healthy ones is seen (an ``absent()`` over
    the role's pods would wait for all of them). The alerts and panels read these series; without them the
    performance and error alerts are blind to that pod."""
    by_pod = (lbl.NAMESPACE, lbl.POD_NAME)
    on = f"on({', '.join(by_pod)})"
    parts = []
    for role in t.roles:
        engine = f"({_ready_pods_by_name(t, role)} unless {on} {series(NUM_REQUESTS_RUNNING, t, role)})"
        finishing = rate_sum(REQUEST_SUCCESS, t, role, by=by_pod, window=window, fn="increase")
        sidecar = (f"(({finishing} > 0) unless {on} "
                   f"{series(MODEL_INVOCATIONS, t, role, matchers=invocation_matchers())})")
        parts.append(f'label_replace({engine} or {sidecar}, "{lbl.COMPONENT}", "{role}", "", "")')
    return " or ".join(parts)


def pod_restarts(t: Target, *, window: str) -> str:
    """Container restarts per pod over ``window`` (kube-state-metrics)."""
    pod = POD_RESTARTS.pod_label(t.collector)
    return f"sum by ({pod}) (increase({series(POD_RESTARTS, t, 'any')}[{window}]))"
