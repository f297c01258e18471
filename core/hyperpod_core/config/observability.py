"""The observability section: metrics, alert thresholds and receivers, dashboards."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hyperpod_core.config.section import Section
from hyperpod_core.config.types import (
    Broken,
    EmailAddress,
    FieldRule,
    GrafanaWorkspaceId,
    LabelKey,
    PrometheusLabel,
    SnsTopicArn,
    unique,
)
from hyperpod_core.telemetry import objectives


def _bucket_boundary(field: str) -> FieldRule:
    """A latency objective the alerts can count requests under: a bucket boundary of each histogram it is read
    from (``telemetry/objectives.py``); the message names the two nearest boundaries."""
    bounds = objectives.boundaries(field)
    allowed = (f"must be a bucket boundary of {objectives.histogram_names(field)} (the alerts count the requests "
               "within it)")

    def check(value: float) -> None:
        if float(value) not in bounds:
            below, above = objectives.nearest(field, value)
            near = [f"{b:g}" for b in (below, above) if b is not None]
            raise Broken(allowed, f"; the nearest {'are' if len(near) > 1 else 'is'} {' and '.join(near)}")

    return FieldRule(check, f"{allowed}: one of {', '.join(f'{b:g}' for b in bounds)}", {"enum": list(bounds)})


class SloConfig(Section):
    """Thresholds the alerts fire on; the latency ones are also drawn on the dashboards' latency panels."""

    ttft_p95_seconds: Annotated[float, Field(gt=0), _bucket_boundary("ttft_p95_seconds")] = 2.5
    """Time to first token, in seconds, within which 95 % of requests must stay (the alerts fire when fewer do).
    Must be a bucket boundary of vLLM's TTFT and E2E histograms: 0.5, 1, 2.5, 5, 10, 20 or 40. Default: 2.5."""
    tpot_p95_seconds: Annotated[float, Field(gt=0), _bucket_boundary("tpot_p95_seconds")] = 0.1
    """Time per output token, in seconds, within which 95 % of requests must stay. Must be a bucket boundary of
    vLLM's per-request TPOT histogram (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, ...). Default: 0.1."""
    error_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.01
    """Share of failed requests above which the alert fires. Default: 0.01."""
    kv_cache_usage_ratio: Annotated[float, Field(gt=0, le=1)] = 0.9
    """KV-cache usage above which the alert fires. Default: 0.9."""
    # The default stays the int 16 (not validated into 16.0): the alert rules render it as "> 16", as before.
    prefill_queue_per_replica: Annotated[float, Field(gt=0, validate_default=False)] = 16
    """Waiting requests per prefill replica above which the alert fires. Default: 16."""
    kv_transfer_miss_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Share of requested KV tokens decode may fail to receive from prefill before the alert fires. Default: 0.05."""
    pod_restarts_per_15m: Annotated[int, Field(ge=1)] = 2
    """Container restarts of one DPD pod within 15 minutes above which it counts as a restart loop. Default: 2."""


class CollectorLabelsConfig(Section):
    """Pod and namespace labels of the DCGM and kube-state-metrics series in the workspace. The observability
    add-on's relabelling is not published; the defaults are the labels both exporters write themselves
    (docs/observability.md, "Labels")."""

    dcgm_pod: PrometheusLabel = "pod"
    """Pod label of the DCGM exporter's series. Default: `pod`."""
    dcgm_namespace: PrometheusLabel = "namespace"
    """Namespace label of the DCGM exporter's series. Default: `namespace`."""
    kube_state_metrics_pod: PrometheusLabel = "pod"
    """Pod label of the kube-state-metrics series. Default: `pod`."""
    kube_state_metrics_namespace: PrometheusLabel = "namespace"
    """Namespace label of the kube-state-metrics series. Default: `namespace`."""


class GrafanaWorkspaceConfig(Section):
    """An existing Amazon Managed Grafana workspace that receives the dashboards and the AMP data source."""

    workspace_id: GrafanaWorkspaceId
    """Workspace ID (`g-` and 10 hex digits), in `region`. Required."""
    folder: Annotated[str, Field(min_length=1, max_length=100)] = "HyperPod DPD"
    """Grafana folder of the dashboards. Default: `HyperPod DPD`."""


class AlertsConfig(Section):
    """Who the alerts reach. Amazon Managed Service for Prometheus notifies only through its alert manager, whose
    only receiver is Amazon SNS (AMP user guide, alert manager receivers): the observability stack creates an
    encrypted topic that the alert manager publishes every alert to, and subscribes these receivers."""

    email_addresses: Annotated[tuple[EmailAddress, ...], Field(max_length=20), unique("an address")] = ()
    """E-mail addresses subscribed to the alert topic; each must confirm the subscription from the e-mail SNS
    sends. Default: none."""
    topic_arn: SnsTopicArn | None = None
    """An existing Standard SNS topic in this account and `region` that receives every alert as well (pager or
    chat integration). AMP's alert manager routes only to SNS topics in its own account (AMP user guide, "Alert
    Manager"): a topic of another account than the one the config's ARNs name (`eks.admin_principal_arn`,
    training plans) is refused. Its access policy must let `aps.amazonaws.com` publish (and its KMS key, if
    encrypted, decrypt); the stack cannot change a topic it does not own (docs/observability.md). Default: none."""


class ObservabilityConfig(Section):
    """Metrics, alerts and dashboards (docs/observability.md)."""

    enabled: bool = True
    """Create the Amazon Managed Prometheus workspace, the HyperPod observability add-on and the alert rules.
    Default: on."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300)] = 15
    """Scrape interval of the observability add-on, in seconds. Default: 15."""
    grafana_sidecar_label: LabelKey = "grafana_dashboard"
    """Label key of the dashboard ConfigMaps, for a Grafana sidecar that loads dashboards by label. Default:
    `grafana_dashboard`."""
    slo: SloConfig = SloConfig()
    """Alert thresholds. Default: TTFT p95 2.5 s, TPOT p95 0.1 s, errors 1 %, KV cache 90 %, prefill queue 16 per
    replica, KV-transfer miss 5 %, 2 restarts per 15 min."""
    collector_labels: CollectorLabelsConfig = CollectorLabelsConfig()
    """Labels of the DCGM and kube-state-metrics series. Default: `pod` and `namespace`."""
    grafana_workspace: GrafanaWorkspaceConfig | None = None
    """Deploy dashboards and the AMP data source into this Amazon Managed Grafana workspace on `cdk deploy`.
    Default: none (dashboards ship as JSON files in `dist/dashboards/` to import)."""
    alerts: AlertsConfig = AlertsConfig()
    """Receivers of the alerts (e-mail addresses and/or an existing SNS topic). Default: none: the alerts fire in
    the workspace and reach no one (synth and `status` say so)."""
    in_cluster_manifests: bool = False
    """Also write the alerts as a prometheus-operator `PrometheusRule` and the dashboards as Grafana-sidecar
    ConfigMaps into `dist/in-cluster-observability/`, for clusters that run both (HyperPod's observability
    add-on installs neither: its collector writes to AMP). Default: off."""

