"""DPD alerts, defined once, as Prometheus rule groups.

:func:`alert_rule_groups` returns the rule-file mapping (``{"groups": [...]}``). The same value becomes the
body of an Amazon Managed Service for Prometheus rule groups namespace (CDK side) and, behind
``observability.in_cluster_manifests``, the ``spec`` of a PrometheusRule (cdk8s side). Pure Python. Thresholds
come from ``observability.slo``; every alert carries a one-line runbook; every expression is built from the
named queries in ``queries.py``. Each rule is one call of a small factory (:class:`_AlertFactory`), which
picks the wording of the applied endpoint's mode where a text differs (:class:`PerMode`).

Every alert carries the label ``alert_kind``, which the alert manager (``alertmanager.py``) routes and inhibits
on: ``pd`` (prefill/decode performance and errors: the warning ones are inhibited while the endpoint is down,
because a down endpoint explains them; the critical error ratio never is), ``availability`` (the endpoint is down,
a pod restarts in a loop, or the inference or cluster series the other alerts read are missing: never inhibited,
they name the cause) and ``heartbeat`` (always firing, so that a silent alerting path is noticed).

No alert fires on missing data by accident: endpoint-down needs kube-state-metrics to report the cluster's pods,
and the two ``...MetricsAbsent`` alerts say when the series are missing instead. The latency SLO alerts compare
the share of requests within the objective, counted at a real bucket boundary, with 95 % (``objectives.py``), and
judge no window with fewer than :data:`MIN_REQUESTS` requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from hyperpod_core.config import SloConfig
from hyperpod_core.config.observability import ObservabilityConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import queries as q
from hyperpod_core.telemetry.labels import CollectorLabels
from hyperpod_core.telemetry.objectives import QUANTILE
from hyperpod_core.telemetry.targets import collector_labels, dpd_target, target

#: Window of the rates and quantiles in alert expressions.
WINDOW: Final = "5m"
#: Window of the restart-loop alert (its limit is observability.slo.pod_restarts_per_15m).
RESTART_WINDOW: Final = "15m"

Severity = Literal["info", "warning", "critical"]
AlertKind = Literal["pd", "availability", "heartbeat"]
#: Label that carries :attr:`Alert.kind` (routing and inhibition match on it).
KIND_LABEL: Final = "alert_kind"
ENDPOINT_DOWN: Final = "DpdEndpointDown"
HEARTBEAT: Final = "DpdAlertingHeartbeat"
INFERENCE_METRICS_ABSENT: Final = "DpdInferenceMetricsAbsent"
CLUSTER_METRICS_ABSENT: Final = "DpdClusterMetricsAbsent"
#: How long series may be missing before the absence alerts fire: a collector or add-on restart is not a page.
ABSENT_FOR: Final = "15m"
#: The fewest requests in :data:`WINDOW` a latency alert judges. Below ``1 / (1 - QUANTILE)`` = 20 requests, one
#: slow request alone puts the share within the objective under 95 % (4 of 5 is 80 %) and a p95 is not defined by
#: the data; from 20 on it takes more than one. The users'-mean alert keeps the same floor (a mean of a handful of
#: requests is one request's story).
MIN_REQUESTS: Final = math.ceil(round(1 / (1 - QUANTILE), 9))


@dataclass(frozen=True, kw_only=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: Severity
    summary: str
    runbook: str
    """One line: what to check first and what to change."""
    kind: AlertKind = "pd"
    """How the alert manager treats it (module docstring). Default: ``pd``."""


@dataclass(frozen=True, kw_only=True)
class PerMode:
    """An alert text that differs with the endpoint: its wording on DPD and on colocated."""

    dpd: str
    colocated: str


@dataclass(frozen=True)
class _AlertFactory:
    """The alerts of one endpoint, one rule per :meth:`alert` call (the idea of cdk-monitoring-constructs'
    ``AlarmFactory``: what every rule of the endpoint shares is decided here once): the text of the endpoint's
    mode, and the roles whose pods the queue and the finished requests are read from."""

    target: q.Target

    @property
    def dpd(self) -> bool:
        return self.target.kind == "dpd"

    @property
    def queue_role(self) -> q.Role:
        """Where requests wait: prefill on DPD, the workers on colocated."""
        return "prefill" if self.dpd else "worker"

    @property
    def engine_role(self) -> q.Role:
        """Where requests finish and users' TTFT and TPOT are measured: decode on DPD, the workers on colocated."""
        return "decode" if self.dpd else "worker"

    def alert(self, name: str, *, severity: Severity, for_: str, expr: str, summary: str | PerMode,
              runbook: str | PerMode, kind: AlertKind = "pd") -> Alert:
        return Alert(name=name, severity=severity, for_=for_, kind=kind, expr=expr, summary=self._text(summary),
                     runbook=self._text(runbook))

    def share_below_objective(self, metric: m.Metric, role: q.Role, bound: float) -> str:
        """True while fewer than :data:`QUANTILE` of the requests take at most ``bound`` seconds, over at least
        :data:`MIN_REQUESTS` requests."""
        share = q.share_at_most(metric, self.target, role, bound, window=WINDOW)
        return f"({share} < {QUANTILE}) and on() ({self.enough_requests(metric, role)})"

    def enough_requests(self, metric: m.Metric, role: q.Role) -> str:
        """True while ``metric`` (a histogram) counted at least :data:`MIN_REQUESTS` requests in :data:`WINDOW`."""
        count = q.rate_sum(metric, self.target, role, window=WINDOW, suffix="_count", fn="increase")
        return f"{count} >= {MIN_REQUESTS}"

    def _text(self, text: str | PerMode) -> str:
        if isinstance(text, str):
            return text
        return text.dpd if self.dpd else text.colocated


