"""What the role of Lambda functions that call an EKS cluster's Kubernetes API needs: a way in, and rights.

Shared by ``EndpointJanitor`` and ``NodeReadiness``, built *into the caller's scope* with the IDs they have
always used (construct IDs are a contract): :func:`vpc_access` (``SecurityGroup``, ``ClusterApiIngress``,
``EniWaiter``) for functions in a VPC, and :func:`kubernetes_group_access` (``AccessEntry``, ``Rbac``) for the
Kubernetes group the role is mapped to. EKS access policies only cover built-in API groups and are coarse, so
the role gets a STANDARD access entry with one Kubernetes group, and a ClusterRole bound to that group allows
exactly what the handler does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter, LambdaEniWaiterProps
from hyperpod_constructs.nag import acknowledge, managed_policy_finding

_RBAC_API = "rbac.authorization.k8s.io"
_VPC_POLICY = "service-role/AWSLambdaVPCAccessExecutionRole"


@dataclass(frozen=True, kw_only=True)
class VpcAccess:
    """What :func:`vpc_access` made; all None outside a VPC."""

    security_group: ec2.ISecurityGroup | None = None
    """The functions' group: the caller's, or a new ``SecurityGroup``."""
    ingress: ec2.CfnSecurityGroupIngress | None = None
    """The rule admitting ``security_group`` to the cluster API on 443."""
    eni_waiter: LambdaEniWaiter | None = None
    """Only for a new group (the owner of the caller's group deletes it)."""

    @property
    def function_dependencies(self) -> tuple[IDependable, ...]:
        """What every function in the VPC must depend on: the ENI waiter, so that the destroy deletes the
        functions, waits for their interfaces, and only then deletes the group."""
        return (self.eni_waiter.resource,) if self.eni_waiter is not None else ()

    @property
    def resource_dependencies(self) -> tuple[IDependable, ...]:
        """What the custom resource must depend on: the ingress rule, without which its handlers time out."""
        return (self.ingress,) if self.ingress is not None else ()


def vpc_access(scope: Construct, *, name: str, cluster: eks.ICluster, vpc: ec2.IVpc | None, role: iam.Role,
               log_retention: logs.RetentionDays, security_group: ec2.ISecurityGroup | None = None) -> VpcAccess:
    """Let the functions of ``role`` in ``vpc`` (described as ``<name> Lambda ...``) reach the cluster API on 443.

    The ingress rule is created in the caller's stack: ``cluster.connections.allow_from`` would put it in the
    cluster's stack, referencing the group, and make the two stacks depend on each other. ``role`` gets
    ``AWSLambdaVPCAccessExecutionRole`` (acknowledged here). A new group comes with a
    :class:`LambdaEniWaiter`, so the destroy waits for the functions' interfaces before deleting it.
    ``vpc`` None (functions outside any VPC): nothing is made.
    """
    if vpc is None:
        return VpcAccess()
    group = security_group or ec2.SecurityGroup(scope, "SecurityGroup", vpc=vpc, allow_all_outbound=True,
                                                description=f"{name} Lambda functions")
    ingress = ec2.CfnSecurityGroupIngress(
        scope, "ClusterApiIngress", group_id=cluster.cluster_security_group_id,
        source_security_group_id=group.security_group_id, ip_protocol="tcp", from_port=443, to_port=443,
        description=f"{name} Lambda to the EKS API")
    role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(_VPC_POLICY))
    acknowledge(role, managed_policy_finding(_VPC_POLICY),
                "The ENI actions Lambda needs to run in a VPC accept no resource scope.")
    eni_waiter = None
    if security_group is None:
        eni_waiter = LambdaEniWaiter(scope, "EniWaiter", props=LambdaEniWaiterProps(
            security_group=group, log_retention=log_retention))
    return VpcAccess(security_group=group, ingress=ingress, eni_waiter=eni_waiter)


@dataclass(frozen=True, kw_only=True)
class KubernetesAccess:
    """What :func:`kubernetes_group_access` made; the custom resource should depend on both."""

    access_entry: eks.CfnAccessEntry
    rbac: eks.KubernetesManifest


def kubernetes_group_access(scope: Construct, *, cluster: eks.ICluster, role: iam.IRole, group: str,
                            rbac_name: str, rules: Sequence[Mapping[str, object]]) -> KubernetesAccess:
    """An access entry mapping ``role`` to the Kubernetes ``group``, and :func:`rbac_manifests` for it."""
    access_entry = eks.CfnAccessEntry(
        scope, "AccessEntry", cluster_name=cluster.cluster_name, principal_arn=role.role_arn, type="STANDARD",
        kubernetes_groups=[group])
    rbac = eks.KubernetesManifest(scope, "Rbac", cluster=cluster,
                                  manifest=rbac_manifests(name=rbac_name, group=group, rules=rules))
    return KubernetesAccess(access_entry=access_entry, rbac=rbac)


def rbac_manifests(*, name: str, group: str, rules: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """ClusterRole ``name`` with ``rules``, and its binding to the Kubernetes ``group``: nothing else."""
    return [
        {"apiVersion": f"{_RBAC_API}/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [dict(r) for r in rules]},
        {"apiVersion": f"{_RBAC_API}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": _RBAC_API, "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": _RBAC_API, "kind": "Group", "name": group}]},
    ]
