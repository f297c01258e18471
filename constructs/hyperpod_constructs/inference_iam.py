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
OPERATOR_NAMESPACE = "hyperpod-inference-system"
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
    """What the S3 CSI driver may do: read the model bucket (see ``ModelBucket.read_statements``)."""
    amp_workspace_arn: str | None = None
    """Workspace KEDA may query for Prometheus triggers. Default: none (no ``aps:`` permissions)."""
    execution_role_name: str | None = None
    """Must start with ``SageMakerHyperPodInference``. Default: that prefix plus ``-`` and the first
    block of the stack's UUID (unique per stack, like the AWS console's template)."""


class InferenceIam(Construct):
    """The operator execution role, and the KEDA, ALB controller and S3 CSI driver roles."""

    execution_role: iam.Role
    keda_role: iam.Role
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
                iam.ServicePrincipal("sagemaker.amazonaws.com"),
                self._irsa_principal("ExecutionRoleTrust", OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT)),
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

        # --- KEDA (bundled in the add-on): reads the metrics autoscaling triggers query ---
        keda_statements = [iam.PolicyStatement(
            sid="CloudWatchTriggers",
            actions=["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics"],
            resources=["*"])]
        if props.amp_workspace_arn is not None:
            keda_statements.append(iam.PolicyStatement(
                sid="PrometheusTriggers",
                actions=["aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
                resources=[props.amp_workspace_arn]))
        self.keda_role = iam.Role(
            self, "KedaRole", description="KEDA operator in the HyperPod inference add-on",
            assumed_by=self._irsa_principal("KedaTrust", OPERATOR_NAMESPACE, KEDA_SERVICE_ACCOUNT))
        self.keda_policy = iam.Policy(self, "KedaPolicy", roles=[self.keda_role], statements=keda_statements)

        # --- AWS Load Balancer Controller (bundled in the add-on): the upstream controller policy ---
        self.alb_controller_role = iam.Role(
            self, "AlbControllerRole", description="AWS Load Balancer Controller in the HyperPod inference add-on",
            assumed_by=self._irsa_principal("AlbControllerTrust", OPERATOR_NAMESPACE,
                                            ALB_CONTROLLER_SERVICE_ACCOUNT))
        self.alb_controller_policy = iam.Policy(
            self, "AlbControllerPolicy", roles=[self.alb_controller_role],
            statements=load_balancer_controller_statements())

        # --- Mountpoint for Amazon S3 CSI driver: the model bucket only, read-only ---
        self.s3_csi_role = iam.Role(
            self, "S3CsiRole", description="Mountpoint for Amazon S3 CSI driver: read the model bucket",
            assumed_by=self._irsa_principal("S3CsiTrust", S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT))
        self.s3_csi_policy = iam.Policy(
            self, "S3CsiPolicy", roles=[self.s3_csi_role], statements=list(props.model_read_statements))
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
        acknowledge(self.keda_policy, "AwsSolutions-IAM5[Resource::*]",
                    "CloudWatch GetMetricData/GetMetricStatistics/ListMetrics do not support resource-level "
                    "permissions; they are read-only.")
        for rid in ("AwsSolutions-IAM5[Resource::*]",
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:*:security-group/*]",
                    *(f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:elasticloadbalancing:*:*:{r}]" for r in (
                        "targetgroup/*/*", "loadbalancer/net/*/*", "loadbalancer/app/*/*", "listener/net/*/*/*",
                        "listener/app/*/*/*", "listener-rule/net/*/*/*", "listener-rule/app/*/*/*"))):
            acknowledge(self.alb_controller_policy, rid,
                        "The AWS Load Balancer Controller policy as published: it creates load balancers, target "
                        "groups and security groups whose ARNs cannot be known in advance; mutations are "
                        "restricted by the elbv2.k8s.aws/cluster tag conditions.")

    def _irsa_principal(self, construct_id: str, namespace: str, service_account: str) -> iam.IPrincipal:
        provider = self._oidc_provider
        issuer = provider.open_id_connect_provider_issuer
        # The issuer is a token, so the condition keys are resolved at deploy time through CfnJson.
        conditions = CfnJson(self, construct_id, value={
            f"{issuer}:aud": "sts.amazonaws.com",
            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
        })
        return iam.OpenIdConnectPrincipal(provider, conditions={"StringEquals": conditions})


