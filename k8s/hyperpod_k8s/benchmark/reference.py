"""The aws-reference experiment's endpoint layouts: AWS's published comparison, not the configured endpoint.

AWS compared 1 prefill + 1 decode replica (2 nodes) with **one** colocated node (AWS ML blog "Disaggregated
prefill and decode for LLM inference on SageMaker HyperPod", 2026-07-10, "Benchmarking performance"). The
configured endpoint may hold more prefill replicas, and its colocated baseline holds as many GPUs as DPD (the
equal-GPU experiment), so the reference gets its own two manifests, derived from the same props with only the
replica counts changed (and autoscaling off, as in AWS's run). Same name as the endpoint: ``hyperpod-dpd bench``
applies them in turn (a replace), never ``kubectl apply -f dist/endpoint/``.
"""

from __future__ import annotations

from dataclasses import replace

import cdk8s

from hyperpod_core.config import Config
from hyperpod_core.dist_layout import REFERENCE_SUFFIX, Mode
from hyperpod_core.inputs import EndpointInputs
from hyperpod_k8s.endpoint.props import EndpointProps, endpoint_props


def has_reference(config: Config) -> bool:
    """The aws-reference experiment runs: selected, and some scenario belongs to it."""
    return "aws-reference" in config.benchmark.experiments and any(
        s.experiment == "aws-reference" for s in config.benchmark_scenarios())


def reference_props(props: EndpointProps, mode: Mode) -> EndpointProps:
    """``props`` in AWS's layout: 1 prefill + 1 decode replica without autoscaling, or one colocated replica."""
    if mode == "colocated":
        return replace(props, colocated_replicas=1)
    return replace(props, prefill=replace(props.prefill, replicas=1, scaling=None),
                   decode=replace(props.decode, replicas=1, scaling=None), autoscaling_server_address=None)


def reference_chart_id(config: Config, mode: Mode) -> str:
    return f"{config.endpoint.name}-{REFERENCE_SUFFIX[mode]}"


def build_reference_charts(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> list[cdk8s.Chart]:
    """``<name>-reference-1p1d`` and ``<name>-reference-1node`` when the aws-reference experiment runs."""
    if not has_reference(config):
        return []
    from hyperpod_k8s.endpoint.colocated_endpoint import ColocatedEndpoint
    from hyperpod_k8s.endpoint.dpd_endpoint import DpdEndpoint

    props = endpoint_props(config, inputs)
    charts = []
    modes: tuple[Mode, ...] = ("dpd", "colocated")
    for mode in modes:
        chart = cdk8s.Chart(app, reference_chart_id(config, mode), namespace=config.endpoint.namespace,
                            disable_resource_name_hashes=True)
        if mode == "dpd":
            DpdEndpoint(chart, "Endpoint", props=reference_props(props, "dpd"))
        else:
            ColocatedEndpoint(chart, "Endpoint", props=reference_props(props, "colocated"))
        charts.append(chart)
    return charts
