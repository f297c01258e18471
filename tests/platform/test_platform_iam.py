"""Every IAM role of the platform and observability add-on stacks alone (root conftest ``platform_alone``: the
stand-ins of tests/infra/stand_ins.py), statement by statement."""

from __future__ import annotations

import json

import pytest
from tests.infra import stand_ins

from hyperpod_constructs.inference_iam import load_balancer_controller_statements


def _role(template, prefix: str) -> dict:
    found = [r for k, r in template.find_resources("AWS::IAM::Role").items() if k.startswith(prefix)]
    assert len(found) == 1, prefix
    return found[0]["Properties"]


def _policy(template, prefix: str) -> list[dict]:
    found = [r for k, r in template.find_resources("AWS::IAM::Policy").items() if k.startswith(prefix)]
    assert len(found) == 1, prefix
    return found[0]["Properties"]["PolicyDocument"]["Statement"]


def _by_sid(statements: list[dict]) -> dict[str, dict]:
    """Statements by Sid, action lists sorted (their order has no meaning)."""
    return {s["Sid"]: {**s, "Action": sorted(s["Action"])} if isinstance(s["Action"], list) else s
            for s in statements}


def _irsa_conditions(template, trust_prefix: str) -> dict:
    found = [r for k, r in template.find_resources("Custom::AWSCDKCfnJson").items() if k.startswith(trust_prefix)]
    assert len(found) == 1
    return found[0]["Properties"]["Value"]


#: The issuer of the stand-in OIDC provider (its ARN after ``oidc-provider/``), the key prefix of the conditions.
ISSUER = stand_ins.OIDC_PROVIDER_ARN.split(":oidc-provider/")[1]


def _assert_irsa_trust(template, role_prefix: str, trust_prefix: str, subject: str) -> None:
    trust = _role(template, role_prefix)["AssumeRolePolicyDocument"]["Statement"]
    web = [s for s in trust if s["Action"] == "sts:AssumeRoleWithWebIdentity"]
    assert len(web) == 1
    assert web[0]["Principal"] == {"Federated": stand_ins.OIDC_PROVIDER_ARN}
    assert web[0]["Condition"] == {"StringEquals": {"Fn::GetAtt": [
        next(k for k in template.find_resources("Custom::AWSCDKCfnJson") if k.startswith(trust_prefix)), "Value"]}}
    assert json.loads(_irsa_conditions(template, trust_prefix)) == {
        f"{ISSUER}:sub": subject, f"{ISSUER}:aud": "sts.amazonaws.com"}


# --- operator execution role ---------------------------------------------------------------------------

def test_execution_role_name_has_the_prefix_the_managed_policy_passes(platform) -> None:
    name = _role(platform, "InferenceIamExecutionRole")["RoleName"]
    assert name["Fn::Join"][0] == "-" and name["Fn::Join"][1][0] == "SageMakerHyperPodInference"


def test_execution_role_trusts_sagemaker_and_the_operator_service_account(platform) -> None:
    trust = _role(platform, "InferenceIamExecutionRole")["AssumeRolePolicyDocument"]["Statement"]
    # Unconditioned, as AWS's template (aws/sagemaker-hyperpod-cluster-setup @ a9933ba98c1b43bb6b9f680da36de7a4e178930a,
    # eks/cloudformation/inference-addon-iam-roles-template.yaml, InferenceOperatorExecutionRole) and the
    # troubleshooting page sagemaker-hyperpod-model-deployment-ts-trust write it: no page shows SageMaker
    # sending aws:SourceAccount/aws:SourceArn for this role, and an unsent key makes the role unassumable.
    assert {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}} in trust
    assert len(trust) == 2
    _assert_irsa_trust(platform, "InferenceIamExecutionRole", "InferenceIamExecutionRoleTrust",
                       "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-controller-manager")


def test_execution_role_has_only_the_inference_managed_policy(platform) -> None:
    assert _role(platform, "InferenceIamExecutionRole")["ManagedPolicyArns"] == [{"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess"]]}]


