"""The IAM role HyperPod instances run as, least privilege (scoping as in the ADT Terraform module)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
#: The ENI writes of AWS's HyperPod execution role (aws/sagemaker-hyperpod-cluster-setup,
#: eks/cloudformation/sagemaker-iam-role-template.yaml @ 225929764f92613e15ff951569564a71f3711470): its
#: ``ConditionalPolicySubnet<i>`` and ``conditionalSecurityGroup<i>`` statements grant these on each subnet and
#: security group of the cluster; its ``<prefix>-Policy`` grants them but ``DetachNetworkInterface`` on
#: ``instance/*``, ``network-interface/*`` and the cluster's ``vpc/<id>``.
ENI_WRITE_ACTIONS = (
    "ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission", "ec2:DetachNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute", "ec2:UnassignPrivateIpAddresses",
)


@dataclass(frozen=True, kw_only=True)
class HyperPodExecutionRoleProps:
    """Props of :class:`HyperPodExecutionRole`."""

    eks_cluster_arn: str
    vpc: ec2.IVpc
    """The VPC of the GPU subnet: ENI writes on existing interfaces are limited to it (``ec2:Vpc``)."""
    gpu_subnet: ec2.ISubnet
    security_group_ids: tuple[str, ...]
    """Every security group the nodes carry (EFA group and EKS cluster security group): HyperPod creates the
    nodes' ENIs with all of them, so ``ec2:CreateNetworkInterface`` must be allowed on each."""
    lifecycle_bucket: s3.IBucket
    lifecycle_key_prefix: str = "lifecycle/"


class HyperPodExecutionRole(Construct):
    """Execution role of the HyperPod instance groups.

    - ``AmazonSageMakerClusterInstanceRolePolicy`` (AWS managed, required by HyperPod).
    - ENI writes on the resource types AWS's HyperPod IAM template grants them on (:data:`ENI_WRITE_ACTIONS`):
      the GPU subnet, the nodes' security groups (EFA and EKS cluster group) and the VPC by ARN; network
      interfaces of this account and region (their IDs do not exist before HyperPod creates them), limited to
      the VPC by ``ec2:Vpc`` for every action whose network-interface resource carries that key (all but
      ``CreateNetworkInterface``, which is bounded by the subnet and groups it names); ``Attach``/``Detach``/
      ``ModifyNetworkInterfaceAttribute`` on instances (no ``ec2:Vpc`` key on the instance type).
    - ``ec2:CreateTags`` on network interfaces *without* an ``ec2:CreateAction`` condition: the VPC CNI tags
      existing ENIs with a standalone CreateTags (ipamd ``TagENI``), which such a condition would deny; this is
      how ``AmazonEKS_CNI_Policy`` and AWS's HyperPod IAM template grant it.
    - ``ec2:Describe*`` calls the VPC CNI and HyperPod agents make (these actions take no resource scope).
    - ECR pull from repositories in this region; ``ecr:GetAuthorizationToken`` (no resource scope).
    - ``eks-auth:AssumeRoleForPodIdentity`` on our EKS cluster only.
    - ``cloudwatch:DescribeAlarms`` for rolling-update auto-rollback, on this account's alarms.
    - Read of the lifecycle scripts prefix; read of the model bucket (with ``kms:Decrypt`` on its key) is
      granted by the platform stack, from ``ModelBucket.read_statements``.

    All statements live in one explicit ``AWS::IAM::Policy`` (:attr:`policy`) that the HyperPod cluster
    depends on; nothing goes through a CDK default policy, which would otherwise race the cluster.
    No EKS access entry is created: HyperPod creates its own (type ``HYPERPOD_LINUX``) for this role.
    """

    role: iam.Role
    policy: iam.Policy

    def __init__(self, scope: Construct, construct_id: str, *, props: HyperPodExecutionRoleProps) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)

        def ec2_arn(resource: str) -> str:
            return stack.format_arn(service="ec2", resource=resource)

        network_interfaces = ec2_arn("network-interface/*")
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="HyperPod instance groups (EKS orchestrator)",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(MANAGED_POLICY)])
        bucket = props.lifecycle_bucket
        vpc_arn = ec2_arn(f"vpc/{props.vpc.vpc_id}")
        in_vpc = {"ArnEquals": {"ec2:Vpc": vpc_arn}}
        self.policy = iam.Policy(self, "Policy", roles=[self.role], statements=[
            iam.PolicyStatement(
                sid="EniWritesInGpuSubnet", actions=list(ENI_WRITE_ACTIONS),
                resources=[ec2_arn(f"subnet/{props.gpu_subnet.subnet_id}"),
                           *(ec2_arn(f"security-group/{sg}") for sg in props.security_group_ids), vpc_arn]),
            # CreateNetworkInterface: the new interface carries no ec2:Vpc yet (service authorization reference).
            iam.PolicyStatement(sid="CreateEni", actions=["ec2:CreateNetworkInterface"],
                                resources=[network_interfaces]),
            iam.PolicyStatement(
                sid="ManageEnisInVpc", conditions=in_vpc, resources=[network_interfaces],
                actions=[a for a in ENI_WRITE_ACTIONS if a != "ec2:CreateNetworkInterface"]
                + ["ec2:AttachNetworkInterface"]),
            iam.PolicyStatement(
                sid="AttachEnisToInstances", resources=[ec2_arn("instance/*")],
                actions=["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface",
                         "ec2:ModifyNetworkInterfaceAttribute"]),
            iam.PolicyStatement(sid="TagEnis", actions=["ec2:CreateTags"], resources=[network_interfaces]),
            iam.PolicyStatement(
                sid="DescribeNetwork",
                actions=["ec2:DescribeNetworkInterfaces", "ec2:DescribeInstances", "ec2:DescribeInstanceTypes",
                         "ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
                         "ec2:DescribeDhcpOptions", "ec2:DescribeTags"],
                resources=["*"]),
            iam.PolicyStatement(
                sid="EcrAuth", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            iam.PolicyStatement(
                sid="EcrPull",
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[stack.format_arn(service="ecr", account="*", resource="repository/*")]),
            iam.PolicyStatement(
                sid="PodIdentity", actions=["eks-auth:AssumeRoleForPodIdentity"],
                resources=[props.eks_cluster_arn]),
            iam.PolicyStatement(
                sid="RollbackAlarms", actions=["cloudwatch:DescribeAlarms"],
                resources=[stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                            arn_format=ArnFormat.COLON_RESOURCE_NAME)]),
            iam.PolicyStatement(
                sid="ListLifecycleScripts", actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [props.lifecycle_key_prefix + "*"]}}),
            iam.PolicyStatement(
                sid="ReadLifecycleScripts", actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(props.lifecycle_key_prefix + "*")]),
        ])

