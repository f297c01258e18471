"""IAM for the HyperPod Inference Operator add-on: its execution role and the roles of the components it
bundles (KEDA, AWS Load Balancer Controller) or depends on (Mountpoint for S3 CSI driver).

Every role is an IRSA role: trusted by the cluster's OIDC provider for exactly one service account.
Names of namespaces and service accounts are the ones the add-on creates (AWS console CloudFormation,
``inference-addon-iam-roles-template.yaml``; chart ``config/rbac/service_account.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, CfnJson, Fn, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_constructs.nag import acknowledge

#: The managed policy's iam:PassRole and the add-on's chart validation both require this role-name prefix.
EXECUTION_ROLE_PREFIX = "SageMakerHyperPodInference"
OPERATOR_SERVICE_ACCOUNT = "hyperpod-inference-controller-manager"
KEDA_SERVICE_ACCOUNT = "keda-operator"
ALB_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"
S3_CSI_NAMESPACE = "kube-system"
S3_CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"
INFERENCE_MANAGED_POLICY = "AmazonSageMakerHyperPodInferenceAccess"


@dataclass(frozen=True, kw_only=True)
class InferenceIamProps:
    """Props of :class:`InferenceIam`."""

    oidc_provider: iam.IOidcProvider
    """The cluster's IAM OIDC provider: the federated principal of every role."""
    tls_certificates_bucket: s3.IBucket
    """Where the operator writes the TLS certificates it generates."""
    model_read_statements: tuple[iam.PolicyStatement, ...]
    """What the S3 CSI driver may do: read every endpoint's model weights (see ``ModelBucket.read_statements``: per
    bucket list, get below each prefix, and ``kms:Decrypt`` on each bucket's key); its ``s3:ListBucket`` statements
    lose their ``s3:prefix`` condition here (:func:`mount_statements`)."""
    vpc_arn: str
    """ARN of the cluster's VPC: the ALB controller may change rules of untagged security groups only there."""
    operator_namespace: str
    """Namespace the add-on runs its controller, KEDA and the ALB controller in (the service accounts the
    roles trust): ``hyperpod-inference-system`` (``hyperpod_core.names.OPERATOR_NAMESPACE``)."""
    amp_workspace_arn: str | None = None
    """Workspace KEDA may query for Prometheus triggers. Default: none (KEDA gets no role policy)."""
    execution_role_name: str | None = None
    """Must start with ``SageMakerHyperPodInference``. Default: that prefix plus ``-`` and the first
    block of the stack's UUID (unique per stack, like the AWS console's template)."""


