"""Clean ``cdk destroy`` for inference: delete the operator's objects and wait for its AWS resources to go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

from hyperpod_constructs.lambda_code import handler_code
from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter, LambdaEniWaiterProps
from hyperpod_constructs.nag import acknowledge, acknowledge_provider_framework
from hyperpod_constructs.service_timeouts import set_service_timeout

HANDLER_DIR = Path(__file__).parent / "endpoint_janitor_handler"
RESOURCE_TYPE = "Custom::HyperPodEndpointJanitor"
#: EKS access policies only cover built-in API groups, so they cannot grant the operator's CRDs (group
#: inference.sagemaker.aws.amazon.com) without cluster admin. Instead the access entry maps the role to this
#: Kubernetes group, and a ClusterRole bound to it allows exactly list/get/delete on those two resources.
KUBERNETES_GROUP = "hyperpod-dpd:endpoint-janitor"
OPERATOR_API_GROUP = "inference.sagemaker.aws.amazon.com"
OPERATOR_RESOURCES = ("inferenceendpointconfigs", "jumpstartmodels")
#: Tags the janitor's delete permissions are conditioned on (the operator's and the ALB controller's).
OPERATOR_TAG = ("CreatedBy", "HyperPodInference")
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
LAMBDA_TIMEOUT = Duration.minutes(5)
MIN_TIMEOUT = Duration.minutes(5)
#: ServiceTimeout (below CloudFormation's hour, aws/aws-cdk#33837) = the wait plus 5 minutes.
MAX_TIMEOUT = Duration.minutes(50)


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
    Between 5 and 50 minutes (the custom resource's ServiceTimeout is this plus 5 minutes, below
    CloudFormation's hour). Default: 30 minutes."""
    query_interval: Duration = field(default_factory=lambda: Duration.seconds(30))
    """How often the janitor checks what is left. Default: 30 seconds."""
    vpc: ec2.IVpc | None = None
    """Run the Lambda functions in this VPC, for a cluster whose API endpoint is private only. They then
    need egress (NAT, or interface endpoints for sts, eks, sagemaker.api, elasticloadbalancing, acm and
    logs). Default: outside any VPC, which reaches a public (or public-and-private) cluster endpoint."""
    vpc_subnets: ec2.SubnetSelection | None = None
    """Subnets of ``vpc`` for the functions. Default: the VPC's private subnets. Requires ``vpc``."""
    security_group: ec2.ISecurityGroup | None = None
    """Security group of the functions; the cluster security group is opened to it on 443 by a rule
    created in *this* construct's stack (so a janitor in a later stack adds no reference back to the
    cluster's stack). Requires ``vpc``. Default: a new group with all outbound traffic allowed (when
    ``vpc`` is set); then a :class:`LambdaEniWaiter` makes the destroy wait for the functions' ENIs."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the janitor's log groups (handlers and provider framework). Default: one month."""
    bundled_modules: Mapping[str, Path]
    """Modules the handler imports, copied beside it: ``{path inside the asset: source file}`` (the cleanup
    logic and the EKS client, ``hyperpod_core.bundle.imported_by(HANDLER_DIR / "index.py")``). Required: the
    handler folder holds only the entry point."""


