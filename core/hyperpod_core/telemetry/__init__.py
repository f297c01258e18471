"""What we ask Prometheus, defined once for both apps: metrics, labels, queries, alerts, dashboards.

Pure Python (no aws_cdk, no cdk8s): the CDK app imports it for the AMP alert rules and the Amazon Managed
Grafana dashboards, the cdk8s app for the endpoint's autoscaling triggers, the PrometheusRule and the
dashboard ConfigMaps. Layers (each module imports only the ones above it):

``labels``      label names as HyperPod stores them (``pod_name``, ``namespace``, ``metric_source``...)
``catalogue``   every metric we query, with source, version and exporter labels
``queries``     role selectors, PromQL helpers and the named queries shared by all consumers
``targets``     config -> query target (endpoint, namespace, collector labels)
``alerts``      the alert rules (thresholds from ``observability.slo``)
``panels``      panels grouped into segments
``dashboards``  the DPD overview and the DPD-vs-colocated comparison
``render``      Grafana JSON through the Grafana Foundation SDK
"""
