"""Config -> :class:`~.queries.Target`: the endpoint's pods and the labels the collector keeps."""

from __future__ import annotations

from hyperpod_core.config import Config
from hyperpod_core.telemetry.labels import CollectorLabels
from hyperpod_core.telemetry.queries import EndpointKind, Target


def collector_labels(config: Config) -> CollectorLabels:
    c = config.observability.collector_labels
    return CollectorLabels(dcgm_pod=c.dcgm_pod, dcgm_namespace=c.dcgm_namespace,
                           kube_state_metrics_pod=c.kube_state_metrics_pod,
                           kube_state_metrics_namespace=c.kube_state_metrics_namespace)


def target(config: Config, kind: EndpointKind, *, namespace: str | None = None,
           endpoint: str | None = None) -> Target:
    """The configured endpoint (or Grafana variables standing for it) as a query target."""
    return Target(namespace=namespace or config.endpoint.namespace, endpoint=endpoint or config.endpoint.name,
                  kind=kind, collector=collector_labels(config))


def dpd_target(config: Config) -> Target:
    return target(config, "dpd")
