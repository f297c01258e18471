"""The HyperPod resiliency components, installed from the HyperPod CLI repository at a pinned commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack, SymlinkFollowMode
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

HANDLER_DIR = Path(__file__).resolve().parent / "resiliency_installer"


def installer_code() -> lambda_.Code:
    """The installer's Lambda code. ``eks_token.py`` in it is a link to the janitor's module: staging
    follows links, so the deployed asset holds a real copy."""
    return lambda_.Code.from_asset(str(HANDLER_DIR), follow_symlinks=SymlinkFollowMode.ALWAYS,
                                   exclude=["__pycache__", "*.pyc"])


@dataclass(frozen=True, kw_only=True)
class HyperPodResiliencyChartsProps:
    """Props of :class:`HyperPodResiliencyCharts`."""

    cluster: eks.Cluster
    kubectl_layer: lambda_.ILayerVersion
    """Provides ``/opt/helm/helm``."""
    subnets: list[ec2.ISubnet]
    """Private subnets with a route to the internet (the archive comes from GitHub)."""
    repository: str
    """``owner/name`` on GitHub."""
    commit: str
    chart_path: str
    charts: tuple[str, ...]
    namespace: str = "kube-system"
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH


class HyperPodResiliencyCharts(Construct):
    """Installs the health-monitoring agent, deep health check, job auto-restart and patching sub-charts.

    AWS publishes these only as local sub-charts of ``helm_chart/HyperPodHelmChart`` in
    aws/sagemaker-hyperpod-cli (no Helm or OCI repository). A small Lambda of ours (``resiliency_installer``)
    downloads that repository at one pinned commit during ``cdk deploy``, extracts just these sub-charts and
    runs ``helm upgrade --install`` for each, in the cluster's private subnets through the private endpoint.
    ``helm uninstall`` (right namespace) runs on delete. The function's role gets a cluster-admin access entry.
    """

    resource: CustomResource
    function: lambda_.Function

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodResiliencyChartsProps) -> None:
        super().__init__(scope, construct_id)
        if len(props.commit) != 40:
            raise ValueError(f"commit must be a full 40-character commit SHA, got {props.commit!r}")
        if not props.charts:
            raise ValueError("charts must name at least one sub-chart, got ()")
        cluster = props.cluster
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                            "service-role/AWSLambdaVPCAccessExecutionRole")])
        log_group = logs.LogGroup(self, "Logs", retention=props.log_retention)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.handler",
            code=installer_code(), layers=[props.kubectl_layer],
            timeout=Duration.minutes(14), memory_size=1024, role=role, log_group=log_group,
            vpc=cluster.vpc, vpc_subnets=ec2.SubnetSelection(subnets=props.subnets),
            security_groups=[cluster.cluster_security_group],  # the control plane accepts its own group
            description="Installs the HyperPod resiliency Helm sub-charts at a pinned commit")
        cluster.grant_access("HyperPodResiliencyInstaller", role.role_arn, [
            eks.AccessPolicy.from_access_policy_name(
                "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER)])
        self.resource = CustomResource(
            self, "Resource", service_token=self.function.function_arn,
            resource_type="Custom::HyperPodResiliencyCharts",
            properties={
                "ClusterName": cluster.cluster_name, "ClusterEndpoint": cluster.cluster_endpoint,
                "ClusterCertificateAuthorityData": cluster.cluster_certificate_authority_data,
                "Region": Stack.of(self).region, "Repository": props.repository, "Commit": props.commit,
                "ChartPath": props.chart_path, "Charts": list(props.charts), "Namespace": props.namespace,
            })
        # Access entries take effect a few seconds after creation; the entry must exist before helm runs.
        access_entry = cluster.node.try_find_child("HyperPodResiliencyInstaller")
        if access_entry is not None:
            self.resource.node.add_dependency(access_entry)
        self.resource.node.add_dependency(role)
