"""The benchmark's own endpoint layouts: AWS's published comparison (aws-reference), and the configured DPD endpoint
with its replicas pinned (equal-gpu).

AWS compared 1 prefill + 1 decode replica (2 nodes) with **one** colocated node (AWS ML blog "Disaggregated
prefill and decode for LLM inference on SageMaker HyperPod", 2026-07-10, "Benchmarking performance"). The
configured endpoint may hold more prefill replicas, and its colocated baseline holds as many GPUs as DPD (the
equal-GPU experiment), so the reference gets its own two manifests, derived from the same props with only the
replica counts changed (and autoscaling off, as in AWS's run). Same name as the endpoint: ``hyperpod-dpd bench``
applies them in turn (a replace), never ``kubectl apply -f dist/<endpoint>/endpoint/``.

The equal-gpu experiment compares the configured DPD endpoint with colocated replicas on as many GPUs, and each run
records that count (``BENCH_GPUS``). With autoscaling on, KEDA would scale a role between its ``min_replicas`` and
``max_replicas`` while the run records the configured replicas' GPUs (at the benchmark's low concurrency prefill
drops to its minimum after the scale-down stabilization time, 600 s, well inside a 15-minute run). So that
experiment's DPD layout is the configured one with autoscaling off (:func:`pinned_props`): the operator runs
exactly the configured replicas, and ``bench`` records the ready replicas before and after every run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import PINNED_SUFFIX, REFERENCE_SUFFIX, Mode
from hyperpod_k8s.endpoint.props import EndpointChartProps, EndpointProps

Experiment = Literal["aws-reference", "equal-gpu"]


def has_reference(spec: EndpointSpec) -> bool:
    """The aws-reference experiment runs against endpoint ``spec``: selected, and some scenario belongs to it."""
    return "aws-reference" in spec.benchmark.experiments and any(
        s.experiment == "aws-reference" for s in spec.benchmark_scenarios())


def reference_props(props: EndpointProps, mode: Mode) -> EndpointProps:
    """``props`` in AWS's layout: 1 prefill + 1 decode replica without autoscaling, or one colocated replica."""
    if mode == "colocated":
        return replace(props, colocated_replicas=1)
    return replace(props, prefill=replace(props.prefill, replicas=1, scaling=None),
                   decode=replace(props.decode, replicas=1, scaling=None), autoscaling_server_address=None)


def has_equal_gpu(spec: EndpointSpec) -> bool:
    """The equal-gpu experiment runs against endpoint ``spec``: selected, and some scenario belongs to it."""
    return "equal-gpu" in spec.benchmark.experiments and any(
        s.experiment == "equal-gpu" for s in spec.benchmark_scenarios())


def pinned_props(props: EndpointProps) -> EndpointProps:
    """``props`` with autoscaling off: each role runs exactly its configured ``replicas`` (module docstring)."""
    return replace(props, prefill=replace(props.prefill, scaling=None), decode=replace(props.decode, scaling=None),
                   autoscaling_server_address=None)


def experiment_props(props: EndpointProps, experiment: Experiment, mode: Mode) -> EndpointProps:
    """The layout ``mode`` runs in ``experiment``: AWS's (aws-reference); the pinned DPD endpoint or the configured
    colocated one (equal-gpu)."""
    if experiment == "aws-reference":
        return reference_props(props, mode)
    return pinned_props(props) if mode == "dpd" else props


def reference_chart_id(name: str, mode: Mode) -> str:
    """The chart id (and file name) of endpoint ``name``'s aws-reference layout of ``mode``."""
    return f"{name}-{REFERENCE_SUFFIX[mode]}"


def reference_layouts(spec: EndpointSpec, props: EndpointProps) -> list[tuple[str, EndpointChartProps]]:
    """``(chart id, props)`` of ``<name>-reference-1p1d`` and ``<name>-reference-1node`` when the aws-reference
    experiment runs against endpoint ``spec`` (``props``: its endpoint props), and of ``<name>-equal-gpu-pinned``
    when the equal-gpu one does."""
    layouts = []
    if has_reference(spec):
        modes: tuple[Mode, ...] = ("dpd", "colocated")
        layouts += [(reference_chart_id(spec.name, mode),
                     EndpointChartProps(mode=mode, endpoint=reference_props(props, mode))) for mode in modes]
    if has_equal_gpu(spec):
        layouts.append((f"{spec.name}-{PINNED_SUFFIX}",
                        EndpointChartProps(mode="dpd", endpoint=pinned_props(props))))
    return layouts
