"""One endpoint -> :class:`~.queries.Target`: its pods and the labels the collector keeps."""

from __future__ import annotations

from hyperpod_core.config.observability import ObservabilityConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.telemetry.labels import CollectorLabels
from hyperpod_core.telemetry.queries import EndpointKind, Target


def collector_labels(observability: ObservabilityConfig) -> CollectorLabels:
    """The pod and namespace labels ``observability.collector_labels`` says the collector writes."""
    c = observability.collector_labels
    return CollectorLabels(dcgm_pod=c.dcgm_pod, dcgm_namespace=c.dcgm_namespace,
                           kube_state_metrics_pod=c.kube_state_metrics_pod,
                           kube_state_metrics_namespace=c.kube_state_metrics_namespace)


def target(spec: EndpointSpec, kind: EndpointKind, *, namespace: str | None = None,
           endpoint: str | None = None) -> Target:
    """Endpoint ``spec`` (or Grafana variables standing for its namespace and name) as a query target."""
    return Target(namespace=namespace or spec.namespace, endpoint=endpoint or spec.name, kind=kind,
                  collector=collector_labels(spec.observability))


def dpd_target(spec: EndpointSpec) -> Target:
    return target(spec, "dpd")


def scaling_target(spec: EndpointSpec) -> Target:
    """The pods endpoint ``spec``'s own autoscaling triggers read (the KEDA queries of its manifest): those of the
    InferenceEndpointConfig named ``spec.name`` only, never a blue/green revision's (``Target.revisions`` false; a
    revision's copy is re-anchored on its own name by ``hyperpod-dpd rollout``), so neither revision scales on the
    other's pods while both run. The endpoint props and the docs' reference table both take it from here."""
    return Target(namespace=spec.namespace, endpoint=spec.name, kind="dpd",
                  collector=collector_labels(spec.observability), revisions=False)
