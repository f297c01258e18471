"""``DpdEndpoint``: one InferenceEndpointConfig with ``spec.pdSpec`` (operator v3.2+; pinned v3.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from constructs import Construct

from hyperpod_k8s.endpoint import common
from hyperpod_k8s.endpoint import defaults as d
from hyperpod_k8s.endpoint.props import EndpointProps, RoleProps, RoleScaling
from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec


@dataclass(frozen=True, kw_only=True)
class _RoleClasses:
    """The generated classes of one ``pdSpec`` role: the CRD gives prefill and decode each their own."""

    spec: Any
    resources: Any
    requests: Any
    limits: Any


@dataclass(frozen=True, kw_only=True)
class _ScalingClasses:
    """The generated classes of one role's ``autoScalingSpec`` entry."""

    scaling: Any
    trigger: Any
    metric_type: Any


_PREFILL = _RoleClasses(
    spec=iec.InferenceEndpointConfigSpecPdSpecPrefillSpec,
    resources=iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResources,
    requests=iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResourcesRequests,
    limits=iec.InferenceEndpointConfigSpecPdSpecPrefillSpecResourcesLimits)
_DECODE = _RoleClasses(
    spec=iec.InferenceEndpointConfigSpecPdSpecDecodingSpec,
    resources=iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResources,
    requests=iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResourcesRequests,
    limits=iec.InferenceEndpointConfigSpecPdSpecDecodingSpecResourcesLimits)
_PREFILL_SCALING = _ScalingClasses(
    scaling=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecPrefillAutoScaling,
    trigger=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecPrefillAutoScalingPrometheusTrigger,
    metric_type=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecPrefillAutoScalingPrometheusTriggerMetricType)
_DECODE_SCALING = _ScalingClasses(
    scaling=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecDecodingAutoScaling,
    trigger=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecDecodingAutoScalingPrometheusTrigger,
    metric_type=iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpecDecodingAutoScalingPrometheusTriggerMetricType)


def _role_spec(classes: _RoleClasses, role: RoleProps) -> Any:
    """``prefillSpec`` / ``decodingSpec``."""
    resources = common.gpu_resources(role.gpus, role.requests)
    return classes.spec(
        replicas=role.replicas,
        args=list(role.args),
        node_selector=role.node_selector or None,
        resources=classes.resources(
            requests=common.quantities(classes.requests, resources["requests"]),
            limits=common.quantities(classes.limits, resources["limits"]),
        ),
    )


def _scaling_spec(classes: _ScalingClasses, scaling: RoleScaling, server_address: str, trigger_name: str) -> Any:
    metric_type = {"Average": classes.metric_type.AVERAGE, "Value": classes.metric_type.VALUE}[scaling.metric_type]
    return classes.scaling(
        min_replica_count=scaling.min_replicas,
        max_replica_count=scaling.max_replicas,
        polling_interval=d.POLLING_INTERVAL_SECONDS,
        cooldown_period=d.COOLDOWN_SECONDS,
        scale_up_stabilization_time=d.SCALE_UP_STABILIZATION_SECONDS,
        scale_down_stabilization_time=d.SCALE_DOWN_STABILIZATION_SECONDS,
        prometheus_trigger=classes.trigger(
            name=trigger_name,
            query=scaling.query, server_address=server_address, target_value=scaling.target_value,
            metric_type=metric_type, use_cached_metrics=False,
        ),
    )


class DpdEndpoint(Construct):
    """The disaggregated endpoint: prefill and decode Deployments, the DPD router, KV transfer over EFA.

    ``worker`` carries what both roles share (image, vLLM flags, DPD environment, port, model mount);
    ``pdSpec`` carries the per-role replicas, GPUs, flags, node pools and autoscaling.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        p = props
        autoscaling = None
        if p.prefill.scaling is not None and p.decode.scaling is not None:
            server = p.autoscaling_server_address or ""
            autoscaling = iec.InferenceEndpointConfigSpecPdSpecAutoScalingSpec(
                prefill_auto_scaling=_scaling_spec(_PREFILL_SCALING, p.prefill.scaling, server, "prefill-queue"),
                decoding_auto_scaling=_scaling_spec(_DECODE_SCALING, p.decode.scaling, server, "decode-kv-cache"),
            )
        pd_spec = iec.InferenceEndpointConfigSpecPdSpec(
            prefill_spec=_role_spec(_PREFILL, p.prefill),
            decoding_spec=_role_spec(_DECODE, p.decode),
            routing_threshold=p.routing_threshold_tokens,
            topology_spec=iec.InferenceEndpointConfigSpecPdSpecTopologySpec(
                same_az=True, availability_zone=p.availability_zone),
            auto_scaling_spec=autoscaling,
        )
        self.resource = iec.InferenceEndpointConfig(
            self, "Resource",
            metadata=common.metadata(p, "dpd"),
            spec=iec.InferenceEndpointConfigSpec(
                **common.shared_spec(p),
                instance_type=p.instance_type,
                worker=common.worker(p, args=p.worker_args, env=p.dpd_environment),
                pd_spec=pd_spec,
            ),
        )
