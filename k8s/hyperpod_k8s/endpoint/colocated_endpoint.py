"""``ColocatedEndpoint``: the baseline to compare DPD against, and the manifest to roll back to."""

from __future__ import annotations

from dataclasses import replace

from constructs import Construct

from hyperpod_core.names import INSTANCE_TYPE_NODE_LABEL
from hyperpod_k8s.endpoint import common
from hyperpod_k8s.endpoint.props import EndpointProps
from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec

_REQUIRED = iec.InferenceEndpointConfigSpecNodeAffinityRequiredDuringSchedulingIgnoredDuringExecution
_TERM = iec.InferenceEndpointConfigSpecNodeAffinityRequiredDuringSchedulingIgnoredDuringExecutionNodeSelectorTerms
_EXPRESSION = (
    iec.InferenceEndpointConfigSpecNodeAffinityRequiredDuringSchedulingIgnoredDuringExecutionNodeSelectorTermsMatchExpressions)


class ColocatedEndpoint(Construct):
    """The same model, image, vLLM version, flags and total GPU count, without ``pdSpec``.

    AWS asks to compare DPD with a colocated deployment of the same model, quantization and vLLM
    version, and to revert by re-applying without ``pdSpec`` [DPD]. So this object has the *same*
    name as the DPD one: the two never run side by side, and ``bench`` and ``hyperpod-dpd rollout`` switch between
    them by replacing one with the other (delete, then apply). Replicas = the DPD endpoint's
    GPUs / tensor-parallel size; each replica runs the decode role's flags, on a node of the groups either role
    may use (:func:`node_affinity`). The DPD-only environment (``PD_BUFFER_SIZE``, ``LMCACHE_SAVE_DECODE_CACHE``)
    is left out. Its router spreads the load (``colocated_routing_strategy``, ``roundrobin``), so a benchmark
    measures every replica.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointProps) -> None:
        super().__init__(scope, construct_id)
        p = props
        shared = common.shared_spec(replace(p, routing_strategy=p.colocated_routing_strategy))
        self.resource = iec.InferenceEndpointConfig(
            self, "Resource",
            metadata=common.metadata(p, "colocated"),
            spec=iec.InferenceEndpointConfigSpec(
                **shared,
                node_affinity=node_affinity(p),
                replicas=p.colocated_replicas,
                worker=common.worker(p, args=(*p.worker_args, *p.colocated_args), env=p.colocated_environment),
            ),
        )


def node_affinity(p: EndpointProps) -> iec.InferenceEndpointConfigSpecNodeAffinity:
    """``spec.nodeAffinity``: nodes of the instance type, in the groups either DPD role may use
    (:attr:`EndpointProps.colocated_node_labels`, one term per label; terms are ORed, the expressions of one term
    ANDed [CRD]). Without it the baseline took decode's CPU budget onto any node of the type (review of issue 34,
    defect 3)."""
    of_type = _EXPRESSION(key=INSTANCE_TYPE_NODE_LABEL, operator="In", values=[p.instance_type])
    terms = [[of_type, _EXPRESSION(key=label, operator="In", values=list(values))]
             for label, values in p.colocated_node_labels] or [[of_type]]
    return iec.InferenceEndpointConfigSpecNodeAffinity(
        required_during_scheduling_ignored_during_execution=_REQUIRED(
            node_selector_terms=[_TERM(match_expressions=t) for t in terms]))

