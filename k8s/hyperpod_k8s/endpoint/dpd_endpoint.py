"""``DpdEndpoint``: one InferenceEndpointConfig with ``spec.pdSpec`` (operator v3.2+; pinned v3.3)."""

from __future__ import annotations

from typing import Any

from constructs import Construct

from hyperpod_k8s.endpoint import common
from hyperpod_k8s.endpoint import defaults as d
from hyperpod_k8s.endpoint.props import EndpointProps, RoleProps, RoleScaling
from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec

_PD = "InferenceEndpointConfigSpecPdSpec"


def _role_spec(cls_prefix: str, role: RoleProps) -> Any:
    """``prefillSpec`` / ``decodingSpec`` from the generated ``<prefix>`` / ``<prefix>Resources*`` classes."""
    resources = common.gpu_resources(role.gpus, role.requests)
    cls, res_cls = getattr(iec, cls_prefix), getattr(iec, f"{cls_prefix}Resources")
    return cls(
        replicas=role.replicas,
        args=list(role.args),
        node_selector=role.node_selector or None,
        resources=res_cls(
            requests=common._quantities(getattr(iec, f"{cls_prefix}ResourcesRequests"), resources["requests"]),
            limits=common._quantities(getattr(iec, f"{cls_prefix}ResourcesLimits"), resources["limits"]),
        ),
    )


def _scaling_spec(cls_prefix: str, scaling: RoleScaling, server_address: str, trigger_name: str) -> Any:
    trigger_cls = getattr(iec, f"{cls_prefix}PrometheusTrigger")
    metric_type = getattr(iec, f"{cls_prefix}PrometheusTriggerMetricType")[scaling.metric_type.upper()]
    return getattr(iec, cls_prefix)(
        min_replica_count=scaling.min_replicas,
        max_replica_count=scaling.max_replicas,
        polling_interval=d.POLLING_INTERVAL_SECONDS,
        cooldown_period=d.COOLDOWN_SECONDS,
        scale_up_stabilization_time=d.SCALE_UP_STABILIZATION_SECONDS,
        scale_down_stabilization_time=d.SCALE_DOWN_STABILIZATION_SECONDS,
        prometheus_trigger=trigger_cls(
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
                prefill_auto_scaling=_scaling_spec(f"{_PD}AutoScalingSpecPrefillAutoScaling", p.prefill.scaling,
                                                   server, "prefill-queue"),
                decoding_auto_scaling=_scaling_spec(f"{_PD}AutoScalingSpecDecodingAutoScaling", p.decode.scaling,
                                                    server, "decode-kv-cache"),
            )
        pd_spec = iec.InferenceEndpointConfigSpecPdSpec(
            prefill_spec=_role_spec(f"{_PD}PrefillSpec", p.prefill),
            decoding_spec=_role_spec(f"{_PD}DecodingSpec", p.decode),
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
                worker=common.worker(p, args=p.worker_args, env=p.dpd_environment),
                pd_spec=pd_spec,
            ),
        )
