"""Delivery of the dashboards and alerts, separate from their definition (:mod:`hyperpod_core.telemetry`).

* Plain JSON files for import into Grafana (``dist/dashboards/``): :func:`write_dashboard_files`.
* For clusters that run prometheus-operator and a Grafana sidecar (``observability.in_cluster_manifests``):
  ConfigMaps for the sidecar and a PrometheusRule, as manifest dicts here (pure, testable without jsii), put
  into a cdk8s chart by ``chart.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from hyperpod_core.config import Config
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_core.telemetry.dashboards import dashboards
from hyperpod_core.telemetry.render import render, to_json_text

#: Folder the Grafana sidecar files the dashboards under (kube-prometheus-stack: folderAnnotation).
GRAFANA_FOLDER_ANNOTATION: Final = "grafana_folder"
GRAFANA_FOLDER: Final = "DPD"
#: The k8s-sidecar default: any value of the label selects the ConfigMap; "1" is the convention.
GRAFANA_SIDECAR_LABEL_VALUE: Final = "1"


def dashboard_files(config: Config) -> dict[str, str]:
    """``{"<uid>.json": json_text}`` for every dashboard, deterministic text."""
    return {f"{spec.uid}.json": to_json_text(render(spec)) for spec in dashboards(config)}


def write_dashboard_files(config: Config, outdir: Path) -> list[Path]:
    """Write the dashboards as plain JSON (Amazon Managed Grafana "Import") into ``outdir``; returns them."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in dashboard_files(config).items():
        path = outdir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return sorted(written)


def dashboard_config_maps(config: Config) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard, labelled for the Grafana sidecar."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"grafana-dashboard-{name.removesuffix('.json')}"[:63].rstrip("-"),
                "namespace": config.endpoint.namespace,
                "labels": {config.observability.grafana_sidecar_label: GRAFANA_SIDECAR_LABEL_VALUE},
                "annotations": {GRAFANA_FOLDER_ANNOTATION: GRAFANA_FOLDER},
            },
            "data": {name: text},
        }
        for name, text in dashboard_files(config).items()
    ]


def prometheus_rule(config: Config) -> dict[str, Any]:
    """The alerts as a prometheus-operator PrometheusRule (monitoring.coreos.com/v1)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": f"{config.endpoint.name}-dpd-alerts",
            "namespace": config.endpoint.namespace,
            "labels": {"app.kubernetes.io/part-of": "hyperpod-dpd", "app.kubernetes.io/component": "alerts"},
        },
        "spec": alert_rule_groups(config),
    }
