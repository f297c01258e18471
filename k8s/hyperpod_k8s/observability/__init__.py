"""DPD observability as code: metric catalogue -> panels/segments -> dashboards; alerts; delivery.

Layers (each module imports only the ones above it):

``catalogue``   every metric we query, with source and version
``promql``      pod selectors per DPD role and PromQL helpers, from catalogue metrics
``panels``      panels grouped into segments, per endpoint (DPD or colocated)
``dashboards``  the DPD overview and the DPD-vs-colocated comparison, assembled from segments
``alerts``      the alert rules (thresholds from ``observability.slo``)
``grafana``     rendering with the Grafana Foundation SDK
``delivery``    JSON files, ConfigMaps, PrometheusRule
``chart``       the cdk8s chart (the only module that imports cdk8s)

The three entry points are re-exported lazily, so importing this package (or ``alerts``) never starts
jsii: ``alert_rule_groups(config)``, ``write_dashboard_files(config, outdir)`` and
``build_observability_charts(app, config)``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["alert_rule_groups", "build_observability_charts", "write_dashboard_files"]

_HOMES = {
    "alert_rule_groups": "hyperpod_k8s.observability.alerts",
    "write_dashboard_files": "hyperpod_k8s.observability.delivery",
    "build_observability_charts": "hyperpod_k8s.observability.chart",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