def alerts(spec: EndpointSpec) -> tuple[Alert, ...]:
    """The alerts of endpoint ``spec`` in the mode its ``apply`` deploys, thresholds from its ``slo`` (the
    deployment's ``observability.slo`` with the endpoint's own keys).

    The performance and restart alerts select the applied endpoint's pods: the prefill and decode pods of DPD,
    the worker pods of colocated (whose engine's TTFT is the users' TTFT). The two prefill-leg and KV-transfer
    alerts exist only on DPD. Endpoint-down watches the applied mode and stays quiet while the other one serves.
    """
    slo = spec.slo
    dpd, colocated = dpd_target(spec), target(spec, "colocated")
    applied, other = (dpd, colocated) if spec.endpoint.apply == "dpd" else (colocated, dpd)
    f = _AlertFactory(applied)
    return (*_availability(f, other), *_saturation(f, slo), *_latency(f, slo), *_failures(f, slo))


def cluster_alerts(collector: CollectorLabels) -> tuple[Alert, ...]:
    """The alerts of the whole deployment, once however many endpoints it serves: the cluster metrics the
    endpoint-down and restart alerts read are missing, and the heartbeat. ``collector``: the labels the collector
    writes (``observability.collector_labels``)."""
    return (
        Alert(
            name=CLUSTER_METRICS_ABSENT, severity="warning", for_=ABSENT_FOR, kind="availability",
            expr=q.cluster_series_absent(collector),
            summary="No kube-state-metrics pod series from any namespace of the cluster: endpoint-down and restart "
                    "alerts cannot fire.",
            runbook="Check the observability add-on's clusterMetrics is on and which labels the collector writes "
                    "(count by (namespace, pod) (kube_pod_status_ready) vs observability.collector_labels)."),
        Alert(
            name=HEARTBEAT, severity="info", for_="0m", kind="heartbeat", expr="vector(1)",
            summary="Always firing: proves rules -> alert manager -> SNS works. Its absence is the alarm.",
            runbook="Nothing to fix while it arrives. When the topic's heartbeat alarm fires instead, check the "
                    "workspace's alert manager (its logs in CloudWatch) and the topic's access and key policies."),
    )


