"""Long-lived EKS control plane: the cluster, its core add-ons, system nodes and the HyperPod dependencies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from hyperpod_constructs.eks_cluster import EksCluster, EksClusterProps
from hyperpod_constructs.hyperpod_dependencies import (
    ChartSource,
    HyperPodDependencies,
    HyperPodDependenciesProps,
)
from hyperpod_constructs.hyperpod_resiliency_charts import HyperPodResiliencyChartsProps
from hyperpod_infra import outputs
from hyperpod_infra.nag import acknowledge


@dataclass(frozen=True, kw_only=True)
class ClusterStackProps:
    eks: EksClusterProps
    gpu_instance_types: tuple[str, ...]
    nvidia_device_plugin: ChartSource
    efa_device_plugin: ChartSource
    resiliency_repository: str
    """GitHub ``owner/name`` holding the HyperPod resiliency sub-charts."""
    resiliency_commit: str
    resiliency_chart_path: str
    resiliency_charts: tuple[str, ...]


class ClusterStack(Stack):
    """Exposes ``cluster`` (aws_eks_v2) and ``hyperpod_dependencies`` (what the HyperPod cluster must wait for)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ClusterStackProps, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.eks = EksCluster(self, "Eks", props=props.eks)
        # jsii's generated Cluster class does not structurally match the ICluster protocol for mypy (property
        # variance); it implements it at runtime, so the stack hands the interface on.
        self.cluster: eks.ICluster = cast(eks.ICluster, self.eks.cluster)
        self.hyperpod_dependencies = HyperPodDependencies(self, "HyperPodDependencies", props=HyperPodDependenciesProps(
            cluster=self.cluster, gpu_instance_types=props.gpu_instance_types,
            nvidia_device_plugin=props.nvidia_device_plugin, efa_device_plugin=props.efa_device_plugin))
        self.resiliency_charts = self.hyperpod_dependencies.add_resiliency_charts(HyperPodResiliencyChartsProps(
            cluster=self.eks.cluster, kubectl_layer=self.eks.kubectl_layer, subnets=self.eks.private_subnets,
            repository=props.resiliency_repository, commit=props.resiliency_commit,
            chart_path=props.resiliency_chart_path, charts=props.resiliency_charts,
            log_retention=props.eks.log_retention))

        _acknowledge_cdk_managed_functions(self)
        CfnOutput(self, outputs.EKS_CLUSTER_NAME, value=self.cluster.cluster_name)
        CfnOutput(self, "EksClusterArn", value=self.cluster.cluster_arn)
        CfnOutput(self, outputs.REGION, value=self.region)
        CfnOutput(self, "UpdateKubeconfigCommand", value=self.eks.update_kubeconfig_command,
                  description="Point kubectl at the cluster (needs an access entry: eks.admin_principal_arn)")


def _iam4(policy: str) -> str:
    return f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]"


def _acknowledge_cdk_managed_functions(stack: ClusterStack) -> None:
    """Findings on roles EKS itself requires and on CDK's kubectl provider (its IAM is not ours to set)."""
    cluster = stack.eks.cluster
    acknowledge(cluster.role, _iam4("AmazonEKSClusterPolicy"),
                "The EKS cluster role needs AmazonEKSClusterPolicy (EKS user guide, cluster IAM role)")
    for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"):
        acknowledge(stack.eks.system_nodegroup.role, _iam4(policy),
                    f"EKS managed nodes need {policy} (EKS user guide, node IAM role)")
    installer = stack.resiliency_charts.function
    acknowledge(installer.role, _iam4("service-role/AWSLambdaVPCAccessExecutionRole"),  # type: ignore[arg-type]
                "Our chart installer runs in the VPC: ENI management and its own log group, nothing else")
    provider = cluster.kubectl_provider
    assert provider is not None
    reason = ("CDK's kubectl provider (aws_eks_v2, aws-cdk-lib 2.275 pinned): its Lambda roles use the AWS "
              "managed execution/VPC/ECR read-only policies and are not configurable")
    for policy in ("service-role/AWSLambdaBasicExecutionRole", "service-role/AWSLambdaVPCAccessExecutionRole",
                   "AmazonEC2ContainerRegistryReadOnly"):
        acknowledge(provider, _iam4(policy), reason)
    acknowledge(provider, "AwsSolutions-L1", "Runtime of CDK's kubectl handler is chosen by aws-cdk-lib 2.275 "
                                             "(pinned in pyproject.toml) to match the kubectl layer")
    handler = provider.node.find_child("Handler")
    has_ecr_public = stack.get_logical_id(handler.node.find_child("HasEcrPublic"))  # type: ignore[arg-type]
    ecr_public = ('{"Fn::If":["' + has_ecr_public + '",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
                  '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}')
    acknowledge(provider, f"AwsSolutions-IAM4[Policy::{ecr_public}]", reason)
    handler_id = stack.get_logical_id(handler.node.default_child)  # type: ignore[arg-type]
    acknowledge(provider, f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
                "CDK's provider framework invokes versions of its own handler function (<arn>:*)")
