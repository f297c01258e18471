"""The composition root of the cdk8s app: config -> each chart's typed props -> the charts.

Charts never see the :class:`~hyperpod_core.config.Config`: each takes one frozen props dataclass (STYLE rule 11),
which the ``*_props`` functions here derive. Chart IDs become file names (``<id>.k8s.yaml``).
"""

from __future__ import annotations

import cdk8s

from hyperpod_core.config import Config
from hyperpod_core.inputs import EndpointInputs
from hyperpod_k8s.benchmark.benchmark_chart import BenchmarkChart
from hyperpod_k8s.benchmark.props import benchmark_props
from hyperpod_k8s.benchmark.reference import reference_layouts
from hyperpod_k8s.endpoint.endpoint_chart import EndpointChart
from hyperpod_k8s.endpoint.props import EndpointChartProps, endpoint_props
from hyperpod_k8s.observability.observability_chart import ObservabilityChart
from hyperpod_k8s.observability.props import observability_props


def build_endpoint_charts(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> list[cdk8s.Chart]:
    """``<endpoint>-dpd`` (the DPD endpoint) and ``<endpoint>-colocated`` (baseline and rollback), then the
    benchmark's own layouts (``reference/``: AWS's, and the configured DPD endpoint with its replicas pinned)."""
    props = endpoint_props(config, inputs)
    name = config.endpoint.name
    layouts = [(f"{name}-dpd", EndpointChartProps(mode="dpd", endpoint=props)),
               (f"{name}-colocated", EndpointChartProps(mode="colocated", endpoint=props)),
               *reference_layouts(config, props)]
    return [EndpointChart(app, chart_id, props=layout) for chart_id, layout in layouts]


def build_benchmark_chart(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> cdk8s.Chart:
    """``<endpoint>-benchmark``: suspended genai-bench Jobs, one per run (``hyperpod-dpd bench`` runs them)."""
    return BenchmarkChart(app, f"{config.endpoint.name}-benchmark", props=benchmark_props(config, inputs))


def build_observability_chart(app: cdk8s.App, config: Config) -> cdk8s.Chart | None:
    """``<endpoint>-observability``: the PrometheusRule and the sidecar ConfigMaps, only when asked for."""
    props = observability_props(config)
    if props is None:
        return None
    return ObservabilityChart(app, f"{config.endpoint.name}-observability", props=props)


def build_charts(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> None:
    """Add every chart for ``config`` to ``app``."""
    build_endpoint_charts(app, config, inputs)
    build_benchmark_chart(app, config, inputs)
    build_observability_chart(app, config)
