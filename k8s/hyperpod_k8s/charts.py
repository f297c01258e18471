"""Each endpoint's charts: its spec (and the cluster facts it needs) -> each chart's typed props -> the charts.

Charts never see the :class:`~hyperpod_core.config.Config`, and neither does this module: it builds one endpoint's
charts from that endpoint's :class:`~hyperpod_core.config.spec.EndpointSpec`, its deploy-time inputs and the one
cluster fact the manifests name (the GPU subnet's AZ ID). The cdk8s entry point (``main.py``) calls
:func:`build_endpoint` once per endpoint. Each chart takes one frozen props dataclass (STYLE rule 11), which the
``*_props`` functions derive. Chart IDs become file names (``<id>.k8s.yaml``), each beginning with the endpoint's
name (unique in a config), so two endpoints' charts never share an ID.
"""

from __future__ import annotations

import cdk8s

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.inputs import EndpointInputs
from hyperpod_k8s.benchmark.benchmark_chart import BenchmarkChart
from hyperpod_k8s.benchmark.props import benchmark_props
from hyperpod_k8s.benchmark.reference import reference_layouts
from hyperpod_k8s.endpoint.address_chart import AddressChart
from hyperpod_k8s.endpoint.endpoint_chart import EndpointChart
from hyperpod_k8s.endpoint.props import EndpointChartProps, EndpointProps, address_props, endpoint_props
from hyperpod_k8s.observability.observability_chart import ObservabilityChart
from hyperpod_k8s.observability.props import observability_props


def build_endpoint_charts(app: cdk8s.App, spec: EndpointSpec, props: EndpointProps) -> list[cdk8s.Chart]:
    """``<endpoint>-dpd`` (the DPD endpoint) and ``<endpoint>-colocated`` (the baseline), then the
    benchmark's own layouts (``reference/``: AWS's, and the configured DPD endpoint with its replicas pinned)."""
    layouts = [(f"{spec.name}-dpd", EndpointChartProps(mode="dpd", endpoint=props)),
               (f"{spec.name}-colocated", EndpointChartProps(mode="colocated", endpoint=props)),
               *reference_layouts(spec, props)]
    return [EndpointChart(app, chart_id, props=layout) for chart_id, layout in layouts]


def build_address_chart(app: cdk8s.App, spec: EndpointSpec) -> cdk8s.Chart:
    """``<endpoint>-address``: the Service ``<endpoint>``, the endpoint's stable in-cluster address (ExternalName to
    its routing service; ``hyperpod-dpd rollout`` repoints it at a later revision)."""
    return AddressChart(app, f"{spec.name}-address", props=address_props(spec))


def build_benchmark_chart(app: cdk8s.App, spec: EndpointSpec, props: EndpointProps) -> cdk8s.Chart:
    """``<endpoint>-benchmark``: suspended genai-bench Jobs, one per run (``hyperpod-dpd bench`` runs them), and the
    ServiceAccount ``<endpoint>-benchmark`` they run as."""
    return BenchmarkChart(app, f"{spec.name}-benchmark", props=benchmark_props(spec, props))


def build_observability_chart(app: cdk8s.App, spec: EndpointSpec) -> cdk8s.Chart | None:
    """``<endpoint>-observability``: the endpoint's PrometheusRule and the sidecar ConfigMaps, only when asked for
    (the cluster-wide rules are the deployment's: ``main.py`` builds them once)."""
    props = observability_props(spec)
    if props is None:
        return None
    return ObservabilityChart(app, f"{spec.name}-observability", props=props)


def build_endpoint(app: cdk8s.App, spec: EndpointSpec, inputs: EndpointInputs, *, availability_zone_id: str) -> None:
    """Add every chart of endpoint ``spec`` to ``app``: ``inputs`` its deploy-time values, ``availability_zone_id``
    the GPU subnet's AZ ID (``network.gpu_availability_zone_id``)."""
    props = endpoint_props(spec, inputs, availability_zone_id=availability_zone_id)
    build_endpoint_charts(app, spec, props)
    build_address_chart(app, spec)
    build_benchmark_chart(app, spec, props)
    build_observability_chart(app, spec)
