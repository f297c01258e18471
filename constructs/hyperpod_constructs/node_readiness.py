"""Wait for Ready Kubernetes nodes of given pools before creating what needs them.

With ``NodeProvisioningMode: Continuous`` CloudFormation reports the HyperPod cluster complete before any
node exists (deploy-facts.md, "Ordering and readiness"); an EKS add-on created then has nowhere to run and
sits DEGRADED (the same failure as CoreDNS without nodes: terraform-aws-eks#3001). Depending on the
HyperPod cluster resource is therefore not enough: depend on :attr:`NodeReadiness.resource`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from hyperpod_constructs.lambda_code import handler_code
from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter, LambdaEniWaiterProps
from hyperpod_constructs.nag import acknowledge_provider_framework
from hyperpod_constructs.service_timeouts import set_service_timeout

HANDLER_DIR = Path(__file__).resolve().parent / "node_readiness_handler"
RESOURCE_TYPE = "Custom::NodeReadiness"
KUBERNETES_GROUP = "hyperpod-dpd:node-readiness"
MAX_TIMEOUT = Duration.minutes(50)  # ServiceTimeout = timeout + 5 min, below CloudFormation's hour


@dataclass(frozen=True, kw_only=True)
class NodeRequirement:
    """At least ``min_ready`` Ready nodes carrying ``label_key=label_value``."""

    label_key: str
    label_value: str
    min_ready: int = 1
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
    client, ``hyperpod_core.bundle.imported_by(HANDLER_DIR / "index.py")``). Required: the handler folder holds
    only the entry point."""


class NodeReadiness(Construct):
    """A custom resource that completes once every requirement has enough Ready nodes, and fails after
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
        security_group = None
        extra: list[IDependable] = []
        eni_waiter = None
        if props.vpc is not None:
            security_group = ec2.SecurityGroup(self, "SecurityGroup", vpc=props.vpc, allow_all_outbound=True,
                                               description="NodeReadiness Lambda functions")
            extra.append(ec2.CfnSecurityGroupIngress(
                self, "ClusterApiIngress", group_id=props.cluster.cluster_security_group_id,
                source_security_group_id=security_group.security_group_id, ip_protocol="tcp",
                from_port=443, to_port=443, description="NodeReadiness Lambda to the EKS API"))
            role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole"))
            eni_waiter = LambdaEniWaiter(self, "EniWaiter", props=LambdaEniWaiterProps(
                security_group=security_group, log_retention=props.log_retention))

        functions = []
        for name, handler in (("OnEvent", "index.on_event"), ("IsComplete", "index.is_complete")):
            log_group = logs.LogGroup(self, f"{name}Logs", retention=props.log_retention,
                                      removal_policy=RemovalPolicy.DESTROY)
            log_group.grant_write(role)
            function = lambda_.Function(
                self, name, runtime=lambda_.Runtime.PYTHON_3_13, architecture=lambda_.Architecture.ARM_64,
                handler=handler, role=role, log_group=log_group, timeout=Duration.minutes(2), memory_size=256,
                code=handler_code(HANDLER_DIR, props.bundled_modules),
                vpc=props.vpc, security_groups=[security_group] if security_group else None,
                description=f"NodeReadiness {name}: wait for Ready nodes before {props.waiting_for}")
            if eni_waiter is not None:
                function.node.add_dependency(eni_waiter.resource)
            functions.append(function)

        access_entry = eks.CfnAccessEntry(
            self, "AccessEntry", cluster_name=props.cluster.cluster_name, principal_arn=role.role_arn,
            type="STANDARD", kubernetes_groups=[KUBERNETES_GROUP])
        rbac = eks.KubernetesManifest(self, "Rbac", cluster=props.cluster, manifest=rbac_manifests())
        provider = cr.Provider(
            self, "Provider", on_event_handler=functions[0], is_complete_handler=functions[1],
            query_interval=props.query_interval, total_timeout=props.timeout,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=props.log_retention,
                                    removal_policy=RemovalPolicy.DESTROY))
        margin = max(2 * props.query_interval.to_seconds(), 60)
        self.resource = CustomResource(
            self, "Resource", service_token=provider.service_token, resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": props.cluster.cluster_name,
                "HyperPodClusterName": props.hyperpod_cluster_name or "",
                "WaitingFor": props.waiting_for,
                "WaitSeconds": str(int(props.timeout.to_seconds() - margin)),
                "Requirements": json.dumps([
                    {"LabelKey": r.label_key, "LabelValue": r.label_value, "MinReady": r.min_ready,
                     "Description": r.description or f"{r.label_key}={r.label_value}"}
                    for r in props.requirements], sort_keys=True),
            })
        set_service_timeout(self.resource.node.default_child,  # type: ignore[arg-type]
                            props.timeout.plus(Duration.minutes(5)))
        for dependency in (role, access_entry, rbac, *functions, provider, *extra, *props.depends_on):
            self.resource.node.add_dependency(dependency)
        self._acknowledge(role, provider, functions)

    def _acknowledge(self, role: iam.Role, provider: cr.Provider, functions: list[lambda_.Function]) -> None:
        acknowledge_provider_framework(provider, functions, in_vpc=self.props.vpc is not None, vpc_role=role)


def rbac_manifests() -> list[dict[str, object]]:
    """ClusterRole + binding for the waiter's Kubernetes group: read nodes, nothing else."""
    name = "hyperpod-dpd-node-readiness"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": KUBERNETES_GROUP}]},
    ]


def _validate(props: NodeReadinessProps) -> None:
    if not props.requirements:
        raise ValueError("requirements must name at least one node pool, got ()")
    for i, r in enumerate(props.requirements):
        if r.min_ready < 1:
            raise ValueError(f"requirements[{i}].min_ready must be >= 1, got {r.min_ready}")
    seconds = props.timeout.to_seconds()
    if not Token.is_unresolved(seconds) and not 300 <= seconds <= MAX_TIMEOUT.to_seconds():
        raise ValueError(f"timeout must be between 5 and 50 minutes, got {seconds:.0f} seconds")
    interval = props.query_interval.to_seconds()
    if not 10 <= interval <= seconds / 4:
        raise ValueError(f"query_interval must be between 10 seconds and timeout/4, got {interval:.0f} s")
