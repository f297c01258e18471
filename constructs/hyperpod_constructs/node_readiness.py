"""Wait for registered Kubernetes nodes of given pools before creating what needs them.

With ``NodeProvisioningMode: Continuous`` CloudFormation reports the HyperPod cluster complete before any
node exists (deploy-facts.md, "Ordering and readiness"); an EKS add-on created then has nowhere to run and
sits DEGRADED (the same failure as CoreDNS without nodes: terraform-aws-eks#3001). Depending on the
HyperPod cluster resource is therefore not enough: depend on :attr:`NodeReadiness.resource`.

The wait ends when the nodes have *registered*, not when they can take pods: HyperPod runs deep health checks on
new nodes, which keep them tainted ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule``
(HyperPod EKS prerequisites) for what can take hours on p5 (lifecycle-facts.md), beyond CloudFormation's hour.
``hyperpod-dpd status`` reports which nodes are still in deep health checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from hyperpod_constructs import cluster_api_access, lambda_provider

HANDLER_DIR = Path(__file__).resolve().parent / "node_readiness_handler"
RESOURCE_TYPE = "Custom::NodeReadiness"
KUBERNETES_GROUP = "hyperpod-dpd:node-readiness"
RBAC_NAME = "hyperpod-dpd-node-readiness"
RBAC_RULES = ({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},)
MIN_TIMEOUT = Duration.minutes(5)
MAX_TIMEOUT = Duration.minutes(50)  # ServiceTimeout = timeout + 5 min, below CloudFormation's hour
MIN_QUERY_INTERVAL = Duration.seconds(10)


@dataclass(frozen=True, kw_only=True)
class NodeRequirement:
    """At least ``min_registered`` nodes carrying ``label_key=label_value``, in any state."""

    label_key: str
    label_value: str
    min_registered: int = 1
    """Default: 1."""
    description: str = ""
    """Named in the failure message, e.g. ``instance group decode``. Default: the label selector."""


@dataclass(frozen=True, kw_only=True)
class NodeReadinessProps:
    """Props of :class:`NodeReadiness`."""

    cluster: eks.ICluster
    requirements: tuple[NodeRequirement, ...]
    waiting_for: str
    """What waits, for the failure message (``the HyperPod observability add-on``)."""
    depends_on: Sequence[IDependable] = ()
    """Start waiting only after these exist (the HyperPod cluster). Default: none."""
    hyperpod_cluster_name: str | None = None
    """Named in the failure message's next step. Default: none."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(45))
    """Bounded wait, 5 to 50 minutes (ServiceTimeout is this plus 5 minutes). Default: 45 minutes."""
    query_interval: Duration = field(default_factory=lambda: Duration.minutes(1))
    """Default: 1 minute."""
    vpc: ec2.IVpc | None = None
    """Run the functions in this VPC (a cluster API endpoint not open to the internet); they get their own
    group, admitted by the cluster security group on 443 through a rule in this construct's stack, and a
    :class:`LambdaEniWaiter`. Default: outside any VPC."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Default: one month."""
    bundled_modules: Mapping[str, Path]
    """Modules the handler imports, copied beside it: ``{path inside the asset: source file}`` (the EKS
    client, ``hyperpod_infra.bundle.imported_by(HANDLER_DIR / "index.py")``). Required: the handler folder holds
    only the entry point."""


class NodeReadiness(Construct):
    """A custom resource that completes once every requirement has enough registered nodes, and fails after
    ``timeout`` with one message naming each pool that is short.

    Kubernetes access: an access entry mapping the role to ``hyperpod-dpd:node-readiness`` and a ClusterRole
    allowing only get/list on nodes.
    """

    resource: CustomResource

    def __init__(self, scope: Construct, construct_id: str, *, props: NodeReadinessProps) -> None:
        _validate(props)
        super().__init__(scope, construct_id)
        self.props = props
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="NodeReadiness: lists the cluster's nodes")
        role.add_to_policy(iam.PolicyStatement(actions=["eks:DescribeCluster"],
                                               resources=[props.cluster.cluster_arn]))
        vpc = cluster_api_access.vpc_access(self, name="NodeReadiness", cluster=props.cluster, vpc=props.vpc,
                                            role=role, log_retention=props.log_retention)
        functions = lambda_provider.polling_functions(
            self, name="NodeReadiness", purpose=f"wait for registered nodes before {props.waiting_for}",
            code=lambda_provider.handler_code(HANDLER_DIR, props.bundled_modules), role=role,
            timeout=Duration.minutes(2), memory_size=256, log_retention=props.log_retention, vpc=props.vpc,
            security_group=vpc.security_group, depends_on=vpc.function_dependencies)
        access = cluster_api_access.kubernetes_group_access(
            self, cluster=props.cluster, role=role, group=KUBERNETES_GROUP, rbac_name=RBAC_NAME, rules=RBAC_RULES)
        provider = lambda_provider.provider(
            self, on_event=functions[0], is_complete=functions[1], query_interval=props.query_interval,
            total_timeout=props.timeout, log_retention=props.log_retention)
        self.resource = lambda_provider.custom_resource(
            self, provider=provider, resource_type=RESOURCE_TYPE, total_timeout=props.timeout,
            properties={
                "ClusterName": props.cluster.cluster_name,
                "HyperPodClusterName": props.hyperpod_cluster_name or "",
                "WaitingFor": props.waiting_for,
                "WaitSeconds": lambda_provider.handler_wait_seconds(props.timeout, props.query_interval),
                "Requirements": json.dumps([
                    {"LabelKey": r.label_key, "LabelValue": r.label_value, "MinRegistered": r.min_registered,
                     "Description": r.description or f"{r.label_key}={r.label_value}"}
                    for r in props.requirements], sort_keys=True),
            },
            depends_on=(role, access.access_entry, access.rbac, *functions, provider, *vpc.resource_dependencies,
                        *props.depends_on))


def rbac_manifests() -> list[dict[str, object]]:
    """ClusterRole + binding for the waiter's Kubernetes group: read nodes, nothing else."""
    return cluster_api_access.rbac_manifests(name=RBAC_NAME, group=KUBERNETES_GROUP, rules=RBAC_RULES)


def _validate(props: NodeReadinessProps) -> None:
    if not props.requirements:
        raise ValueError("requirements must name at least one node pool, got ()")
    for i, r in enumerate(props.requirements):
        if r.min_registered < 1:
            raise ValueError(f"requirements[{i}].min_registered must be >= 1, got {r.min_registered}")
    lambda_provider.check_timeout(props.timeout, minimum=MIN_TIMEOUT, maximum=MAX_TIMEOUT)
    lambda_provider.check_query_interval(props.query_interval, timeout=props.timeout, minimum=MIN_QUERY_INTERVAL)
