"""Clean ``cdk destroy`` for inference: delete the operator's objects and wait for its AWS resources to go."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from hyperpod_constructs.nag import acknowledge

HANDLER_DIR = Path(__file__).parent / "endpoint_janitor_handler"
RESOURCE_TYPE = "Custom::HyperPodEndpointJanitor"
#: EKS access policies only cover built-in API groups; listing and deleting the operator's CRDs
#: (group inference.sagemaker.aws.amazon.com) needs cluster admin or a hand-made RBAC binding.
ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"
LAMBDA_TIMEOUT = Duration.minutes(5)
MIN_TIMEOUT = Duration.minutes(5)
MAX_TIMEOUT = Duration.hours(2)  # the Provider framework's limit for total_timeout


@dataclass(frozen=True, kw_only=True)
class EndpointJanitorProps:
    """Props of :class:`EndpointJanitor`."""

    cluster: eks.ICluster
    """The EKS cluster the HyperPod inference operator runs in."""
    depends_on: Sequence[IDependable] = ()
    """What must still exist while the janitor waits: the inference operator add-on (pass the whole
    ``InferenceOperator`` construct, so its IAM roles and dependency add-ons are covered too), and anything
    else the operator needs to finish, such as the network. The janitor's custom resource depends on each,
    so CloudFormation creates it after them and deletes it before them.
    Default: none; then call ``janitor.custom_resource.node.add_dependency(...)`` yourself."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(30))
    """Total wait for the operator's cleanup, from the start of the deletion to the failure message.
    Between 5 minutes and 2 hours. Default: 30 minutes."""
    query_interval: Duration = field(default_factory=lambda: Duration.seconds(30))
    """How often the janitor checks what is left. Default: 30 seconds."""
    vpc: ec2.IVpc | None = None
    """Run the Lambda functions in this VPC, for a cluster whose API endpoint is private only. They then
    need egress (NAT, or interface endpoints for sts, eks, sagemaker.api, elasticloadbalancing, acm and
    logs). Default: outside any VPC, which reaches a public (or public-and-private) cluster endpoint."""
    vpc_subnets: ec2.SubnetSelection | None = None
    """Subnets of ``vpc`` for the functions. Default: the VPC's private subnets. Requires ``vpc``."""
    security_group: ec2.ISecurityGroup | None = None
    """Security group of the functions; the cluster security group is opened to it on 443. Requires
    ``vpc``. Default: a new group with all outbound traffic allowed (when ``vpc`` is set)."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the janitor's log groups (handlers and provider framework). Default: one month."""