def _availability(f: _AlertFactory, other: q.Target) -> tuple[Alert, ...]:
    """The endpoint is down, and the inference series the other alerts read are missing."""
    t = f.target
    return (
        f.alert(
            ENDPOINT_DOWN, severity="critical", for_="5m", kind="availability", expr=q.endpoint_down(t, other),
            summary=f"Endpoint {t.qualified} is down: no ready {{{{ $labels.component }}}} pod.",
            runbook="kubectl get inferenceendpointconfig and the pods of the endpoint (and the router in "
                    "hyperpod-inference-system): describe the not-ready pods, read their logs (--previous), "
                    "check the nodes are Schedulable; hyperpod-dpd status shows the same. While it fires, the "
                    "endpoint's warning pd alerts are inhibited, also when this alert is silenced (a silence "
                    "mutes only its own notifications); the critical error-ratio alert never is."),
        # Critical: while it fires, the critical error-ratio alert of that pod is blind. An availability alert, so
        # never inhibited (the alert manager inhibits only warning pd alerts).
        f.alert(
            INFERENCE_METRICS_ABSENT, severity="critical", for_=ABSENT_FOR, kind="availability",
            expr=q.inference_series_absent(t, window=WINDOW),
            summary=f"{t.qualified}: {{{{ $labels.component }}}} pod {{{{ $labels.pod_name }}}} is "
                    "Ready (or finishes requests) but its vLLM or reverse-proxy inference series do not reach the "
                    "workspace: the latency, queue, KV and error alerts cannot see it.",
            runbook="Check the observability add-on's inferenceMetrics is on, the pod's metrics port and "
                    "PROMETHEUS_MULTIPROC_DIR (docs/observability.md, Troubleshooting), count by (__name__) "
                    "({pod_name=\"<pod>\"}) in the workspace, and count by (method, uri) "
                    "(model_invocations_total{pod_name=\"<pod>\"}) for the paths the proxy counts."),
    )


def _saturation(f: _AlertFactory, slo: SloConfig) -> tuple[Alert, ...]:
    """The KV cache is full, and the queue grows."""
    t = f.target
    waiting = q.series(m.NUM_REQUESTS_WAITING, t, f.queue_role)
    return (
        f.alert(
            "DpdDecodeKvCacheSaturated", severity="warning", for_="10m",
            expr=f"{q.decode_kv_usage(t)} > {slo.kv_cache_usage_ratio}",
            summary=PerMode(
                dpd=f"Decode KV-cache usage above {slo.kv_cache_usage_ratio:.0%} for 10 minutes.",
                colocated=f"Worker KV-cache usage above {slo.kv_cache_usage_ratio:.0%} for 10 minutes."),
            runbook=PerMode(
                dpd="Check decode preemptions and running sequences; lower decode max_num_seqs or max_model_len, "
                    "or give decode more GPUs (tensor parallel / replicas).",
                colocated="Check preemptions and running sequences; lower max_num_seqs or max_model_len, or add "
                          "colocated replicas.")),
        f.alert(
            "DpdPrefillQueueGrowing", severity="warning", for_="10m",
            expr=f"({q.prefill_queue(t)} / count({waiting}) > {slo.prefill_queue_per_replica}) "
                 f"and (sum(deriv({waiting}[{WINDOW}])) > 0)",
            summary=PerMode(
                dpd=f"More than {slo.prefill_queue_per_replica:g} requests waiting per prefill replica, and "
                    "growing.",
                colocated=f"More than {slo.prefill_queue_per_replica:g} requests waiting per colocated replica, "
                          "and growing."),
            runbook=PerMode(
                dpd="Add prefill replicas (endpoint.prefill.replicas or prefill autoscaling) or raise "
                    "routing_threshold_tokens so short prompts skip prefill.",
                colocated="Add colocated replicas, or apply the DPD endpoint (endpoint.apply: dpd) if prefill "
                          "dominates.")),
    )


