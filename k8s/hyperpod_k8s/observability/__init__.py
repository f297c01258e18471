"""Delivery of the DPD dashboards and alerts on the Kubernetes side.

The definitions (metrics, queries, alerts, dashboards, Grafana rendering) live in
:mod:`hyperpod_core.telemetry`, which both apps import. Here:

``delivery``             the dashboards as plain JSON files (``write_dashboard_files(specs, outdir)``)
``props``                one endpoint -> its chart's typed props (the sidecar ConfigMaps, its PrometheusRule); the
                         deployment -> the cluster-wide PrometheusRule's
``observability_chart``  the endpoint's cdk8s chart; ``cluster_alerts_chart`` the deployment's (cluster-wide rules);
                         with ``prometheus_rule``, the only modules that import cdk8s
"""

from hyperpod_k8s.observability.delivery import write_dashboard_files

__all__ = ["write_dashboard_files"]
