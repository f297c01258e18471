"""Config -> the typed props of the ``<endpoint>-observability`` chart (a pure function, no jsii).

The chart exists only with ``observability.in_cluster_manifests``: HyperPod's add-on installs neither the
prometheus-operator CRDs nor a Grafana sidecar, so on a plain HyperPod cluster ``kubectl apply`` of a PrometheusRule
fails and the ConfigMaps are read by nothing (lifecycle-facts.md). The alerts reach AMP through the CDK app instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_core.config import Config
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_k8s.observability.delivery import dashboard_files


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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.for_ is not None:
            out["for"] = self.for_
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True, kw_only=True)
class RuleGroup:
    """``spec.groups[]``: rules evaluated together."""

    name: str
    rules: tuple[Rule, ...]
    interval: str | None = None
    """Evaluation interval. Default: none (Prometheus's global ``evaluation_interval``)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.interval is not None:
            out["interval"] = self.interval
        out["rules"] = [rule.to_json() for rule in self.rules]
        return out


@dataclass(frozen=True, kw_only=True)
class PrometheusRuleSpec:
    """``spec`` of a PrometheusRule: the rule groups."""

    groups: tuple[RuleGroup, ...]

    def to_json(self) -> dict[str, Any]:
        return {"groups": [group.to_json() for group in self.groups]}

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
class ObservabilityChartProps:
    """Everything the ``<endpoint>-observability`` chart writes."""

    namespace: str
    sidecar_label: str
    """``observability.grafana_sidecar_label``: the label the Grafana sidecar selects ConfigMaps by."""
    dashboards: tuple[DashboardProps, ...]
    alerts_name: str
    alerts_labels: dict[str, str]
    alerts: PrometheusRuleSpec


def observability_props(config: Config) -> ObservabilityChartProps | None:
    """The chart's props, or ``None`` when it is not wanted (module docstring)."""
    if not (config.observability.enabled and config.observability.in_cluster_manifests):
        return None
    return ObservabilityChartProps(
        namespace=config.endpoint.namespace, sidecar_label=config.observability.grafana_sidecar_label,
        dashboards=tuple(
            DashboardProps(config_map_name=f"grafana-dashboard-{name.removesuffix('.json')}"[:63].rstrip("-"),
                           file_name=name, json_text=text)
            for name, text in dashboard_files(config).items()),
        alerts_name=f"{config.endpoint.name}-dpd-alerts",
        alerts_labels={"app.kubernetes.io/part-of": "hyperpod-dpd", "app.kubernetes.io/component": "alerts"},
        alerts=PrometheusRuleSpec.from_rule_file(alert_rule_groups(config)))