class EndpointJanitor(Construct):
    """On stack delete, deletes every InferenceEndpointConfig and JumpStartModel and waits until the
    operator has removed the SageMaker endpoints, load balancers, target groups and ACM certificates it
    created for them; after ``timeout`` it fails with one message naming what is left and what to do.

    Ordering contract: the janitor must be *deleted before* the inference operator add-on (whose
    finalizers do the actual cleanup), the operator's IAM roles, the ALB controller and the network. Since
    CloudFormation deletes in reverse dependency order, the janitor's ``custom_resource`` depends on
    everything in ``props.depends_on`` (and on its own access entry, role, functions and provider). If the
    endpoints' KubernetesManifests live in the same app, let them depend on the janitor, not the reverse:
    they are then deleted first and the janitor only confirms the cleanup.

    Create and Update do nothing. Removing the janitor from a deployed stack counts as a delete: it deletes
    every inference endpoint in the cluster.
    """

    role: iam.Role
    on_event_function: lambda_.Function
    is_complete_function: lambda_.Function
    provider: cr.Provider
    access_entry: eks.AccessEntry
    custom_resource: CustomResource
    security_group: ec2.ISecurityGroup | None

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointJanitorProps) -> None:
        _validate(props)
        super().__init__(scope, construct_id)
        self.props = props
        stack = Stack.of(self)

        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="EndpointJanitor: deletes HyperPod inference objects and checks their AWS resources")
        self._grant_read(stack)

        self.security_group = None
        if props.vpc is not None:
            self.security_group = props.security_group or ec2.SecurityGroup(
                self, "SecurityGroup", vpc=props.vpc, allow_all_outbound=True,
                description="EndpointJanitor Lambda functions")
            props.cluster.connections.allow_from(
                self.security_group, ec2.Port.tcp(443), "EndpointJanitor Lambda to the EKS API")
            self.role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole"))

        self.on_event_function = self._function("OnEvent", "index.on_event")
        self.is_complete_function = self._function("IsComplete", "index.is_complete")

        self.access_entry = eks.AccessEntry(
            self, "AccessEntry", cluster=props.cluster, principal=self.role.role_arn,
            access_policies=[eks.AccessPolicy.from_access_policy_name(
                ACCESS_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])

        self.provider = cr.Provider(
            self, "Provider",
            on_event_handler=self.on_event_function,
            is_complete_handler=self.is_complete_function,
            query_interval=props.query_interval,
            total_timeout=props.timeout,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=props.log_retention,
                                    removal_policy=RemovalPolicy.DESTROY),
        )

        # Our own deadline fires two polls before the framework's, so the user sees our message
        # (what is left) instead of the framework's bare "Operation timed out".
        margin = max(2 * props.query_interval.to_seconds(), 60)
        self.custom_resource = CustomResource(
            self, "Resource", service_token=self.provider.service_token, resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": props.cluster.cluster_name,
                "ClusterArn": props.cluster.cluster_arn,
                "WaitSeconds": str(int(props.timeout.to_seconds() - margin)),
            })
        # Everything the delete path uses must be deleted after it, including the role's policy.
        for dependency in (self.access_entry, self.role, self.on_event_function, self.is_complete_function,
                           self.provider, *props.depends_on):
            self.custom_resource.node.add_dependency(dependency)

        self._acknowledge_nag()

    def _function(self, construct_id: str, handler: str) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{construct_id}Logs", retention=self.props.log_retention,
                                  removal_policy=RemovalPolicy.DESTROY)
        log_group.grant_write(self.role)
        return lambda_.Function(
            self, construct_id,
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=LAMBDA_TIMEOUT,
            memory_size=256,
            role=self.role,
            log_group=log_group,
            vpc=self.props.vpc,
            vpc_subnets=self.props.vpc_subnets,
            security_groups=[self.security_group] if self.security_group else None,
            description=f"EndpointJanitor {construct_id}: clean HyperPod inference endpoints on stack delete",
        )

    def _grant_read(self, stack: Stack) -> None:
        """Read-only AWS access: the janitor waits for the operator, it never deletes AWS resources."""
        statements = [
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[self.props.cluster.cluster_arn]),
            # List* and elasticloadbalancing:Describe* support no resource-level permissions.
            iam.PolicyStatement(
                actions=["sagemaker:ListEndpoints", "acm:ListCertificates",
                         "elasticloadbalancing:DescribeLoadBalancers",
                         "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTags"],
                resources=["*"]),
            iam.PolicyStatement(
                actions=["sagemaker:ListTags"],
                resources=[stack.format_arn(service="sagemaker", resource="endpoint", resource_name="*")]),
            iam.PolicyStatement(
                actions=["acm:ListTagsForCertificate"],
                resources=[stack.format_arn(service="acm", resource="certificate", resource_name="*")]),
        ]
        for statement in statements:
            self.role.add_to_policy(statement)

    def _acknowledge_nag(self) -> None:
        """cdk-nag 3 needs each finding acknowledged by its full id (no rule-wide suppression)."""
        stack = Stack.of(self)
        # cdk-nag renders the ARN as synthesized: a stack with a fixed region has the literal region in it.
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        scoped = ("AwsSolutions::AwsSolutions-IAM5"
                  "[Resource::arn:<AWS::Partition>:{}:" + region + ":<AWS::AccountId>:{}]")
        acknowledge(self.role, "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    "sagemaker:ListEndpoints, acm:ListCertificates and elasticloadbalancing:Describe* accept no "
                    "resource scope; all of them are read-only.")
        acknowledge(self.role, scoped.format("sagemaker", "endpoint/*"),
                    "Read-only ListTags on this account's endpoints: the operator picks the endpoint names.")
        acknowledge(self.role, scoped.format("acm", "certificate/*"),
                    "Read-only ListTagsForCertificate: ACM assigns certificate ids at import time.")
        if self.props.vpc is not None:
            acknowledge(self.role, _IAM4.format("service-role/AWSLambdaVPCAccessExecutionRole"),
                        "The ENI actions Lambda needs to run in a VPC accept no resource scope.")
        acknowledge(self.provider, _IAM4.format("service-role/AWSLambdaBasicExecutionRole"),
                    "Provider framework functions of aws-cdk-lib; the policy only allows writing logs.")
        acknowledge(self.provider, "AwsSolutions::AwsSolutions-SF1",
                    "Waiter state machine of the Provider framework; every poll is logged by the handlers.")
        acknowledge(self.provider, "AwsSolutions::AwsSolutions-SF2",
                    "Waiter state machine of the Provider framework; X-Ray adds nothing to a poll loop.")
        for function in (self.on_event_function, self.is_complete_function):
            acknowledge(function, "AwsSolutions::AwsSolutions-L1",
                        "Python 3.13 is the project's chosen handler runtime; bump it deliberately.")
        for cfn in self.node.find_all():
            # CloudFormation invokes framework-onEvent; no policy here grants it (no finding to acknowledge).
            if isinstance(cfn, lambda_.CfnFunction) and not cfn.node.path.endswith("framework-onEvent/Resource"):
                acknowledge(self.provider,
                            f"AwsSolutions::AwsSolutions-IAM5[Resource::<{stack.get_logical_id(cfn)}.Arn>:*]",
                            "The Provider framework invokes any version of its own handler functions.")


_IAM4 = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


def _validate(props: EndpointJanitorProps) -> None:
    timeout = props.timeout.to_seconds()
    if not MIN_TIMEOUT.to_seconds() <= timeout <= MAX_TIMEOUT.to_seconds():
        raise ValueError(f"timeout must be between 5 minutes and 2 hours, got {timeout:.0f} seconds")
    interval = props.query_interval.to_seconds()
    if not 5 <= interval <= timeout / 4:
        raise ValueError(
            f"query_interval must be between 5 seconds and timeout/4 ({timeout / 4:.0f} s), got {interval:.0f} s")
    if props.vpc is None and (props.vpc_subnets is not None or props.security_group is not None):
        raise ValueError("vpc_subnets and security_group require vpc, got vpc=None")