def test_execution_role_inline_statements(platform) -> None:
    statements = _policy(platform, "InferenceIamExecutionRolePolicy")
    assert _by_sid(statements) == {
        "PassSelfToSageMaker": {
            "Sid": "PassSelfToSageMaker", "Effect": "Allow", "Action": "iam:PassRole",
            "Resource": {"Fn::GetAtt": ["InferenceIamExecutionRole6504C577", "Arn"]},
            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}},
        "TlsCertificatesBucketObjects": {
            "Sid": "TlsCertificatesBucketObjects", "Effect": "Allow",
            "Action": ["s3:DeleteObject", "s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"],
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": ["TlsCertificatesBucket830516A0", "Arn"]}, "/*"]]}},
    }


# --- KEDA ----------------------------------------------------------------------------------------------

def test_keda_role_trusts_only_the_keda_operator(platform) -> None:
    _assert_irsa_trust(platform, "InferenceIamKedaRole", "InferenceIamKedaTrust",
                       "system:serviceaccount:hyperpod-inference-system:keda-operator")
    assert len(_role(platform, "InferenceIamKedaRole")["AssumeRolePolicyDocument"]["Statement"]) == 1
    assert "ManagedPolicyArns" not in _role(platform, "InferenceIamKedaRole")


def test_keda_queries_only_our_workspace(platform, platform_alone) -> None:
    """The autoscaling triggers are Prometheus queries only: no CloudWatch permissions (issue 11)."""
    statements = _by_sid(_policy(platform, "InferenceIamKedaPolicy"))
    resource = statements["PrometheusTriggers"].pop("Resource")
    assert statements == {
        "PrometheusTriggers": {
            "Sid": "PrometheusTriggers", "Effect": "Allow",
            "Action": ["aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics"]},
    }
    assert stand_ins.given_workspace_attribute(platform_alone["Given"].template, resource) == "Arn"


# --- ALB controller ------------------------------------------------------------------------------------

def test_alb_controller_role_trusts_only_its_service_account(platform) -> None:
    _assert_irsa_trust(platform, "InferenceIamAlbControllerRole", "InferenceIamAlbControllerTrust",
                       "system:serviceaccount:hyperpod-inference-system:aws-load-balancer-controller")


def test_alb_controller_policy_is_the_published_controller_policy(platform, platform_alone) -> None:
    statements = _by_sid(_policy(platform, "InferenceIamAlbControllerPolicy"))
    assert list(statements) == [s.sid for s in load_balancer_controller_statements(vpc_arn="arn:aws:ec2:::vpc/x")]
    assert statements["CreateElbServiceLinkedRole"]["Condition"] == {
        "StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}
    # Every mutating statement on existing resources is bound to the controller's cluster tag.
    assert statements["SecurityGroupIngress"]["Condition"] == {"ArnEquals": {"ec2:Vpc": stand_ins.arn(
        platform_alone["Platform"].stack, "ec2", "vpc", stand_ins.VPC_ID)}}
    for sid in ("ManageOwnSecurityGroup", "ManageOwnLoadBalancer"):
        assert statements[sid]["Condition"] == {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}
    for sid in ("CreateTaggedLoadBalancer",):
        assert statements[sid]["Condition"] == {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}
    assert statements["TagNewSecurityGroup"]["Condition"]["StringEquals"] == {
        "ec2:CreateAction": "CreateSecurityGroup"}
    actions = {a for s in statements.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") for a in actions), "no wildcard actions"
    assert not any(a.startswith(("s3:", "iam:PassRole", "sts:")) for a in actions)


# --- S3 CSI --------------------------------------------------------------------------------------------

def test_s3_csi_role_trusts_only_the_driver_service_account(platform) -> None:
    _assert_irsa_trust(platform, "InferenceIamS3CsiRole", "InferenceIamS3CsiTrust",
                       "system:serviceaccount:kube-system:s3-csi-driver-sa")


def test_s3_csi_reads_only_the_model_prefix(platform) -> None:
    """Objects below model.s3_prefix only, as its acknowledgement says (issue 11: it read the whole bucket);
    the listing of the one model bucket has no s3:prefix condition, which a mount of the bucket or a parent
    prefix would trip (AWS's S3 CSI role, inference-addon-iam-roles-template.yaml MountpointFullBucketAccess:
    ListBucket with no condition)."""
    bucket_arn = {"Fn::GetAtt": ["ModelBucket24FA8CA2", "Arn"]}
    assert _by_sid(_policy(platform, "InferenceIamS3CsiPolicy")) == {
        "ListModelBucket": {"Sid": "ListModelBucket", "Effect": "Allow", "Action": "s3:ListBucket",
                            "Resource": bucket_arn},
        "ReadModelObjects": {"Sid": "ReadModelObjects", "Effect": "Allow", "Action": "s3:GetObject",
                             "Resource": {"Fn::Join": ["", [bucket_arn, "/models/m/*"]]}},
        "DecryptModelObjects": {"Sid": "DecryptModelObjects", "Effect": "Allow", "Action": "kms:Decrypt",
                                "Resource": {"Fn::GetAtt": ["ModelKeyE265A28C", "Arn"]}},
    }


# --- HyperPod nodes ------------------------------------------------------------------------------------

def test_hyperpod_role_reads_the_model_prefix_and_decrypts(platform) -> None:
    policy = [r for r in platform.find_resources("AWS::IAM::Policy").values()
              if r["Properties"]["PolicyName"].startswith("HyperPodExecutionRoleModelRead")]
    assert len(policy) == 1
    p = policy[0]["Properties"]
    assert p["Roles"] == [stand_ins.HYPERPOD_ROLE_NAME]
    statements = _by_sid(p["PolicyDocument"]["Statement"])
    assert statements["ListModelBucket"]["Condition"] == {"StringLike": {"s3:prefix": ["models/m/*"]}}
    assert statements["ReadModelObjects"]["Resource"] == {"Fn::Join": ["", [
        {"Fn::GetAtt": ["ModelBucket24FA8CA2", "Arn"]}, "/models/m/*"]]}
    assert statements["DecryptModelObjects"] == {
        "Sid": "DecryptModelObjects", "Effect": "Allow", "Action": "kms:Decrypt",
        "Resource": {"Fn::GetAtt": ["ModelKeyE265A28C", "Arn"]}}


def test_every_staged_revision_is_inside_what_the_model_readers_may_read(platform) -> None:
    """stage-model puts each revision under its own ``<model.s3_prefix>sha256-<16 hex>/``
    (hyperpod_core.staged_model.weights_prefix): the readers' ``s3:prefix`` condition and object ARN (IAM
    ``StringLike`` and resource ARNs match ``*`` across '/', IAM User Guide, "IAM JSON policy elements: Resource")
    cover it, its manifest and its shards, with no statement per revision."""
    import fnmatch

    from hyperpod_core import staged_model

    policy = [r for r in platform.find_resources("AWS::IAM::Policy").values()
              if r["Properties"]["PolicyName"].startswith("HyperPodExecutionRoleModelRead")]
    statements = _by_sid(policy[0]["Properties"]["PolicyDocument"]["Statement"])
    (list_prefix,) = statements["ListModelBucket"]["Condition"]["StringLike"]["s3:prefix"]
    object_pattern = statements["ReadModelObjects"]["Resource"]["Fn::Join"][1][1].removeprefix("/")
    location = staged_model.weights_prefix("models/m/", staged_model.revision_of(b"manifest"), configured=False)
    for key in (location, location + "hyperpod-dpd-manifest.json", location + "model-00001-of-00030.safetensors"):
        assert fnmatch.fnmatchcase(key, list_prefix) and fnmatch.fnmatchcase(key, object_pattern), key


def test_no_role_or_policy_grants_admin_or_wildcard_s3(platform, observability, observability_addon) -> None:
    for template in (platform, observability, observability_addon):
        for r in template.find_resources("AWS::IAM::Policy").values():
            for s in r["Properties"]["PolicyDocument"]["Statement"]:
                actions = [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
                assert "*" not in actions and not any(a in ("s3:*", "iam:*", "kms:*") for a in actions)


# --- observability collector ---------------------------------------------------------------------------

def test_collector_role_trusts_pod_identity_for_this_cluster_only(observability_addon, platform_alone) -> None:
    trust = _role(observability_addon, "HyperPodObservabilityCollectorRole")["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [{
        "Action": ["sts:AssumeRole", "sts:TagSession"], "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Condition": {"StringEquals": {
            "aws:SourceAccount": {"Ref": "AWS::AccountId"},
            "aws:SourceArn": stand_ins.arn(platform_alone["ObservabilityAddon"].stack, "eks", "cluster",
                                           stand_ins.CLUSTER_NAME)}}}]


def test_collector_writes_only_our_workspace_and_cluster_logs(observability_addon, platform_alone) -> None:
    statements = _by_sid(_policy(observability_addon, "HyperPodObservabilityCollectorPolicy"))
    write = statements["PrometheusRemoteWrite"]
    assert stand_ins.given_workspace_attribute(platform_alone["Given"].template, write.pop("Resource")) == "Arn"
    assert write == {"Sid": "PrometheusRemoteWrite", "Effect": "Allow", "Action": "aps:RemoteWrite"}
    logs = statements["ClusterLogs"]
    assert all(a.startswith("logs:") for a in logs["Action"])
    rendered = [r["Fn::Join"][1][-1] for r in logs["Resource"]]
    assert rendered == [":log-group:/aws/sagemaker/Clusters/*", ":log-group:/aws/sagemaker/Clusters/*:log-stream:*"]
    assert set(statements) == {"PrometheusRemoteWrite", "ClusterLogs"}


@pytest.mark.parametrize("name", ["SageMakerHyperPodInferenceX", "Other-role"])
def test_fails_when_execution_role_name_lacks_the_prefix(name: str) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from hyperpod_constructs.inference_iam import InferenceIam, InferenceIamProps

    stack = cdk.Stack(cdk.App())
    oidc = eks.OidcProviderNative(stack, "Oidc", url="https://oidc.eks.us-west-2.amazonaws.com/id/X")
    props = InferenceIamProps(oidc_provider=oidc, tls_certificates_bucket=s3.Bucket(stack, "B"),
                              model_read_statements=(iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"]),),
                              vpc_arn="arn:aws:ec2:us-west-2:111122223333:vpc/vpc-1", execution_role_name=name,
                              operator_namespace="hyperpod-inference-system")
    if name.startswith("SageMakerHyperPodInference"):
        InferenceIam(stack, "Ok", props=props)
    else:
        with pytest.raises(ValueError, match="execution_role_name must start with 'SageMakerHyperPodInference'"):
            InferenceIam(stack, "Iam", props=props)
