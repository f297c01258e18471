"""Which charts the cdk8s app builds. Each component owns its module; this only composes them.

Chart IDs become file names (``<id>.k8s.yaml``).
"""

from __future__ import annotations

import cdk8s

from hyperpod_core.config import Config
from hyperpod_core.inputs import EndpointInputs


def build_endpoint_charts(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> list[cdk8s.Chart]:
    """``<endpoint>-dpd`` (the DPD endpoint) and ``<endpoint>-colocated`` (baseline and rollback)."""
    from hyperpod_k8s.endpoint.colocated_endpoint import ColocatedEndpoint
    from hyperpod_k8s.endpoint.dpd_endpoint import DpdEndpoint
    from hyperpod_k8s.endpoint.props import endpoint_props

    props = endpoint_props(config, inputs)
    name, ns = config.endpoint.name, config.endpoint.namespace
    dpd = cdk8s.Chart(app, f"{name}-dpd", namespace=ns, disable_resource_name_hashes=True)
    DpdEndpoint(dpd, "Endpoint", props=props)
    colocated = cdk8s.Chart(app, f"{name}-colocated", namespace=ns, disable_resource_name_hashes=True)
    ColocatedEndpoint(colocated, "Endpoint", props=props)
    return [dpd, colocated]


def build_benchmark_chart(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> cdk8s.Chart:
    """``<endpoint>-benchmark``: suspended genai-bench Jobs, one per run (``hyperpod-dpd bench`` runs them)."""
    from hyperpod_k8s.benchmark.chart import build_benchmark_chart as build

    return build(app, config, inputs)


def build_charts(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> None:
    """Add every chart for ``config`` to ``app``."""
    from hyperpod_k8s.benchmark.reference import build_reference_charts
    from hyperpod_k8s.observability import build_observability_charts

    build_endpoint_charts(app, config, inputs)
    build_benchmark_chart(app, config, inputs)
    build_reference_charts(app, config, inputs)  # aws-reference layouts; nothing when that experiment is off
    build_observability_charts(app, config)  # PrometheusRule + sidecar ConfigMaps, only when asked for