class InferenceIam(Construct):
    """The operator execution role, and the KEDA, ALB controller and S3 CSI driver roles."""

    execution_role: iam.Role
    keda_role: iam.Role
    keda_policy: iam.Policy | None
    """``None`` without a workspace: the autoscaling triggers query only Amazon Managed Prometheus."""
    alb_controller_role: iam.Role
    s3_csi_role: iam.Role

    def __init__(self, scope: Construct, construct_id: str, *, props: InferenceIamProps) -> None:
        super().__init__(scope, construct_id)
        name = props.execution_role_name
        if name is not None and (not name.startswith(EXECUTION_ROLE_PREFIX) or len(name) > 64):
            raise ValueError(f"execution_role_name must start with {EXECUTION_ROLE_PREFIX!r} and be at most "
                             f"64 characters (the managed policy passes only such roles), got {name!r}")
        if not props.model_read_statements:
            raise ValueError("model_read_statements must not be empty: the S3 CSI driver reads the model bucket")
        self._oidc_provider = props.oidc_provider
        self._execution_role(props)
        self._keda_role(props)
        self._alb_controller_role(props)
        self._s3_csi_role(props)
        self._acknowledge_nag(props.tls_certificates_bucket)

    def _execution_role(self, props: InferenceIamProps) -> None:
        """The operator's execution role: trusted by SageMaker and the operator's service account."""
        stack_uuid_head = Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))))
        self.execution_role = iam.Role(
            self, "ExecutionRole",
            role_name=props.execution_role_name or Fn.join("-", [EXECUTION_ROLE_PREFIX, stack_uuid_head]),
            description="HyperPod Inference Operator execution role (add-on executionRoleArn)",
            assumed_by=iam.CompositePrincipal(
                # No condition, as AWS's own template trusts SageMaker (inference-addon-iam-roles-template.yaml)
                # and the troubleshooting page prescribes: no published page shows SageMaker sending
                # aws:SourceAccount or aws:SourceArn when it assumes this role, and a condition on a key that is
                # not sent denies the assume (then UpdateClusterInference fails at operator start-up).
                iam.ServicePrincipal("sagemaker.amazonaws.com"),
                self._irsa_principal("ExecutionRoleTrust", props.operator_namespace, OPERATOR_SERVICE_ACCOUNT)),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(INFERENCE_MANAGED_POLICY)],
        )
        self.execution_role_policy = iam.Policy(self, "ExecutionRolePolicy", roles=[self.execution_role], statements=[
            # The operator hands this role to SageMaker (CreateModel/CreateEndpointConfig).
            iam.PolicyStatement(
                sid="PassSelfToSageMaker", actions=["iam:PassRole"], resources=[self.execution_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}),
            # The bucket is not named hyperpod-tls-*, so the managed policy does not cover it; these four
            # actions are the inline policy the setup guide prescribes for any other bucket name.
            iam.PolicyStatement(
                sid="TlsCertificatesBucketObjects",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:PutObjectTagging"],
                resources=[props.tls_certificates_bucket.arn_for_objects("*")]),
        ])

    def _keda_role(self, props: InferenceIamProps) -> None:
        """KEDA (bundled in the add-on): queries the workspace the autoscaling triggers read. The triggers are
        Prometheus queries only (hyperpod_k8s endpoint autoscaling), so no CloudWatch."""
        self.keda_role = iam.Role(
            self, "KedaRole", description="KEDA operator in the HyperPod inference add-on",
            assumed_by=self._irsa_principal("KedaTrust", props.operator_namespace, KEDA_SERVICE_ACCOUNT))
        self.keda_policy = None
        if props.amp_workspace_arn is not None:
            self.keda_policy = iam.Policy(self, "KedaPolicy", roles=[self.keda_role], statements=[
                iam.PolicyStatement(
                    sid="PrometheusTriggers",
                    actions=["aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
                    resources=[props.amp_workspace_arn])])

    def _alb_controller_role(self, props: InferenceIamProps) -> None:
        """AWS Load Balancer Controller (bundled in the add-on): the upstream controller policy, narrowed."""
        self.alb_controller_role = iam.Role(
            self, "AlbControllerRole", description="AWS Load Balancer Controller in the HyperPod inference add-on",
            assumed_by=self._irsa_principal("AlbControllerTrust", props.operator_namespace,
                                            ALB_CONTROLLER_SERVICE_ACCOUNT))
        self.alb_controller_policy = iam.Policy(
            self, "AlbControllerPolicy", roles=[self.alb_controller_role],
            statements=load_balancer_controller_statements(vpc_arn=props.vpc_arn))

    def _s3_csi_role(self, props: InferenceIamProps) -> None:
        """Mountpoint for Amazon S3 CSI driver: the model bucket only, read-only."""
        self.s3_csi_role = iam.Role(
            self, "S3CsiRole", description="Mountpoint for Amazon S3 CSI driver: read the model bucket",
            assumed_by=self._irsa_principal("S3CsiTrust", S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT))
        self.s3_csi_policy = iam.Policy(
            self, "S3CsiPolicy", roles=[self.s3_csi_role], statements=mount_statements(props.model_read_statements))

    def _acknowledge_nag(self, tls_bucket: s3.IBucket) -> None:
        """Each finding on these roles, next to them, with the reason it is what the AWS docs require.
        (The S3 CSI policy's finding comes from the model bucket's statements: ``ModelBucket.acknowledge_read``.)"""
        acknowledge(self.execution_role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    f"{INFERENCE_MANAGED_POLICY}]",
                    "The AWS managed policy the HyperPod Inference Operator is documented to require; AWS keeps "
                    "it in step with the operator's API calls.")
        tls = Stack.of(self).resolve(tls_bucket.bucket_arn)["Fn::GetAtt"][0]
        acknowledge(self.execution_role_policy, f"AwsSolutions-IAM5[Resource::<{tls}.Arn>/*]",
                    "The operator writes certificates under keys it chooses per endpoint, in this one bucket.")
        stack = Stack.of(self)
        wildcard_resources = sorted({
            nag_resource(r) for st in self.alb_controller_policy.document.to_json()["Statement"]
            for r in _as_list(stack.resolve(st["Resource"])) if "*" in nag_resource(r)})
        for resource in wildcard_resources:
            acknowledge(self.alb_controller_policy, f"AwsSolutions-IAM5[Resource::{resource}]",
                        _alb_wildcard_reason(resource))

    def _irsa_principal(self, construct_id: str, namespace: str, service_account: str) -> iam.IPrincipal:
        provider = self._oidc_provider
        issuer = provider.open_id_connect_provider_issuer
        # The issuer is a token, so the condition keys are resolved at deploy time through CfnJson.
        conditions = CfnJson(self, construct_id, value={
            f"{issuer}:aud": "sts.amazonaws.com",
            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
        })
        return iam.OpenIdConnectPrincipal(provider, conditions={"StringEquals": conditions})


def mount_statements(read_statements: tuple[iam.PolicyStatement, ...]) -> list[iam.PolicyStatement]:
    """The model-read statements as Mountpoint needs them: ``s3:ListBucket`` on the bucket with no
    ``s3:prefix`` condition, every other statement (``GetObject`` below the prefix, ``kms:Decrypt``) unchanged.

    Mountpoint lists from the root of what it mounts: a mount of the bucket or of a parent of the model prefix
    lists with a prefix the condition does not match (``""``, ``models/``) and fails with AccessDenied. AWS's own
    S3 CSI role grants ``s3:ListBucket`` without a condition (aws/sagemaker-hyperpod-cluster-setup,
    inference-addon-iam-roles-template.yaml, ``MountpointFullBucketAccess``, on every bucket); here it stays on
    the model bucket only, and it reveals key names, never content."""
    return [iam.PolicyStatement(sid=st.sid, actions=st.actions, resources=st.resources)
            if st.actions == ["s3:ListBucket"] and st.conditions else st for st in read_statements]


@dataclass(frozen=True)
class _Grant:
    """One statement of the controller's policy, its resources and condition by name (the tables of
    :func:`load_balancer_controller_statements`)."""

    sid: str
    resources: tuple[str, ...]
    actions: tuple[str, ...]
    condition: str | None = None


_CLUSTER_TAG_REQUEST = "aws:RequestTag/elbv2.k8s.aws/cluster"
_CLUSTER_TAG_RESOURCE = "aws:ResourceTag/elbv2.k8s.aws/cluster"
#: The upstream policy's conditions, by name; each keeps its ``elbv2.k8s.aws/cluster`` tag conditions.
_LOAD_BALANCER_CONTROLLER_CONDITIONS: dict[str, dict[str, Any]] = {
    "elb-service-linked-role": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
    # The request tags what it creates with the cluster.
    "tags-new": {"Null": {_CLUSTER_TAG_REQUEST: "false"}},
    "tags-new-security-group": {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"},
                                "Null": {_CLUSTER_TAG_REQUEST: "false"}},
    "tags-new-load-balancer": {"StringEquals": {"elasticloadbalancing:CreateAction": ["CreateTargetGroup",
                                                                                      "CreateLoadBalancer"]},
                               "Null": {_CLUSTER_TAG_REQUEST: "false"}},
    # The resource carries the cluster tag (the controller's own), and the request sets no such tag.
    "retags-own": {"Null": {_CLUSTER_TAG_REQUEST: "true", _CLUSTER_TAG_RESOURCE: "false"}},
    # The resource carries the cluster tag: the controller's own.
    "own": {"Null": {_CLUSTER_TAG_RESOURCE: "false"}},
}
#: The AWS Load Balancer Controller's statements, in the order they are granted. Resources name the ARN patterns
#: of :func:`load_balancer_controller_statements` (``*`` for actions without a resource type).
_LOAD_BALANCER_CONTROLLER: tuple[_Grant, ...] = (
    _Grant("CreateElbServiceLinkedRole", ("elb-service-linked-role",), ("iam:CreateServiceLinkedRole",),
           "elb-service-linked-role"),
    # Read-only calls without a resource type (service authorization reference): '*' is the only form.
    _Grant("Describe", ("*",), (
        "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
        "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
        "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:DescribeCoipPools", "ec2:DescribeIpamPools",
        "ec2:DescribeRouteTables",
        "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeLoadBalancerAttributes",
        "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeListenerCertificates",
        "elasticloadbalancing:DescribeSSLPolicies", "elasticloadbalancing:DescribeRules",
        "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetGroupAttributes",
        "elasticloadbalancing:DescribeTargetHealth", "elasticloadbalancing:DescribeTags",
        "elasticloadbalancing:DescribeTrustStores", "elasticloadbalancing:DescribeListenerAttributes",
        "elasticloadbalancing:DescribeCapacityReservation",
        "acm:ListCertificates", "iam:ListServerCertificates", "shield:GetSubscriptionState",
        # no resource type either; protects only what the controller names (its own load balancers)
        "shield:CreateProtection")),
    _Grant("DescribeVpcResources", ("vpc", "coip-pool"), ("ec2:GetSecurityGroupsForVpc", "ec2:GetCoipPoolUsage")),
    _Grant("ListenerCertificatesAndAuth", ("certificate", "server-certificate", "userpool"), (
        "acm:DescribeCertificate", "iam:GetServerCertificate", "cognito-idp:DescribeUserPoolClient")),
    _Grant("WebAclOfOwnLoadBalancers", ("waf-regional-webacl", "wafv2-webacl", "app-loadbalancer"), (
        "waf-regional:GetWebACL", "waf-regional:GetWebACLForResource", "waf-regional:AssociateWebACL",
        "waf-regional:DisassociateWebACL", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
        "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL")),
    _Grant("ShieldProtections", ("protection",), ("shield:DescribeProtection", "shield:DeleteProtection")),
    # Upstream grants these on every security group; the nodes' groups carry no controller tag, so the rule
    # changes are bound to the cluster's VPC instead.
    _Grant("SecurityGroupIngress", ("security-group",),
           ("ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"), "in-vpc"),
    _Grant("CreateSecurityGroupInVpc", ("vpc",), ("ec2:CreateSecurityGroup",)),
    _Grant("CreateSecurityGroup", ("security-group",), ("ec2:CreateSecurityGroup",), "tags-new"),
    _Grant("TagNewSecurityGroup", ("security-group",), ("ec2:CreateTags",), "tags-new-security-group"),
    _Grant("RetagOwnSecurityGroup", ("security-group",), ("ec2:CreateTags", "ec2:DeleteTags"), "retags-own"),
    _Grant("ManageOwnSecurityGroup", ("security-group",), (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"), "own"),
    _Grant("CreateTaggedLoadBalancer", ("loadbalancer", "targetgroup"),
           ("elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"), "tags-new"),
    _Grant("ManageListenersAndRules", ("loadbalancer", "listener", "listener-rule"), (
        "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
        "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule")),
    _Grant("RetagOwnLoadBalancer", ("targetgroup", "loadbalancer"),
           ("elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"), "retags-own"),
    _Grant("TagListenersAndRules", ("listener", "listener-rule"),
           ("elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags")),
    _Grant("ManageOwnLoadBalancer", ("loadbalancer", "targetgroup", "listener"), (
        "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
        "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
        "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
        "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
        "elasticloadbalancing:ModifyListenerAttributes", "elasticloadbalancing:ModifyCapacityReservation",
        "elasticloadbalancing:ModifyIpPools"), "own"),
    _Grant("TagOnCreate", ("targetgroup", "loadbalancer"), ("elasticloadbalancing:AddTags",),
           "tags-new-load-balancer"),
    _Grant("RegisterTargets", ("targetgroup",),
           ("elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets")),
    _Grant("ModifyListenersAndRules", ("listener", "listener-rule"), (
        "elasticloadbalancing:ModifyListener", "elasticloadbalancing:AddListenerCertificates",
        "elasticloadbalancing:RemoveListenerCertificates", "elasticloadbalancing:ModifyRule",
        "elasticloadbalancing:SetRulePriorities")),
    # SetWebAcl has no resource type in the service authorization reference.
    _Grant("SetWebAcl", ("*",), ("elasticloadbalancing:SetWebAcl",)),
)


def load_balancer_controller_statements(*, vpc_arn: str, partition: str = Aws.PARTITION,
                                        region: str = Aws.REGION, account: str = Aws.ACCOUNT_ID,
                                        ) -> list[iam.PolicyStatement]:
    """The AWS Load Balancer Controller IAM policy (upstream ``docs/install/iam_policy.json``, v2.13, as the
    HyperPod console's ``inference-addon-iam-roles-template.yaml`` installs it), narrowed without losing an
    action: every conditioned upstream statement keeps its ``elbv2.k8s.aws/cluster`` tag conditions; every
    resource the service authorization reference lets us name is an ARN pattern of this account and region
    instead of ``*``; security-group rule changes on untagged groups (the nodes' groups) are limited to the
    cluster's VPC (``ec2:Vpc``). Only actions that have no resource type stay on ``*``.
    ``tests/platform/test_alb_controller_policy.py`` checks each statement against the published policy.
    The statements are :data:`_LOAD_BALANCER_CONTROLLER`; here their resources become ARN patterns."""
    p, r, a = partition, region, account
    elb = f"arn:{p}:elasticloadbalancing:{r}:{a}"
    arns = {
        "*": ["*"],
        "vpc": [vpc_arn],
        "elb-service-linked-role": [f"arn:{p}:iam::{a}:role/aws-service-role/elasticloadbalancing.amazonaws.com/"
                                    "AWSServiceRoleForElasticLoadBalancing"],
        "coip-pool": [f"arn:{p}:ec2:{r}:{a}:coip-pool/*"],
        "certificate": [f"arn:{p}:acm:{r}:{a}:certificate/*"],
        "server-certificate": [f"arn:{p}:iam::{a}:server-certificate/*"],
        "userpool": [f"arn:{p}:cognito-idp:{r}:{a}:userpool/*"],
        "waf-regional-webacl": [f"arn:{p}:waf-regional:{r}:{a}:webacl/*"],
        "wafv2-webacl": [f"arn:{p}:wafv2:{r}:{a}:regional/webacl/*/*"],
        "protection": [f"arn:{p}:shield::{a}:protection/*"],
        "security-group": [f"arn:{p}:ec2:{r}:{a}:security-group/*"],
        "loadbalancer": [f"{elb}:loadbalancer/net/*/*", f"{elb}:loadbalancer/app/*/*"],
        "app-loadbalancer": [f"{elb}:loadbalancer/app/*/*"],
        "targetgroup": [f"{elb}:targetgroup/*/*"],
        "listener": [f"{elb}:listener/net/*/*/*", f"{elb}:listener/app/*/*/*"],
        "listener-rule": [f"{elb}:listener-rule/net/*/*/*", f"{elb}:listener-rule/app/*/*/*"],
    }
    conditions = {**_LOAD_BALANCER_CONTROLLER_CONDITIONS, "in-vpc": {"ArnEquals": {"ec2:Vpc": vpc_arn}}}
    return [iam.PolicyStatement(sid=g.sid, actions=list(g.actions),
                                resources=[arn for name in g.resources for arn in arns[name]],
                                conditions=conditions[g.condition] if g.condition else None)
            for g in _LOAD_BALANCER_CONTROLLER]


#: Resource types the controller creates itself (names chosen at run time), and those an Ingress or Service
#: annotation names (certificates, user pools, web ACLs, customer-owned IP pools).
_ALB_CREATED = ("security-group/", "loadbalancer/", "targetgroup/", "listener/", "listener-rule/", "protection/")


def _alb_wildcard_reason(resource: str) -> str:
    if resource == "*":
        return "Only actions without a resource type in the service authorization reference are on '*'."
    where = "this account and region" if "<AWS::Region>" in resource else "this account"
    if any(f":{kind}" in resource for kind in _ALB_CREATED):
        return (f"The AWS Load Balancer Controller creates these resources under names it chooses at run time; "
                f"the ARN pattern is limited to {where}.")
    return (f"Ingress and Service annotations name these resources at run time; the ARN pattern is limited to "
            f"{where}.")


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def nag_resource(value: object) -> str:
    """A resolved IAM resource as cdk-nag's IAM5 finding id spells it (``arn:<AWS::Partition>:...``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<{'.'.join(value['Fn::GetAtt'])}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(nag_resource(p) for p in parts)
    return str(value)
