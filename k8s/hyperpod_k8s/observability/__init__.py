"""DPD observability as code: metric catalogue -> panels/segments -> dashboards; alerts; delivery.

Pure-Python entry points (no cdk8s/aws_cdk import):

* :func:`hyperpod_k8s.observability.alerts.alert_rule_groups` -- Prometheus rule groups (AMP / PrometheusRule)
* :func:`hyperpod_k8s.observability.delivery.write_dashboard_files` -- Grafana JSON for Amazon Managed Grafana

cdk8s: :func:`hyperpod_k8s.observability.chart.build_observability_charts`.
"""