class EndpointJanitor(Construct):
    """On stack delete, deletes every InferenceEndpointConfig and JumpStartModel and waits until the
    operator has removed the SageMaker endpoints, load balancers, target groups and ACM certificates it
    created for them. What the operator leaves (once no object is left, or after half of ``timeout``) it
    deletes itself: the resources carrying the operator's tag, the load balancers, target groups and
    security groups carrying the load balancer controller's cluster tag (its IAM allows exactly that). After
    ``timeout`` it fails with one message naming what is left and what helps.

    Kubernetes access: an access entry mapping the role to the ``hyperpod-dpd:endpoint-janitor`` group
    and a ClusterRole allowing only get/list/delete on the operator's two resources (not cluster admin).

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
    access_entry: eks.CfnAccessEntry
    rbac: eks.KubernetesManifest
    custom_resource: CustomResource
    security_group: ec2.ISecurityGroup | None
    eni_waiter: LambdaEniWaiter | None

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointJanitorProps) -> None:
        _validate(props)
        super().__init__(scope, construct_id)
        self.props = props
        stack = Stack.of(self)

        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="EndpointJanitor: deletes HyperPod inference objects and what the operator left")
        self._grant(stack)

        self.security_group = None
        self.eni_waiter = None
        ingress = None
        if props.vpc is not None:
            self.security_group = props.security_group or ec2.SecurityGroup(
                self, "SecurityGroup", vpc=props.vpc, allow_all_outbound=True,
                description="EndpointJanitor Lambda functions")
            # An explicit rule in this construct's stack: cluster.connections.allow_from would put it in the
            # cluster's stack, referencing this group, and make the two stacks depend on each other.
            ingress = ec2.CfnSecurityGroupIngress(
                self, "ClusterApiIngress", group_id=props.cluster.cluster_security_group_id,
                source_security_group_id=self.security_group.security_group_id, ip_protocol="tcp",
                from_port=443, to_port=443, description="EndpointJanitor Lambda to the EKS API")
            self.role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole"))
            if props.security_group is None:
                self.eni_waiter = LambdaEniWaiter(self, "EniWaiter", props=LambdaEniWaiterProps(
                    security_group=self.security_group, log_retention=props.log_retention))

        self.on_event_function = self._function("OnEvent", "index.on_event")
        self.is_complete_function = self._function("IsComplete", "index.is_complete")
        if self.eni_waiter is not None:
            for function in (self.on_event_function, self.is_complete_function):
                function.node.add_dependency(self.eni_waiter.resource)

        self.access_entry = eks.CfnAccessEntry(
            self, "AccessEntry", cluster_name=props.cluster.cluster_name, principal_arn=self.role.role_arn,
            type="STANDARD", kubernetes_groups=[KUBERNETES_GROUP])
        self.rbac = eks.KubernetesManifest(self, "Rbac", cluster=props.cluster, manifest=rbac_manifests())

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
        set_service_timeout(self.custom_resource.node.default_child,  # type: ignore[arg-type]
                            props.timeout.plus(Duration.minutes(5)))
        # Everything the delete path uses must be deleted after it, including the role's policy.
        for dependency in (self.access_entry, self.rbac, self.role, self.on_event_function,
                           self.is_complete_function, self.provider, *props.depends_on,
                           *([ingress] if ingress is not None else [])):
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
            code=handler_code(HANDLER_DIR, self.props.bundled_modules),
            timeout=LAMBDA_TIMEOUT,
            memory_size=256,
            role=self.role,
            log_group=log_group,
            vpc=self.props.vpc,
            vpc_subnets=self.props.vpc_subnets,
            security_groups=[self.security_group] if self.security_group else None,
            description=f"EndpointJanitor {construct_id}: clean HyperPod inference endpoints on stack delete",
        )

    def _grant(self, stack: Stack) -> None:
        """Read what the operator may have left; delete only what carries its tag or the controller's."""
        def arn(service: str, resource: str) -> str:
            return stack.format_arn(service=service, resource=resource, resource_name="*")

        cluster_name = self.props.cluster.cluster_name
        operator_tagged = {"StringEquals": {f"aws:ResourceTag/{OPERATOR_TAG[0]}": OPERATOR_TAG[1]}}
        controller_tagged = {"StringEquals": {f"aws:ResourceTag/{ALB_CLUSTER_TAG}": cluster_name}}
        statements = [
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[self.props.cluster.cluster_arn]),
            # List* and Describe* here support no resource-level permissions (service authorization reference).
            iam.PolicyStatement(
                actions=["sagemaker:ListEndpoints", "acm:ListCertificates",
                         "elasticloadbalancing:DescribeLoadBalancers",
                         "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTags",
                         "ec2:DescribeSecurityGroups"],
                resources=["*"]),
            iam.PolicyStatement(actions=["sagemaker:ListTags"], resources=[arn("sagemaker", "endpoint")]),
            iam.PolicyStatement(actions=["acm:ListTagsForCertificate"], resources=[arn("acm", "certificate")]),
            # Deletes: only resources tagged by the operator (CreatedBy=HyperPodInference) or by the load
            # balancer controller for this cluster (elbv2.k8s.aws/cluster=<name>), as AWS's own controller
            # policy conditions its deletes.
            iam.PolicyStatement(sid="DeleteOperatorEndpoints", actions=["sagemaker:DeleteEndpoint"],
                                resources=[arn("sagemaker", "endpoint")], conditions=operator_tagged),
            iam.PolicyStatement(sid="DeleteOperatorCertificates", actions=["acm:DeleteCertificate"],
                                resources=[arn("acm", "certificate")], conditions=operator_tagged),
            iam.PolicyStatement(
                sid="DeleteControllerLoadBalancers",
                actions=["elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:DeleteTargetGroup"],
                resources=[arn("elasticloadbalancing", "loadbalancer/app"),
                           arn("elasticloadbalancing", "loadbalancer/net"),
                           arn("elasticloadbalancing", "targetgroup")],
                conditions=controller_tagged),
            iam.PolicyStatement(sid="DeleteControllerSecurityGroups", actions=["ec2:DeleteSecurityGroup"],
                                resources=[arn("ec2", "security-group")], conditions=controller_tagged),
        ]
        vpc = self.props.cluster.vpc
        if vpc is not None:
            # The rules the controller added to the nodes' groups for its backend group: in this VPC only.
            statements.append(iam.PolicyStatement(
                sid="RevokeControllerRules", actions=["ec2:RevokeSecurityGroupIngress"],
                resources=[arn("ec2", "security-group")],
                conditions={"ArnEquals": {"ec2:Vpc": stack.format_arn(
                    service="ec2", resource="vpc", resource_name=vpc.vpc_id)}}))
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
                    "sagemaker:ListEndpoints, acm:ListCertificates, elasticloadbalancing:Describe* and "
                    "ec2:DescribeSecurityGroups accept no resource scope; all of them are read-only.")
        acknowledge(self.role, scoped.format("sagemaker", "endpoint/*"),
                    "ListTags on this account's endpoints (the operator picks the names); DeleteEndpoint only "
                    "with the condition aws:ResourceTag/CreatedBy=HyperPodInference.")
        acknowledge(self.role, scoped.format("acm", "certificate/*"),
                    "ListTagsForCertificate (ACM assigns ids at import); DeleteCertificate only with the "
                    "condition aws:ResourceTag/CreatedBy=HyperPodInference.")
        for resource in ("loadbalancer/app/*", "loadbalancer/net/*", "targetgroup/*"):
            acknowledge(self.role, scoped.format("elasticloadbalancing", resource),
                        "Delete only with the condition aws:ResourceTag/elbv2.k8s.aws/cluster=<this cluster>; "
                        "the controller names its load balancers and target groups at run time.")
        acknowledge(self.role, scoped.format("ec2", "security-group/*"),
                    "DeleteSecurityGroup only with the condition aws:ResourceTag/elbv2.k8s.aws/cluster=<this "
                    "cluster>; RevokeSecurityGroupIngress only with the condition ec2:Vpc=<the cluster's VPC>.")
        acknowledge_provider_framework(self.provider, (self.on_event_function, self.is_complete_function),
                                       in_vpc=self.props.vpc is not None, vpc_role=self.role)


def rbac_manifests() -> list[dict[str, object]]:
    """ClusterRole + binding for the janitor's Kubernetes group: the operator's two resources, nothing else."""
    name = "hyperpod-dpd-endpoint-janitor"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
         "rules": [{"apiGroups": [OPERATOR_API_GROUP], "resources": list(OPERATOR_RESOURCES),
                    "verbs": ["get", "list", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": KUBERNETES_GROUP}]},
    ]


def _validate(props: EndpointJanitorProps) -> None:
    timeout = props.timeout.to_seconds()
    if not MIN_TIMEOUT.to_seconds() <= timeout <= MAX_TIMEOUT.to_seconds():
        raise ValueError(f"timeout must be between 5 and 50 minutes, got {timeout:.0f} seconds")
    interval = props.query_interval.to_seconds()
    if not 5 <= interval <= timeout / 4:
        raise ValueError(
            f"query_interval must be between 5 seconds and timeout/4 ({timeout / 4:.0f} s), got {interval:.0f} s")
    if props.vpc is None and (props.vpc_subnets is not None or props.security_group is not None):
        raise ValueError("vpc_subnets and security_group require vpc, got vpc=None")