def _latency(f: _AlertFactory, slo: SloConfig) -> tuple[Alert, ...]:
    """TTFT and TPOT against their objectives; on DPD also the users' mean TTFT over both legs and the prefill
    leg alone."""
    t, within, ttft = f.target, f"Fewer than {QUANTILE:.0%} of", slo.ttft_p95_seconds
    ttft_p95 = f.alert(
        "DpdTtftSloBreach", severity="warning", for_="10m",
        expr=f.share_below_objective(m.TIME_TO_FIRST_TOKEN, f.engine_role, ttft),
        summary=PerMode(
            dpd=f"{within} decode-leg TTFTs within {ttft:g}s (SLO: p95) for 10 minutes (users wait the prefill "
                "leg on top: see DpdPrefillLegSlow and DpdUserTtftMeanAboveSlo).",
            colocated=f"{within} TTFTs within {ttft:g}s (SLO: p95) for 10 minutes."),
        runbook=PerMode(
            dpd="Compare prefill queue, prefill time and KV retrieve time on the DPD overview to find the slow "
                "stage; scale prefill if queueing, check EFA/LMCache if retrieve is slow.",
            colocated="Check the queue and running sequences: add colocated replicas, or lower max_num_seqs; long "
                      "prompts behind long decodes are what DPD separates."))
    # Means add, quantiles do not: both legs' p95 may sit below the SLO while users wait for both legs (0.6 +
    # 0.6 x SLO). The users' mean TTFT is the legs' sum, a lower bound (router, proxies and hops are not in it);
    # above the TTFT target it is a breach whichever leg causes it. (No p95 of the sum exists in the legs' series:
    # a mean above the target is the part that is certain.)
    user_mean = f.alert(
        "DpdUserTtftMeanAboveSlo", severity="warning", for_="10m",
        expr=f"({q.user_ttft_mean(t, window=WINDOW)} > {ttft}) and on() "
             f"({f.enough_requests(m.TIME_TO_FIRST_TOKEN, f.engine_role)})",
        summary=PerMode(
            dpd=f"Users' mean TTFT (prefill leg + decode TTFT) above the {ttft:g}s TTFT SLO for 10 minutes, "
                "although each leg alone may stay below it.",
            colocated=f"Users' mean TTFT above the {ttft:g}s TTFT SLO for 10 minutes."),
        runbook=PerMode(
            dpd="Find the slow leg on 'Time to first token as users see it (lower bound)' (prefill leg p95 vs decode "
                "TTFT p95): "
                "scale prefill if its queue grows, check EFA/LMCache if the decode TTFT (KV transfer) is slow.",
            colocated="Check the queue and running sequences on the overview: add colocated replicas or lower "
                      "max_num_seqs."))
    prefill_leg = f.alert(
        "DpdPrefillLegSlow", severity="warning", for_="10m",
        expr=f.share_below_objective(m.E2E_LATENCY, "prefill", ttft),
        summary=f"{within} prefill legs alone (queue + prefill) within {ttft:g}s: users' TTFT misses the SLO "
                "although decode's TTFT may look fine.",
        runbook="The router waits for the prefill leg before it opens the decode request: check the prefill queue "
                "and prefill time on the DPD overview; add prefill replicas or lower prefill max_num_seqs.")
    tpot = f.alert(
        "DpdTpotSloBreach", severity="warning", for_="10m",
        expr=f.share_below_objective(m.REQUEST_TPOT, f.engine_role, slo.tpot_p95_seconds),
        summary=f"{within} requests with a TPOT within {slo.tpot_p95_seconds:g}s (SLO: p95) for 10 minutes.",
        runbook=PerMode(
            dpd="Decode batch too large or preempting: check running sequences and KV usage; lower decode "
                "max_num_seqs or add decode capacity.",
            colocated="Batch too large, preempting, or long prefills stalling decode: check running sequences and "
                      "KV usage; lower max_num_seqs, add replicas, or consider DPD (hyperpod-dpd plan)."))
    return (ttft_p95, user_mean, prefill_leg, tpot) if f.dpd else (ttft_p95, user_mean, tpot)


