"""Delivery of the dashboards and alerts, separate from their definition (:mod:`hyperpod_core.telemetry`).

* Plain JSON files for import into Grafana (``dist/dashboards/``, every endpoint's): :func:`write_dashboard_files`.
* For clusters that run prometheus-operator and a Grafana sidecar (``observability.in_cluster_manifests``): the
  same files in ConfigMaps for the sidecar, and the alerts as PrometheusRules (``observability_chart.py``, from
  the props ``props.py`` maps each endpoint to).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_k8s.observability.props import dashboard_files


def write_dashboard_files(specs: Iterable[EndpointSpec], outdir: Path) -> list[Path]:
    """Write every endpoint's dashboards (``specs``: the deployment's) as plain JSON (Amazon Managed Grafana
    "Import") into ``outdir``; returns them."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in specs:
        for name, text in dashboard_files(spec).items():
            path = outdir / name
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return sorted(written)
