"""``ObservabilityChart``: the dashboards as Grafana-sidecar ConfigMaps (cdk8s-plus) and the alerts as a
PrometheusRule, a pure function of :class:`~hyperpod_k8s.observability.props.ObservabilityChartProps`.

cdk8s-plus writes ``immutable: false`` on every ConfigMap: kept, it is the Kubernetes default (the sidecar reloads a
dashboard whose ConfigMap changes, so the maps must stay mutable).
"""

from __future__ import annotations

from typing import Final

import cdk8s
import cdk8s_plus_33 as kplus
from constructs import Construct

from hyperpod_k8s.observability.prometheus_rule import prometheus_rule
from hyperpod_k8s.observability.props import ObservabilityChartProps

#: Folder the Grafana sidecar files the dashboards under (kube-prometheus-stack: folderAnnotation).
GRAFANA_FOLDER_ANNOTATION: Final = "grafana_folder"
#: The k8s-sidecar default: any value of the label selects the ConfigMap; "1" is the convention.
GRAFANA_SIDECAR_LABEL_VALUE: Final = "1"


class ObservabilityChart(cdk8s.Chart):
    """One ConfigMap per dashboard and the endpoint's PrometheusRule, in the endpoint's namespace."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ObservabilityChartProps) -> None:
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        self.dashboards = [
            kplus.ConfigMap(
                self, f"dashboard-{i}",
                metadata=cdk8s.ApiObjectMetadata(
                    name=dashboard.config_map_name, labels={props.sidecar_label: GRAFANA_SIDECAR_LABEL_VALUE},
                    annotations={GRAFANA_FOLDER_ANNOTATION: props.folder}),
                data={dashboard.file_name: dashboard.json_text})
            for i, dashboard in enumerate(props.dashboards)]
        self.alerts = [
            prometheus_rule(self, "alerts" if i == 0 else f"alerts-{i}",
                            metadata=cdk8s.ApiObjectMetadata(name=rules.name, labels=rules.labels), spec=rules.spec)
            for i, rules in enumerate(props.alerts)]
