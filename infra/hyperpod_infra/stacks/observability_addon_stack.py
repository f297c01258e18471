"""The HyperPod observability add-on, created once the GPU nodes have registered.

The add-on needs a node of 4xlarge or larger (the HyperPod nodes: the system nodes are xlarge), and with
``NodeProvisioningMode: Continuous`` CloudFormation reports the HyperPod cluster complete before any node exists
(deploy-facts.md, "Ordering and readiness"), so a :class:`NodeReadiness` wait sits in front of it. That wait is
the only one in the deploy that depends on GPU nodes; it has a stack of its own so that nothing else waits behind
it: the platform stack deploys in parallel (docs/deploy.md, "Critical path").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from hyperpod_constructs import node_readiness
from hyperpod_constructs.managed_prometheus import ManagedPrometheus
from hyperpod_constructs.nag import acknowledge
from hyperpod_constructs.node_readiness import NodeReadiness, NodeReadinessProps, NodeRequirement
from hyperpod_constructs.observability_addon import WIDE_LOG_SCOPE_REASON, ObservabilityAddon, ObservabilityAddonProps
from hyperpod_core import pins
from hyperpod_infra import bundle


@dataclass(frozen=True, kw_only=True)
class ObservabilityAddonStackProps:
    cluster: eks.ICluster
    prometheus: ManagedPrometheus
    """The workspace the collector writes to (the observability stack's)."""
    metrics_provider: Mapping[str, Mapping[str, Any]]
    """The observability add-on's ``metricsProvider`` (every category with level and scrape interval)."""
    addon_depends_on: Sequence[IConstruct] = field(default_factory=tuple)
    """The ``eks-pod-identity-agent`` add-on (Pod Identity must run before the association is used)."""
    wait_for_nodes: tuple[NodeRequirement, ...] = ()
    """Registered nodes the add-on needs (the HyperPod nodes). The add-on is created only once they have
    registered, after a bounded wait. Default: no wait."""
    wait_after: Sequence[IConstruct] = field(default_factory=tuple)
    """Start the node wait after these (the HyperPod cluster). Default: none."""
    hyperpod_cluster_name: str | None = None
    """Named in the wait's failure message. Default: none."""
    kube_api_vpc: ec2.IVpc | None = None
    """Run the wait's functions in this VPC (API endpoint not open to the internet). Default: outside."""


class ObservabilityAddonStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: ObservabilityAddonStackProps,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.node_readiness = None
        addon_depends_on = list(props.addon_depends_on)
        if props.wait_for_nodes:
            self.node_readiness = NodeReadiness(self, "NodeReadiness", props=NodeReadinessProps(
                cluster=props.cluster, requirements=props.wait_for_nodes,
                waiting_for="the HyperPod observability add-on", depends_on=tuple(props.wait_after),
                hyperpod_cluster_name=props.hyperpod_cluster_name, vpc=props.kube_api_vpc,
                bundled_modules=bundle.imported_by(node_readiness.HANDLER_DIR / "index.py")))
            addon_depends_on.append(self.node_readiness.resource)
        self.addon = ObservabilityAddon(self, "HyperPodObservability", props=ObservabilityAddonProps(
            cluster=props.cluster, version=pins.OBSERVABILITY.version, prometheus=props.prometheus,
            metrics_provider=props.metrics_provider, depends_on=tuple(addon_depends_on)))
        for resource in ("", ":log-stream:*"):
            acknowledge(
                self.addon.collector_policy, "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
                f"<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*{resource}]", WIDE_LOG_SCOPE_REASON)
