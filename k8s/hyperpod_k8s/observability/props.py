"""One endpoint -> the typed props of its ``<endpoint>-observability`` chart (a pure function, no jsii).

The chart exists only with ``observability.in_cluster_manifests``: HyperPod's add-on installs neither the
prometheus-operator CRDs nor a Grafana sidecar, so on a plain HyperPod cluster ``kubectl apply`` of a PrometheusRule
fails and the ConfigMaps are read by nothing (lifecycle-facts.md). The alerts reach AMP through the CDK app instead.

Each endpoint's chart holds its dashboards and its rule group (``dpd-<endpoint>``), in its namespace. The cluster-wide
rules (heartbeat, cluster metrics: :func:`hyperpod_core.telemetry.alerts.cluster_rule_group`) are the deployment's,
not an endpoint's: one PrometheusRule, ``dpd-cluster-alerts``, in its own chart (:func:`cluster_alerts_props`), always
in the namespace :data:`CLUSTER_ALERTS_NAMESPACE` and the file
:func:`hyperpod_core.dist_layout.cluster_alerts_file`, whichever endpoints the config lists in whatever order
(``kubectl apply`` does not prune: a rule that moved with the first endpoint would stay behind and fire twice). A
PrometheusRule's namespace does not limit what its rules query.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hyperpod_core.config.observability import ObservabilityConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import CLUSTER_ALERTS
from hyperpod_core.telemetry.alerts import cluster_rule_group, endpoint_rule_group
from hyperpod_core.telemetry.dashboards import dashboards, folder_title
from hyperpod_core.telemetry.render import render, to_json_text

#: The PrometheusRule of the cluster-wide rules (an endpoint's is ``<endpoint>-dpd-alerts``: never this name), also
#: its chart's ID and so its file's name (:func:`hyperpod_core.dist_layout.cluster_alerts_file`).
CLUSTER_ALERTS_NAME: Final = CLUSTER_ALERTS
#: Namespace of the cluster-wide PrometheusRule: fixed, never an endpoint's (which one comes first must not move it),
#: and one every cluster has, so its ``kubectl apply`` needs no namespace created first.
CLUSTER_ALERTS_NAMESPACE: Final = "default"
ALERTS_LABELS: Final = {"app.kubernetes.io/part-of": "hyperpod-dpd", "app.kubernetes.io/component": "alerts"}
#: Longest name of a ConfigMap (a DNS subdomain name, Kubernetes API conventions) we write: a DNS label's 63.
NAME_MAX: Final = 63


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One alerting rule of a PrometheusRule (prometheus-operator ``monitoring.coreos.com/v1``, ``Rule``: the
    Prometheus rule-file fields ``alert``, ``expr``, ``for``, ``labels``, ``annotations``)."""

    alert: str
    expr: str
    for_: str | None = None
    """``for``. Default: none (the alert fires on the first failing evaluation)."""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RuleGroup:
    """``spec.groups[]``: rules evaluated together."""

    name: str
    rules: tuple[Rule, ...]
    interval: str | None = None
    """Evaluation interval. Default: none (Prometheus's global ``evaluation_interval``)."""


@dataclass(frozen=True, kw_only=True)
class PrometheusRuleSpec:
    """``spec`` of a PrometheusRule: the rule groups."""

    groups: tuple[RuleGroup, ...]

    @classmethod
    def from_rule_file(cls, doc: Mapping[str, Any]) -> PrometheusRuleSpec:
        """From the Prometheus rule-file format (``{"groups": [{"name", "interval", "rules"}]}``); an unknown key is
        a ``TypeError`` naming it."""
        return cls(groups=tuple(
            RuleGroup(**{**group, "rules": tuple(Rule(**{("for_" if k == "for" else k): v for k, v in r.items()})
                                                 for r in group["rules"])})
            for group in doc["groups"]))


