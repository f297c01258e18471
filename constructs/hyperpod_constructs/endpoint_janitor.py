"""Clean ``cdk destroy`` for inference: delete the operator's objects and wait for its AWS resources to go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import CfnResource, CustomResource, Duration, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from hyperpod_constructs import cluster_api_access, lambda_provider
from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter
from hyperpod_constructs.nag import acknowledge

HANDLER_DIR = Path(__file__).parent / "endpoint_janitor_handler"
RESOURCE_TYPE = "Custom::HyperPodEndpointJanitor"
#: The custom resource's logical ID, pinned (``override_logical_id``) to the one it synthesized to before it was
#: pinned (``Platform`` template of config/default.yaml at commit 828b511, construct path
#: ``Platform/EndpointJanitor/Resource``), so deployed stacks keep it. CloudFormation sends Delete to a resource
#: whose logical ID changes (the old one, in the update's cleanup phase): a refactor of construct paths must not
#: change it. One janitor per stack.
LOGICAL_ID = "EndpointJanitor4EF4A0F0"
#: EKS access policies only cover built-in API groups, so they cannot grant the operator's CRDs (group
#: inference.sagemaker.aws.amazon.com) without cluster admin. Instead the access entry maps the role to this
#: Kubernetes group, and a ClusterRole bound to it allows exactly list/get/delete on those two resources.
KUBERNETES_GROUP = "hyperpod-dpd:endpoint-janitor"
RBAC_NAME = "hyperpod-dpd-endpoint-janitor"
OPERATOR_API_GROUP = "inference.sagemaker.aws.amazon.com"
OPERATOR_RESOURCES = ("inferenceendpointconfigs", "jumpstartmodels")
#: Read only: the operator's record of each SageMaker endpoint, whose status names the endpoint, endpoint config
#: and model it created (CRD sagemakerendpointregistrations.inference.sagemaker.aws.amazon.com).
OPERATOR_REGISTRATIONS = "sagemakerendpointregistrations"
#: Tags the janitor's delete permissions are conditioned on (the operator's and the ALB controller's).
OPERATOR_TAG = ("CreatedBy", "HyperPodInference")
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
RBAC_RULES = ({"apiGroups": [OPERATOR_API_GROUP], "resources": list(OPERATOR_RESOURCES),
               "verbs": ["get", "list", "delete"]},
              {"apiGroups": [OPERATOR_API_GROUP], "resources": [OPERATOR_REGISTRATIONS], "verbs": ["get", "list"]})
#: The SageMaker resources the operator creates (AmazonSageMakerHyperPodInferenceAccess: Create/Delete Endpoint,
#: EndpointConfig and Model), as (ARN resource type, delete action, statement id).
SAGEMAKER_RESOURCES = (("endpoint", "sagemaker:DeleteEndpoint", "DeleteOperatorEndpoints"),
                       ("endpoint-config", "sagemaker:DeleteEndpointConfig", "DeleteOperatorEndpointConfigs"),
                       ("model", "sagemaker:DeleteModel", "DeleteOperatorModels"))
LAMBDA_TIMEOUT = Duration.minutes(5)
MIN_TIMEOUT = Duration.minutes(5)
#: ServiceTimeout (below CloudFormation's hour, aws/aws-cdk#33837) = the wait plus 5 minutes.
MAX_TIMEOUT = Duration.minutes(50)
MIN_QUERY_INTERVAL = Duration.seconds(5)


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
    deployment_tag: tuple[str, str] | None = None
    """``(key, value)`` of the tag that names this deployment on what the operator creates for it (the
    InferenceEndpointConfigs' ``spec.tags``). The janitor deletes SageMaker resources and certificates only when
    they carry it, or when this cluster's objects name them; its IAM refuses the deletes on anything carrying
    this key with another value. Default: none; then only the names this cluster's objects give, and a tag
    naming this cluster, make a resource the janitor's to delete."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the janitor's log groups (handlers and provider framework). Default: one month."""
    bundled_modules: Mapping[str, Path]
    """Modules the handler imports, copied beside it: ``{path inside the asset: source file}`` (the cleanup
    logic and the EKS client, ``hyperpod_infra.bundle.imported_by(HANDLER_DIR / "index.py")``). Required: the
    handler folder holds only the entry point."""


class EndpointJanitor(Construct):
    """On stack delete, deletes every InferenceEndpointConfig and JumpStartModel and waits until the
    operator has removed the SageMaker endpoints, endpoint configs, models, load balancers, target groups and
    ACM certificates it created for them. What the operator leaves (once no object is left, or after half of
    ``timeout``) it deletes itself: the operator's SageMaker resources and certificates that are this
    deployment's (``deployment_tag``, or named by the status of this cluster's objects), and the load
    balancers, target groups and security groups carrying the load balancer controller's cluster tag (its IAM
    allows exactly that). The operator's resources of other deployments, or of unknown owner, are named in its
    log and left alone. After ``timeout`` it fails with one message naming what is left and what helps.

    Kubernetes access: an access entry mapping the role to the ``hyperpod-dpd:endpoint-janitor`` group
    and a ClusterRole allowing only get/list/delete on the operator's two resources and get/list on its
    SageMakerEndpointRegistrations (not cluster admin).

    Ordering contract: the janitor must be *deleted before* the inference operator add-on (whose
    finalizers do the actual cleanup), the operator's IAM roles, the ALB controller and the network. Since
    CloudFormation deletes in reverse dependency order, the janitor's ``custom_resource`` depends on
    everything in ``props.depends_on`` (and on its own access entry, role, functions and provider). If the
    endpoints' KubernetesManifests live in the same app, let them depend on the janitor, not the reverse:
    they are then deleted first and the janitor only confirms the cleanup.

    Create and Update do nothing. A Delete cleans up only while the stack is being deleted (or a failed first
    create rolls back): the handler reads the stack's status (``cloudformation:DescribeStacks`` on this stack
    only; ``hyperpod_runtime.stack_status``). A Delete CloudFormation sends during an update (the janitor removed
    from the template or replaced, a failed update that added it rolled back) logs what it skips and succeeds,
    deleting nothing. The custom resource's logical ID is pinned (:data:`LOGICAL_ID`), so no refactor turns
    into such a Delete either.
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

        vpc = cluster_api_access.vpc_access(
            self, name="EndpointJanitor", cluster=props.cluster, vpc=props.vpc, role=self.role,
            log_retention=props.log_retention, security_group=props.security_group)
        self.security_group, self.eni_waiter = vpc.security_group, vpc.eni_waiter

        self.on_event_function, self.is_complete_function = lambda_provider.polling_functions(
            self, name="EndpointJanitor", purpose="clean HyperPod inference endpoints on stack delete",
            code=lambda_provider.handler_code(HANDLER_DIR, props.bundled_modules), role=self.role,
            timeout=LAMBDA_TIMEOUT, memory_size=256, log_retention=props.log_retention, vpc=props.vpc,
            vpc_subnets=props.vpc_subnets, security_group=self.security_group, depends_on=vpc.function_dependencies)
        functions = (self.on_event_function, self.is_complete_function)

        access = cluster_api_access.kubernetes_group_access(
            self, cluster=props.cluster, role=self.role, group=KUBERNETES_GROUP, rbac_name=RBAC_NAME,
            rules=RBAC_RULES)
        self.access_entry, self.rbac = access.access_entry, access.rbac
        self.provider = lambda_provider.provider(
            self, on_event=self.on_event_function, is_complete=self.is_complete_function,
            query_interval=props.query_interval, total_timeout=props.timeout, log_retention=props.log_retention)
        # Everything the delete path uses must be deleted after it, including the role's policy.
        self.custom_resource = lambda_provider.custom_resource(
            self, provider=self.provider, resource_type=RESOURCE_TYPE, total_timeout=props.timeout,
            properties={
                "ClusterName": props.cluster.cluster_name,
                "ClusterArn": props.cluster.cluster_arn,
                "WaitSeconds": lambda_provider.handler_wait_seconds(props.timeout, props.query_interval),
                **({"DeploymentTagKey": props.deployment_tag[0], "DeploymentTagValue": props.deployment_tag[1]}
                   if props.deployment_tag is not None else {}),
            },
            depends_on=(self.access_entry, self.rbac, self.role, *functions, self.provider, *props.depends_on,
                        *vpc.resource_dependencies))
        default_child = self.custom_resource.node.default_child
        assert isinstance(default_child, CfnResource), self.custom_resource.node.path
        default_child.override_logical_id(LOGICAL_ID)
        self._acknowledge_nag()

    def _grant(self, stack: Stack) -> None:
        """Read what the operator may have left; delete only what carries its tag (and no other deployment's)
        or the controller's."""
        def arn(service: str, resource: str) -> str:
            return stack.format_arn(service=service, resource=resource, resource_name="*")

        cluster_name = self.props.cluster.cluster_name
        operator_tagged: dict[str, Any] = {"StringEquals": {f"aws:ResourceTag/{OPERATOR_TAG[0]}": OPERATOR_TAG[1]}}
        if self.props.deployment_tag is not None:
            # A resource tagged for another deployment is refused even if the code erred; one without the tag
            # (the operator did not propagate spec.tags) is allowed: the handler deletes it only when this
            # cluster's objects name it (IAM: a ...IfExists operator is true when the key is absent).
            key, value = self.props.deployment_tag
            operator_tagged["StringEqualsIfExists"] = {f"aws:ResourceTag/{key}": value}
        controller_tagged = {"StringEquals": {f"aws:ResourceTag/{ALB_CLUSTER_TAG}": cluster_name}}
        statements = [
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[self.props.cluster.cluster_arn]),
            # A Delete cleans up only while this stack is being deleted: the handler reads its status.
            iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[stack.stack_id]),
            # List* and Describe* here support no resource-level permissions (service authorization reference).
            iam.PolicyStatement(
                actions=["sagemaker:ListEndpoints", "sagemaker:ListEndpointConfigs", "sagemaker:ListModels",
                         "acm:ListCertificates", "elasticloadbalancing:DescribeLoadBalancers",
                         "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTags",
                         "ec2:DescribeSecurityGroups"],
                resources=["*"]),
            iam.PolicyStatement(actions=["sagemaker:ListTags"],
                                resources=[arn("sagemaker", t) for t, _, _ in SAGEMAKER_RESOURCES]),
            iam.PolicyStatement(actions=["acm:ListTagsForCertificate", "acm:DescribeCertificate"],
                                resources=[arn("acm", "certificate")]),
            # Deletes: only resources tagged by the operator (CreatedBy=HyperPodInference) or by the load
            # balancer controller for this cluster (elbv2.k8s.aws/cluster=<name>), as AWS's own controller
            # policy conditions its deletes.
            *(iam.PolicyStatement(sid=sid, actions=[action], resources=[arn("sagemaker", resource_type)],
                                  conditions=operator_tagged)
              for resource_type, action, sid in SAGEMAKER_RESOURCES),
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
                    "sagemaker:ListEndpoints/ListEndpointConfigs/ListModels, acm:ListCertificates, "
                    "elasticloadbalancing:Describe* and ec2:DescribeSecurityGroups accept no resource scope; all "
                    "of them are read-only.")
        delete_condition = "the condition aws:ResourceTag/CreatedBy=HyperPodInference" + (
            f" and no {self.props.deployment_tag[0]} tag of another deployment"
            if self.props.deployment_tag is not None else "")
        for resource_type, action, _ in SAGEMAKER_RESOURCES:
            acknowledge(self.role, scoped.format("sagemaker", f"{resource_type}/*"),
                        f"ListTags on this account's {resource_type}s (the operator picks the names); "
                        f"{action.split(':')[1]} only with {delete_condition}.")
        acknowledge(self.role, scoped.format("acm", "certificate/*"),
                    "ListTagsForCertificate and DescribeCertificate (ACM assigns ids at import); DeleteCertificate "
                    f"only with {delete_condition}.")
        for resource in ("loadbalancer/app/*", "loadbalancer/net/*", "targetgroup/*"):
            acknowledge(self.role, scoped.format("elasticloadbalancing", resource),
                        "Delete only with the condition aws:ResourceTag/elbv2.k8s.aws/cluster=<this cluster>; "
                        "the controller names its load balancers and target groups at run time.")
        acknowledge(self.role, scoped.format("ec2", "security-group/*"),
                    "DeleteSecurityGroup only with the condition aws:ResourceTag/elbv2.k8s.aws/cluster=<this "
                    "cluster>; RevokeSecurityGroupIngress only with the condition ec2:Vpc=<the cluster's VPC>.")


def rbac_manifests() -> list[dict[str, object]]:
    """ClusterRole + binding for the janitor's Kubernetes group: the operator's two resources and (read only) its
    SageMakerEndpointRegistrations, nothing else."""
    return cluster_api_access.rbac_manifests(name=RBAC_NAME, group=KUBERNETES_GROUP, rules=RBAC_RULES)


def _validate(props: EndpointJanitorProps) -> None:
    lambda_provider.check_timeout(props.timeout, minimum=MIN_TIMEOUT, maximum=MAX_TIMEOUT)
    lambda_provider.check_query_interval(props.query_interval, timeout=props.timeout, minimum=MIN_QUERY_INTERVAL)
    if props.vpc is None and (props.vpc_subnets is not None or props.security_group is not None):
        raise ValueError("vpc_subnets and security_group require vpc, got vpc=None")