def _failures(f: _AlertFactory, slo: SloConfig) -> tuple[Alert, ...]:
    """Failed requests, pods restarting in a loop, and on DPD KV transfers that fall short."""
    t = f.target
    finished = q.rate_sum(m.REQUEST_SUCCESS, t, f.engine_role, window=WINDOW)
    failing = (
        f.alert(
            "DpdErrorRatioHigh", severity="critical", for_="5m",
            expr=f"{q.error_ratio(t, window=WINDOW)} > {slo.error_ratio}",
            summary=PerMode(
                dpd=f"More than {slo.error_ratio:.1%} of inference requests (every POST but probes and control "
                    "calls) fail (per request: a disaggregated request is two invocations, counted once).",
                colocated=f"More than {slo.error_ratio:.1%} of inference requests (every POST but probes and "
                          "control calls) fail."),
            runbook="Read the vLLM and reverse-proxy container logs of the failing pods (kubectl logs -c); check "
                    "router logs for backends marked unhealthy."),
        f.alert(
            "DpdRequestsAbortedOrFailed", severity="warning", for_="10m",
            expr=f"{q.failed_requests(t, f.engine_role, window=WINDOW)} / {finished} > {slo.error_ratio}",
            summary=PerMode(
                dpd=f"More than {slo.error_ratio:.1%} of requests on decode finish with abort or error.",
                colocated=f"More than {slo.error_ratio:.1%} of requests on the workers finish with abort or "
                          "error."),
            runbook=PerMode(
                dpd="A failed KV load finishes as 'error': check decoder logs 'Retrieved N out of M required "
                    "tokens', EFA devices and PD_BUFFER_SIZE; 'abort' is a client disconnect or timeout.",
                colocated="Read the worker logs for the 'error' endings; 'abort' is a client disconnect or "
                          "timeout.")),
        f.alert(
            "DpdPodRestartLoop", severity="critical", for_="5m", kind="availability",
            expr=f"{q.pod_restarts(t, window=RESTART_WINDOW)} > {slo.pod_restarts_per_15m}",
            summary=PerMode(
                dpd=f"A DPD pod restarted more than {slo.pod_restarts_per_15m} times in {RESTART_WINDOW}.",
                colocated=f"A colocated worker pod restarted more than {slo.pod_restarts_per_15m} times in "
                          f"{RESTART_WINDOW}."),
            runbook="kubectl describe pod and kubectl logs --previous: OOM (raise pd_buffer_size_bytes headroom "
                    "or lower gpu_memory_utilization), failed model load, or failing health checks."),
    )
    if not f.dpd:
        return failing
    kv_transfer = f.alert(
        "DpdKvTransferIncomplete", severity="warning", for_="10m",
        expr=f"1 - {q.kv_hit_ratio(t, window=WINDOW)} > {slo.kv_transfer_miss_ratio}",
        summary=f"Decode receives less than {1 - slo.kv_transfer_miss_ratio:.0%} of the KV tokens it requests "
                "from prefill.",
        runbook="KV transfer failing: decode recomputes the prompt. Check EFA devices on both pods, decoder logs "
                "'Retrieved N out of M required tokens', and PD_BUFFER_SIZE.")
    return (*failing, kv_transfer)


#: Name of the rule group of :func:`cluster_alerts`. An endpoint's group is ``dpd-<endpoint>`` and an endpoint name is a
#: DNS label (no ``.``), so the two never share a name (a rule file's group names are unique: promtool).
CLUSTER_GROUP_PREFIX: Final = "dpd-cluster."


def _interval(observability: ObservabilityConfig) -> str:
    return f"{observability.scrape_interval_seconds * 2}s"


def _rule(a: Alert, labels: dict[str, str]) -> dict[str, Any]:
    return {"alert": a.name, "expr": a.expr, "for": a.for_, "labels": {"severity": a.severity, **labels,
                                                                       KIND_LABEL: a.kind},
            "annotations": {"summary": a.summary, "runbook": a.runbook}}


def endpoint_rule_group(spec: EndpointSpec) -> dict[str, Any]:
    """Endpoint ``spec``'s alerts as one rule group ``dpd-<endpoint>``, each labelled ``endpoint`` and
    ``namespace`` (the alert manager groups and inhibits on them)."""
    labels = {"endpoint": spec.name, "namespace": spec.namespace}
    return {"name": f"dpd-{spec.name}", "interval": _interval(spec.observability),
            "rules": [_rule(a, labels) for a in alerts(spec)]}


def cluster_rule_group(deployment: str, observability: ObservabilityConfig) -> dict[str, Any]:
    """The deployment's cluster-wide alerts (:func:`cluster_alerts`) as the rule group ``dpd-cluster.<deployment>``;
    they name no endpoint."""
    return {"name": f"{CLUSTER_GROUP_PREFIX}{deployment}", "interval": _interval(observability),
            "rules": [_rule(a, {}) for a in cluster_alerts(collector_labels(observability))]}


def alert_rule_groups(specs: Sequence[EndpointSpec]) -> dict[str, Any]:
    """Every endpoint's alerts and the cluster-wide ones in Prometheus rule-file format: ``{"groups": [{"name",
    "interval", "rules"}]}``, one group per endpoint in ``specs``'s order, then the cluster's. ``specs``: the
    deployment's endpoints (``Config.specs()``), at least one."""
    if not specs:
        raise ValueError("specs must hold at least one endpoint, got none")
    first = specs[0]
    return {"groups": [*(endpoint_rule_group(s) for s in specs),
                       cluster_rule_group(first.deployment, first.observability)]}
