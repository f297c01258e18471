"""Delivery of the DPD dashboards and alerts on the Kubernetes side.

The definitions (metrics, queries, alerts, dashboards, Grafana rendering) live in
:mod:`hyperpod_core.telemetry`, which both apps import. Here:

``delivery``    JSON files, ConfigMaps for the Grafana sidecar, PrometheusRule (plain dicts)
``chart``       the cdk8s chart (the only module that imports cdk8s)

The entry points are re-exported lazily, so importing this package never starts jsii:
``write_dashboard_files(config, outdir)`` and ``build_observability_charts(app, config)``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_observability_charts", "write_dashboard_files"]

_HOMES = {
    "write_dashboard_files": "hyperpod_k8s.observability.delivery",
    "build_observability_charts": "hyperpod_k8s.observability.chart",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
