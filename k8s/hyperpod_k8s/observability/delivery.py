"""Delivery of the dashboards and alerts, separate from their definition (:mod:`hyperpod_core.telemetry`).

* Plain JSON files for import into Grafana (``dist/dashboards/``): :func:`write_dashboard_files`.
* For clusters that run prometheus-operator and a Grafana sidecar (``observability.in_cluster_manifests``): the
  same files in ConfigMaps for the sidecar, and the alerts as a PrometheusRule (``observability_chart.py``, from
  the props ``props.py`` maps the config to).
"""

from __future__ import annotations

from pathlib import Path

from hyperpod_core.config import Config
from hyperpod_core.telemetry.dashboards import dashboards
from hyperpod_core.telemetry.render import render, to_json_text


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
