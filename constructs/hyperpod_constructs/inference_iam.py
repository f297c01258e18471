"""IAM for the HyperPod Inference Operator add-on: its execution role and the roles of the components it
bundles (KEDA, AWS Load Balancer Controller) or depends on (Mountpoint for S3 CSI driver).

Every role is an IRSA role: trusted by the cluster's OIDC provider for exactly one service account.
Names of namespaces and service accounts are the ones the add-on creates (AWS console CloudFormation,
``inference-addon-iam-roles-template.yaml``; chart ``config/rbac/service_account.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """What the S3 CSI driver may do: read the model weights (see ``ModelBucket.read_statements``: list, get, and
    ``kms:Decrypt`` on the bucket's key, the created one or a kept bucket's); its ``s3:ListBucket`` loses the
    ``s3:prefix`` condition here (:func:`mount_statements`)."""
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

        # --- operator execution role ---
        stack_uuid_head = Fn.select(0, Fn.split("-", Fn.select(2, Fn.split("/", Aws.STACK_ID))))
        self.execution_role = iam.Role(
            self, "ExecutionRole",
            role_name=name or Fn.join("-", [EXECUTION_ROLE_PREFIX, stack_uuid_head]),
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

        # --- KEDA (bundled in the add-on): queries the workspace the autoscaling triggers read. The
        # triggers are Prometheus queries only (hyperpod_k8s endpoint autoscaling), so no CloudWatch. ---
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

        # --- AWS Load Balancer Controller (bundled in the add-on): the upstream controller policy ---
        self.alb_controller_role = iam.Role(
            self, "AlbControllerRole", description="AWS Load Balancer Controller in the HyperPod inference add-on",
            assumed_by=self._irsa_principal("AlbControllerTrust", props.operator_namespace,
                                            ALB_CONTROLLER_SERVICE_ACCOUNT))
        self.alb_controller_policy = iam.Policy(
            self, "AlbControllerPolicy", roles=[self.alb_controller_role],
            statements=load_balancer_controller_statements(vpc_arn=props.vpc_arn))

        # --- Mountpoint for Amazon S3 CSI driver: the model bucket only, read-only ---
        self.s3_csi_role = iam.Role(
            self, "S3CsiRole", description="Mountpoint for Amazon S3 CSI driver: read the model bucket",
            assumed_by=self._irsa_principal("S3CsiTrust", S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT))
        self.s3_csi_policy = iam.Policy(
            self, "S3CsiPolicy", roles=[self.s3_csi_role], statements=mount_statements(props.model_read_statements))
        self._acknowledge_nag(props.tls_certificates_bucket)

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


def load_balancer_controller_statements(*, vpc_arn: str, partition: str = Aws.PARTITION,
                                        region: str = Aws.REGION, account: str = Aws.ACCOUNT_ID,
                                        ) -> list[iam.PolicyStatement]:
    """The AWS Load Balancer Controller IAM policy (upstream ``docs/install/iam_policy.json``, v2.13, as the
    HyperPod console's ``inference-addon-iam-roles-template.yaml`` installs it), narrowed without losing an
    action: every conditioned upstream statement keeps its ``elbv2.k8s.aws/cluster`` tag conditions; every
    resource the service authorization reference lets us name is an ARN pattern of this account and region
    instead of ``*``; security-group rule changes on untagged groups (the nodes' groups) are limited to the
    cluster's VPC (``ec2:Vpc``). Only actions that have no resource type stay on ``*``.
    ``tests/platform/test_alb_controller_policy.py`` checks each statement against the published policy."""
    p, r, a = partition, region, account
    cluster_tag_request = "aws:RequestTag/elbv2.k8s.aws/cluster"
    cluster_tag_resource = "aws:ResourceTag/elbv2.k8s.aws/cluster"
    elb = f"arn:{p}:elasticloadbalancing:{r}:{a}"
    sg_arn = f"arn:{p}:ec2:{r}:{a}:security-group/*"
    lb_arns = [f"{elb}:loadbalancer/net/*/*", f"{elb}:loadbalancer/app/*/*"]
    tg_arns = [f"{elb}:targetgroup/*/*"]
    listener_arns = [f"{elb}:listener/net/*/*/*", f"{elb}:listener/app/*/*/*"]
    rule_arns = [f"{elb}:listener-rule/net/*/*/*", f"{elb}:listener-rule/app/*/*/*"]
    app_lb_arn = f"{elb}:loadbalancer/app/*/*"
    s = iam.PolicyStatement
    return [
        s(sid="CreateElbServiceLinkedRole", actions=["iam:CreateServiceLinkedRole"],
          resources=[f"arn:{p}:iam::{a}:role/aws-service-role/elasticloadbalancing.amazonaws.com/"
                     "AWSServiceRoleForElasticLoadBalancing"],
          conditions={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}),
        # Read-only calls without a resource type (service authorization reference): '*' is the only form.
        s(sid="Describe", resources=["*"], actions=[
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
            "shield:CreateProtection"]),
        s(sid="DescribeVpcResources", actions=["ec2:GetSecurityGroupsForVpc", "ec2:GetCoipPoolUsage"],
          resources=[vpc_arn, f"arn:{p}:ec2:{r}:{a}:coip-pool/*"]),
        s(sid="ListenerCertificatesAndAuth", actions=[
            "acm:DescribeCertificate", "iam:GetServerCertificate", "cognito-idp:DescribeUserPoolClient"],
          resources=[f"arn:{p}:acm:{r}:{a}:certificate/*", f"arn:{p}:iam::{a}:server-certificate/*",
                     f"arn:{p}:cognito-idp:{r}:{a}:userpool/*"]),
        s(sid="WebAclOfOwnLoadBalancers", actions=[
            "waf-regional:GetWebACL", "waf-regional:GetWebACLForResource", "waf-regional:AssociateWebACL",
            "waf-regional:DisassociateWebACL", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
            "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL"],
          resources=[f"arn:{p}:waf-regional:{r}:{a}:webacl/*", f"arn:{p}:wafv2:{r}:{a}:regional/webacl/*/*",
                     app_lb_arn]),
        s(sid="ShieldProtections", actions=["shield:DescribeProtection", "shield:DeleteProtection"],
          resources=[f"arn:{p}:shield::{a}:protection/*"]),
        # Upstream grants these on every security group; the nodes' groups carry no controller tag, so the
        # rule changes are bound to the cluster's VPC instead.
        s(sid="SecurityGroupIngress", resources=[sg_arn],
          actions=["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
          conditions={"ArnEquals": {"ec2:Vpc": vpc_arn}}),
        s(sid="CreateSecurityGroupInVpc", resources=[vpc_arn], actions=["ec2:CreateSecurityGroup"]),
        s(sid="CreateSecurityGroup", resources=[sg_arn], actions=["ec2:CreateSecurityGroup"],
          conditions={"Null": {cluster_tag_request: "false"}}),
        s(sid="TagNewSecurityGroup", actions=["ec2:CreateTags"], resources=[sg_arn],
          conditions={"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"},
                      "Null": {cluster_tag_request: "false"}}),
        s(sid="RetagOwnSecurityGroup", actions=["ec2:CreateTags", "ec2:DeleteTags"], resources=[sg_arn],
          conditions={"Null": {cluster_tag_request: "true", cluster_tag_resource: "false"}}),
        s(sid="ManageOwnSecurityGroup", resources=[sg_arn],
          actions=["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
                   "ec2:DeleteSecurityGroup"],
          conditions={"Null": {cluster_tag_resource: "false"}}),
        s(sid="CreateTaggedLoadBalancer", resources=[*lb_arns, *tg_arns],
          actions=["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
          conditions={"Null": {cluster_tag_request: "false"}}),
        s(sid="ManageListenersAndRules", resources=[*lb_arns, *listener_arns, *rule_arns], actions=[
            "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule"]),
        s(sid="RetagOwnLoadBalancer", resources=[*tg_arns, *lb_arns],
          actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
          conditions={"Null": {cluster_tag_request: "true", cluster_tag_resource: "false"}}),
        s(sid="TagListenersAndRules", actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
          resources=[*listener_arns, *rule_arns]),
        s(sid="ManageOwnLoadBalancer", resources=[*lb_arns, *tg_arns, *listener_arns], actions=[
            "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
            "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
            "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:ModifyListenerAttributes", "elasticloadbalancing:ModifyCapacityReservation",
            "elasticloadbalancing:ModifyIpPools"],
          conditions={"Null": {cluster_tag_resource: "false"}}),
        s(sid="TagOnCreate", actions=["elasticloadbalancing:AddTags"], resources=[*tg_arns, *lb_arns],
          conditions={"StringEquals": {"elasticloadbalancing:CreateAction": ["CreateTargetGroup",
                                                                            "CreateLoadBalancer"]},
                      "Null": {cluster_tag_request: "false"}}),
        s(sid="RegisterTargets", resources=tg_arns,
          actions=["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"]),
        s(sid="ModifyListenersAndRules", resources=[*listener_arns, *rule_arns], actions=[
            "elasticloadbalancing:ModifyListener", "elasticloadbalancing:AddListenerCertificates",
            "elasticloadbalancing:RemoveListenerCertificates", "elasticloadbalancing:ModifyRule",
            "elasticloadbalancing:SetRulePriorities"]),
        # SetWebAcl has no resource type in the service authorization reference.
        s(sid="SetWebAcl", resources=["*"], actions=["elasticloadbalancing:SetWebAcl"]),
    ]


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