def load_balancer_controller_statements() -> list[iam.PolicyStatement]:
    """The AWS Load Balancer Controller IAM policy (upstream ``docs/install/iam_policy.json``, v2.13, as the
    HyperPod console's ``inference-addon-iam-roles-template.yaml`` installs it). Wildcard resources are the
    controller's design: it creates load balancers and security groups whose ARNs are not known in advance;
    mutations are limited by the ``elbv2.k8s.aws/cluster`` tag conditions."""
    p = Aws.PARTITION
    cluster_tag_request = "aws:RequestTag/elbv2.k8s.aws/cluster"
    cluster_tag_resource = "aws:ResourceTag/elbv2.k8s.aws/cluster"
    sg_arn = f"arn:{p}:ec2:*:*:security-group/*"
    lb_arns = [f"arn:{p}:elasticloadbalancing:*:*:targetgroup/*/*",
               f"arn:{p}:elasticloadbalancing:*:*:loadbalancer/net/*/*",
               f"arn:{p}:elasticloadbalancing:*:*:loadbalancer/app/*/*"]
    s = iam.PolicyStatement
    return [
        s(sid="CreateElbServiceLinkedRole", actions=["iam:CreateServiceLinkedRole"], resources=["*"],
          conditions={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}),
        s(sid="Describe", resources=["*"], actions=[
            "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
            "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
            "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:GetCoipPoolUsage",
            "ec2:DescribeCoipPools", "ec2:GetSecurityGroupsForVpc", "ec2:DescribeIpamPools",
            "ec2:DescribeRouteTables",
            "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeLoadBalancerAttributes",
            "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeListenerCertificates",
            "elasticloadbalancing:DescribeSSLPolicies", "elasticloadbalancing:DescribeRules",
            "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:DescribeTargetGroupAttributes",
            "elasticloadbalancing:DescribeTargetHealth", "elasticloadbalancing:DescribeTags",
            "elasticloadbalancing:DescribeTrustStores", "elasticloadbalancing:DescribeListenerAttributes",
            "elasticloadbalancing:DescribeCapacityReservation"]),
        s(sid="ListenerIntegrations", resources=["*"], actions=[
            "cognito-idp:DescribeUserPoolClient", "acm:ListCertificates", "acm:DescribeCertificate",
            "iam:ListServerCertificates", "iam:GetServerCertificate",
            "waf-regional:GetWebACL", "waf-regional:GetWebACLForResource", "waf-regional:AssociateWebACL",
            "waf-regional:DisassociateWebACL", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
            "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL", "shield:GetSubscriptionState",
            "shield:DescribeProtection", "shield:CreateProtection", "shield:DeleteProtection"]),
        s(sid="SecurityGroupIngress", resources=["*"],
          actions=["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]),
        s(sid="CreateSecurityGroup", resources=["*"], actions=["ec2:CreateSecurityGroup"]),
        s(sid="TagNewSecurityGroup", actions=["ec2:CreateTags"], resources=[sg_arn],
          conditions={"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"},
                      "Null": {cluster_tag_request: "false"}}),
        s(sid="RetagOwnSecurityGroup", actions=["ec2:CreateTags", "ec2:DeleteTags"], resources=[sg_arn],
          conditions={"Null": {cluster_tag_request: "true", cluster_tag_resource: "false"}}),
        s(sid="ManageOwnSecurityGroup", resources=["*"],
          actions=["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
                   "ec2:DeleteSecurityGroup"],
          conditions={"Null": {cluster_tag_resource: "false"}}),
        s(sid="CreateTaggedLoadBalancer", resources=["*"],
          actions=["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
          conditions={"Null": {cluster_tag_request: "false"}}),
        s(sid="ManageListenersAndRules", resources=["*"], actions=[
            "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule"]),
        s(sid="RetagOwnLoadBalancer", resources=lb_arns,
          actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
          conditions={"Null": {cluster_tag_request: "true", cluster_tag_resource: "false"}}),
        s(sid="TagListenersAndRules", actions=["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
          resources=[f"arn:{p}:elasticloadbalancing:*:*:listener/net/*/*/*",
                     f"arn:{p}:elasticloadbalancing:*:*:listener/app/*/*/*",
                     f"arn:{p}:elasticloadbalancing:*:*:listener-rule/net/*/*/*",
                     f"arn:{p}:elasticloadbalancing:*:*:listener-rule/app/*/*/*"]),
        s(sid="ManageOwnLoadBalancer", resources=["*"], actions=[
            "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
            "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
            "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:ModifyListenerAttributes", "elasticloadbalancing:ModifyCapacityReservation",
            "elasticloadbalancing:ModifyIpPools"],
          conditions={"Null": {cluster_tag_resource: "false"}}),
        s(sid="TagOnCreate", actions=["elasticloadbalancing:AddTags"], resources=lb_arns,
          conditions={"StringEquals": {"elasticloadbalancing:CreateAction": ["CreateTargetGroup",
                                                                            "CreateLoadBalancer"]},
                      "Null": {cluster_tag_request: "false"}}),
        s(sid="RegisterTargets", resources=[f"arn:{p}:elasticloadbalancing:*:*:targetgroup/*/*"],
          actions=["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"]),
        s(sid="ModifyListenersAndRules", resources=["*"], actions=[
            "elasticloadbalancing:SetWebAcl", "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:AddListenerCertificates", "elasticloadbalancing:RemoveListenerCertificates",
            "elasticloadbalancing:ModifyRule", "elasticloadbalancing:SetRulePriorities"]),
    ]


