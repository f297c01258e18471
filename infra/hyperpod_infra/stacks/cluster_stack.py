"""Long-lived EKS control plane: the cluster, its core add-ons, system nodes and the HyperPod dependencies."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

from aws_cdk import CfnCondition, CfnOutput, CfnParameter, Fn, Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from hyperpod_constructs.eks_cluster import EksCluster, EksClusterProps
from hyperpod_constructs.hyperpod_dependencies import (
    ChartSource,
    HyperPodDependencies,
    HyperPodDependenciesProps,
)
from hyperpod_constructs.hyperpod_resiliency_charts import HyperPodResiliencyChartsProps, ResiliencyChart
from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter, LambdaEniWaiterProps
from hyperpod_constructs.nag import acknowledge
from hyperpod_core import outputs
from hyperpod_core.names import IAM_PRINCIPAL_ARN_PATTERN


@dataclass(frozen=True, kw_only=True)
class ClusterStackProps:
    eks: EksClusterProps
    gpu_instance_types: tuple[str, ...]
    nvidia_device_plugin: ChartSource
    efa_device_plugin: ChartSource
    resiliency_charts: tuple[ResiliencyChart, ...]
    """The HyperPod resiliency sub-charts, fetched and verified at set-up (hyperpod_core.artifacts)."""
    resiliency_source: str
    """``aws/sagemaker-hyperpod-cli@<commit>``: where they come from."""


#: CloudFormation parameter naming the human admin when ``eks.admin_principal_arn`` is not set.
ADMIN_PRINCIPAL_PARAMETER = "AdminPrincipalArn"
#: CloudFormation parameter of the control-plane log group's upgrade path (``none`` or ``retain``).
LEGACY_LOG_GROUP_PARAMETER = "LegacyControlPlaneLogGroup"
#: IAM role or user ARN (what an EKS access entry accepts as a human principal).
ADMIN_PRINCIPAL_PATTERN = IAM_PRINCIPAL_ARN_PATTERN


class ClusterStack(Stack):
    """Exposes ``cluster`` (aws_eks_v2) and ``hyperpod_dependencies`` (what the HyperPod cluster must wait for).

    Human access: with EKS API authentication, ``bootstrapClusterCreatorAdminPermissions`` makes the
    *CloudFormation execution role* admin, not the person who ran ``cdk deploy`` (deploy-facts.md, "Access").
    So the cluster always has an access entry with ``AmazonEKSClusterAdminPolicy`` for a human principal:
    ``eks.admin_principal_arn`` when the config sets it, else the required parameter
    :data:`ADMIN_PRINCIPAL_PARAMETER` (no default: a deploy without it fails in seconds, before anything is
    created), which the README's deploy command fills from ``aws sts get-caller-identity``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: ClusterStackProps, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        eks_props = props.eks
        self.admin_principal_parameter: CfnParameter | None = None
        if eks_props.admin_principal_arn is None:
            self.admin_principal_parameter = CfnParameter(
                self, ADMIN_PRINCIPAL_PARAMETER, type="String", allowed_pattern=ADMIN_PRINCIPAL_PATTERN,
                constraint_description="must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>); "
                                       "an assumed-role ARN converts with scripts/admin-principal-arn",
                description="IAM role or user given cluster admin (kubectl) through an EKS access entry. The "
                            "README deploy command passes the caller: aws sts get-caller-identity | "
                            "scripts/admin-principal-arn")
            eks_props = replace(eks_props, admin_principal_arn=self.admin_principal_parameter.value_as_string)
        # The upgrade path of the control-plane log group (docs/deploy.md, "Upgrade"): "retain" keeps the plain
        # log group of earlier releases in the template with DeletionPolicy Retain. CloudFormation applies the
        # *deployed* template's DeletionPolicy to a resource an update removes (User Guide, DeletionPolicy
        # attribute), so that one deploy is what stops the upgrade from deleting the live group. The CDK CLI
        # keeps a parameter's previous value on later deploys.
        self.legacy_log_group_parameter = CfnParameter(
            self, LEGACY_LOG_GROUP_PARAMETER, type="String", allowed_values=["none", "retain"], default="none",
            description="retain: from the upgrade of a stack deployed before the control-plane log group was "
                        "adopted on (it keeps its old log group resource with DeletionPolicy Retain; switching "
                        "back to none later is safe); none: stacks first created by this release")
        legacy = CfnCondition(self, "RetainLegacyControlPlaneLogGroup", expression=Fn.condition_equals(
            self.legacy_log_group_parameter.value_as_string, "retain"))
        eks_props = replace(eks_props, legacy_log_group_condition=legacy)
        self.eks = EksCluster(self, "Eks", props=eks_props)
        # jsii's generated Cluster class does not structurally match the ICluster protocol for mypy (property
        # variance); it implements it at runtime, so the stack hands the interface on.
        self.cluster: eks.ICluster = cast(eks.ICluster, self.eks.cluster)
        self.hyperpod_dependencies = HyperPodDependencies(self, "HyperPodDependencies", props=HyperPodDependenciesProps(
            cluster=self.cluster, gpu_instance_types=props.gpu_instance_types,
            nvidia_device_plugin=props.nvidia_device_plugin, efa_device_plugin=props.efa_device_plugin))
        self.resiliency_charts = self.hyperpod_dependencies.add_resiliency_charts(HyperPodResiliencyChartsProps(
            cluster=self.cluster, charts=props.resiliency_charts, source=props.resiliency_source,
            values={"region": self.region}))

        # CDK's kubectl handler runs in the VPC in the cluster security group: on destroy, wait for its Lambda
        # ENIs after the handler is deleted and before the cluster (and its group) go (docs/deploy.md).
        self.kubectl_eni_waiter = LambdaEniWaiter(self, "KubectlEniWaiter", props=LambdaEniWaiterProps(
            security_group=self.eks.cluster.cluster_security_group, log_retention=props.eks.log_retention))
        assert self.eks.cluster.kubectl_provider is not None
        self.eks.cluster.kubectl_provider.node.add_dependency(self.kubectl_eni_waiter.resource)

        _acknowledge_cdk_managed_functions(self)
        CfnOutput(self, outputs.EKS_CLUSTER_NAME, value=self.cluster.cluster_name)
        CfnOutput(self, outputs.EKS_CLUSTER_ARN, value=self.cluster.cluster_arn)
        CfnOutput(self, outputs.EKS_API_ENDPOINT, value=self.cluster.cluster_endpoint,
                  description="The Kubernetes API server; hyperpod-dpd requires the kubeconfig context to point here")
        CfnOutput(self, outputs.REGION, value=self.region)
        CfnOutput(self, "UpdateKubeconfigCommand", value=self.eks.update_kubeconfig_command,
                  description="Point kubectl at the cluster (as the admin principal this deploy named)")


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
    has_ecr_public = stack.get_logical_id(handler.node.find_child("HasEcrPublic"))
    ecr_public = ('{"Fn::If":["' + has_ecr_public + '",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},'
                  '":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}')
    acknowledge(provider, f"AwsSolutions-IAM4[Policy::{ecr_public}]", reason)
    handler_id = stack.get_logical_id(handler.node.default_child)
    acknowledge(provider, f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
                "CDK's provider framework invokes versions of its own handler function (<arn>:*)")