@dataclass(frozen=True, kw_only=True)
class DashboardProps:
    """One dashboard as a Grafana-sidecar ConfigMap."""

    config_map_name: str
    file_name: str
    """The ConfigMap's one key, ``<uid>.json``: the file name the sidecar writes."""
    json_text: str


@dataclass(frozen=True, kw_only=True)
class AlertRulesProps:
    """One PrometheusRule."""

    name: str
    labels: dict[str, str]
    spec: PrometheusRuleSpec


@dataclass(frozen=True, kw_only=True)
class ObservabilityChartProps:
    """Everything the ``<endpoint>-observability`` chart writes."""

    namespace: str
    sidecar_label: str
    """``observability.grafana_sidecar_label``: the label the Grafana sidecar selects ConfigMaps by."""
    folder: str
    """The Grafana folder the sidecar files the dashboards under (the deployment's:
    :func:`hyperpod_core.telemetry.dashboards.folder_title`)."""
    dashboards: tuple[DashboardProps, ...]
    alerts: tuple[AlertRulesProps, ...]
    """The endpoint's PrometheusRule (the cluster-wide one is in :class:`ClusterAlertsChartProps`)."""


@dataclass(frozen=True, kw_only=True)
class ClusterAlertsChartProps:
    """Everything the deployment's ``dpd-cluster-alerts`` chart writes: the cluster-wide PrometheusRule."""

    namespace: str
    alerts: AlertRulesProps


def config_map_name(*parts: str) -> str:
    """``grafana-dashboard-<parts joined by '-'>``, shortened to :data:`NAME_MAX` characters with a hash of the whole
    when longer (two endpoints whose long names share a beginning keep their own maps)."""
    whole = "-".join(("grafana-dashboard", *parts))
    if len(whole) <= NAME_MAX:
        return whole
    return f"{whole[:NAME_MAX - 9].rstrip('-')}-{hashlib.sha256(whole.encode()).hexdigest()[:8]}"


def dashboard_files(spec: EndpointSpec) -> dict[str, str]:
    """``{"<uid>.json": json_text}`` for each of endpoint ``spec``'s dashboards, deterministic text."""
    return {f"{d.uid}.json": to_json_text(render(d)) for d in dashboards(spec)}


def observability_props(spec: EndpointSpec) -> ObservabilityChartProps | None:
    """Endpoint ``spec``'s chart props, or ``None`` when the chart is not wanted (module docstring)."""
    o = spec.observability
    if not (o.enabled and o.in_cluster_manifests):
        return None
    return ObservabilityChartProps(
        namespace=spec.namespace, sidecar_label=o.grafana_sidecar_label, folder=folder_title(spec.deployment),
        dashboards=tuple(
            DashboardProps(config_map_name=config_map_name("dpd", d.kind, spec.name), file_name=f"{d.uid}.json",
                           json_text=to_json_text(render(d)))
            for d in dashboards(spec)),
        alerts=(AlertRulesProps(name=f"{spec.name}-dpd-alerts", labels=dict(ALERTS_LABELS),
                                spec=PrometheusRuleSpec.from_rule_file({"groups": [endpoint_rule_group(spec)]})),))


def cluster_alerts_props(deployment: str, observability: ObservabilityConfig) -> ClusterAlertsChartProps | None:
    """The props of deployment ``deployment``'s cluster-wide PrometheusRule (``observability``: its ``observability``
    section), or ``None`` when the in-cluster manifests are not wanted (module docstring). Built once per deployment,
    from no endpoint."""
    if not (observability.enabled and observability.in_cluster_manifests):
        return None
    return ClusterAlertsChartProps(namespace=CLUSTER_ALERTS_NAMESPACE, alerts=AlertRulesProps(
        name=CLUSTER_ALERTS_NAME, labels=dict(ALERTS_LABELS),
        spec=PrometheusRuleSpec.from_rule_file({"groups": [cluster_rule_group(deployment, observability)]})))
