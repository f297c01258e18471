"""The platform stack alone (root conftest ``platform_alone``: explicit props, the stand-ins of
tests/infra/stand_ins.py): model and infra buckets, the operator add-on and its dependencies, outputs. Its
variants: test_platform_variants.py; what the default config and the other stacks hand it: test_platform_app.py."""

from __future__ import annotations

import json

import pytest
from tests.infra import stand_ins

from hyperpod_core import outputs, pins

OPERATOR = "amazon-sagemaker-hyperpod-inference"
DEPENDENCIES = ("aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "metrics-server", "cert-manager")


def _addons(template) -> dict[str, tuple[str, dict]]:
    return {r["Properties"]["AddonName"]: (lid, r)
            for lid, r in template.find_resources("AWS::EKS::Addon").items()}


def _bucket(template, logical_prefix: str) -> tuple[str, dict]:
    found = {k: v for k, v in template.find_resources("AWS::S3::Bucket").items() if k.startswith(logical_prefix)}
    assert len(found) == 1, found.keys()
    return next(iter(found.items()))


# --- model bucket --------------------------------------------------------------------------------------

def test_model_bucket_is_sse_kms_with_rotating_key(platform) -> None:
    _, bucket = _bucket(platform, "ModelBucket")
    enc = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert enc["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert enc["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == {"Fn::GetAtt": ["ModelKeyE265A28C", "Arn"]}
    assert enc["BucketKeyEnabled"] is True
    platform.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_model_bucket_versioned_private_logged_and_aborts_uploads(platform) -> None:
    _, bucket = _bucket(platform, "ModelBucket")
    p = bucket["Properties"]
    assert p["VersioningConfiguration"] == {"Status": "Enabled"}
    assert p["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert p["LoggingConfiguration"] == {"DestinationBucketName": {"Ref": "AccessLogsBucketCD784A59"},
                                         "LogFilePrefix": "model-bucket/"}
    assert p["LifecycleConfiguration"]["Rules"] == [
        {"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}, "Id": "AbortIncompleteMultipartUploads",
         "Status": "Enabled"}]
    assert "BucketName" not in p  # default: CloudFormation-generated name


@pytest.mark.parametrize("prefix", ["ModelBucket", "TlsCertificatesBucket", "AccessLogsBucket"])
def test_every_bucket_denies_plain_http(platform, prefix: str) -> None:
    lid, _ = _bucket(platform, prefix)
    policies = [p for p in platform.find_resources("AWS::S3::BucketPolicy").values()
                if p["Properties"]["Bucket"] == {"Ref": lid}]
    assert len(policies) == 1
    deny = [s for s in policies[0]["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny and deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny[0]["Action"] == "s3:*"


def test_model_bucket_and_key_are_retained_by_default(platform) -> None:
    _, bucket = _bucket(platform, "ModelBucket")
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    key = platform.find_resources("AWS::KMS::Key")["ModelKeyE265A28C"]
    assert key["DeletionPolicy"] == "Retain"
    auto_deleted = {r["Properties"]["BucketName"]["Ref"]
                    for r in platform.find_resources("Custom::S3AutoDeleteObjects").values()}
    assert not any(b.startswith("ModelBucket") for b in auto_deleted)


def test_access_log_bucket_is_kept_with_the_model_bucket(platform) -> None:
    _, logs = _bucket(platform, "AccessLogsBucket")
    assert logs["DeletionPolicy"] == "Retain"


def _policy_of(template, bucket_logical_id: str) -> dict:
    (policy,) = [p for p in template.find_resources("AWS::S3::BucketPolicy").values()
                 if p["Properties"]["Bucket"] == {"Ref": bucket_logical_id}]
    return policy


@pytest.mark.parametrize(("prefix", "kept"), [
    ("ModelBucket", "Retain"), ("AccessLogsBucket", "Retain"), ("TlsCertificatesBucket", "Delete")])
def test_a_bucket_policy_is_kept_exactly_when_its_bucket_is(platform, prefix: str, kept: str) -> None:
    """Fails on main, where the kept buckets' policies had no DeletionPolicy: CloudFormation deletes such a resource
    with its stack (User Guide, "DeletionPolicy attribute": "If a resource has no DeletionPolicy attribute, AWS
    CloudFormation deletes the resource by default"), so the kept model bucket lost its aws:SecureTransport deny and
    the kept log bucket the statements that let S3 deliver the model bucket's access logs, which for a bucket with
    the bucket owner enforced setting "can only be granted using policies" (S3 API Reference, PutBucketLogging)."""
    lid, bucket = _bucket(platform, prefix)
    policy = _policy_of(platform, lid)
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == (kept, kept)
    assert (policy.get("DeletionPolicy"), policy.get("UpdateReplacePolicy")) == (kept, kept)


def test_access_log_bucket_is_versioned_and_expires(platform) -> None:
    """An audit trail that cannot be overwritten unnoticed and does not grow forever (issue 11; checkov
    CKV_AWS_21 asks for versioning)."""
    _, logs = _bucket(platform, "AccessLogsBucket")
    p = logs["Properties"]
    assert p["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in p["LifecycleConfiguration"]["Rules"]}
    assert rules["ExpireObjects"]["ExpirationInDays"] == 365
    assert rules["ExpireNoncurrentVersions"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 30}


def test_tls_bucket_is_emptied_and_deleted_on_destroy(platform) -> None:
    lid, tls = _bucket(platform, "TlsCertificatesBucket")
    assert tls["DeletionPolicy"] == "Delete"
    assert tls["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert tls["Properties"]["LoggingConfiguration"]["LogFilePrefix"] == "tls-certificates/"
    platform.has_resource_properties("Custom::S3AutoDeleteObjects", {"BucketName": {"Ref": lid}})


# --- add-ons -------------------------------------------------------------------------------------------

def test_operator_and_dependencies_are_pinned_from_the_pin_module(platform) -> None:
    addons = _addons(platform)
    expected = {p.name: p.version for p in (pins.INFERENCE_OPERATOR, pins.S3_CSI, pins.FSX_CSI,
                                            pins.METRICS_SERVER, pins.CERT_MANAGER)}
    assert {name: r["Properties"]["AddonVersion"] for name, (_, r) in addons.items()} == expected


def test_operator_pin_has_dpd() -> None:
    major, minor = (int(x) for x in pins.INFERENCE_OPERATOR.version.removeprefix("v").split(".")[:2])
    # add-on v1.3.0 = operator v3.2 (pdSpec); v1.4.0 = v3.3 (modelCacheConfig, idleTimeoutSeconds): release notes
    assert (major, minor) >= (1, 4), "add-on v1.4.0 = operator v3.3, whose fields the manifests set"


def test_operator_is_installed_after_every_dependency(platform) -> None:
    addons = _addons(platform)
    operator_lid, operator = addons[OPERATOR]
    assert set(operator["DependsOn"]) >= {addons[d][0] for d in DEPENDENCIES}
    for name in DEPENDENCIES:
        assert operator_lid not in addons[name][1].get("DependsOn", [])


def test_only_the_s3_csi_driver_gets_a_role(platform) -> None:
    addons = _addons(platform)
    assert addons["aws-mountpoint-s3-csi-driver"][1]["Properties"]["ServiceAccountRoleArn"] == {
        "Fn::GetAtt": ["InferenceIamS3CsiRole0E5B79C4", "Arn"]}
    for name in ("aws-fsx-csi-driver", "metrics-server", "cert-manager", OPERATOR):
        assert "ServiceAccountRoleArn" not in addons[name][1]["Properties"]


def _configuration(platform) -> dict:
    """configurationValues with each token (always inside a JSON string) replaced by its logical ID."""
    parts = _addons(platform)[OPERATOR][1]["Properties"]["ConfigurationValues"]["Fn::Join"][1]

    def name(token: dict) -> str:
        return token["Ref"] if "Ref" in token else token["Fn::GetAtt"][0]

    return json.loads("".join(p if isinstance(p, str) else name(p) for p in parts))


def test_operator_configuration_values(platform) -> None:
    cfg = _configuration(platform)
    assert set(cfg) == {"executionRoleArn", "tlsCertificateS3Bucket", "hyperpodClusterArn", "alb", "keda"}
    assert "InferenceIamExecutionRole6504C577" in cfg["executionRoleArn"]
    assert "TlsCertificatesBucket830516A0" in cfg["tlsCertificateS3Bucket"]
    assert cfg["hyperpodClusterArn"] == stand_ins.HYPERPOD_CLUSTER_ARN
    assert cfg["alb"]["enabled"] is True and cfg["alb"]["serviceAccount"]["create"] is True
    assert "InferenceIamAlbControllerRole" in cfg["alb"]["serviceAccount"]["roleArn"]
    irsa = cfg["keda"]["auth"]["aws"]["irsa"]
    assert cfg["keda"]["enabled"] is True and irsa["enabled"] is True
    assert "InferenceIamKedaRole" in irsa["roleArn"]


def test_every_addon_targets_the_cluster_and_overwrites_conflicts(platform) -> None:
    for _, r in _addons(platform).values():
        assert r["Properties"]["ClusterName"] == stand_ins.CLUSTER_NAME
        assert r["Properties"]["ResolveConflicts"] == "OVERWRITE"


# --- outputs -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("output_id", [
    outputs.MODEL_BUCKET_NAME, outputs.TLS_BUCKET_NAME, outputs.INFERENCE_EXECUTION_ROLE_ARN,
    outputs.KEDA_ROLE_ARN])
def test_platform_emits_output(platform, output_id: str) -> None:
    assert output_id in platform.find_outputs("*")


def test_model_bucket_output_is_the_created_bucket(platform) -> None:
    assert platform.find_outputs(outputs.MODEL_BUCKET_NAME)[outputs.MODEL_BUCKET_NAME]["Value"] == {
        "Ref": "ModelBucket24FA8CA2"}


# --- clean destroy -------------------------------------------------------------------------------------

def test_janitor_is_deleted_before_the_operator_and_its_dependencies(platform) -> None:
    """CloudFormation deletes in reverse dependency order: the janitor must depend on every add-on."""
    (janitor,) = platform.find_resources("Custom::HyperPodEndpointJanitor").values()
    addon_ids = set(platform.find_resources("AWS::EKS::Addon"))
    assert addon_ids <= set(janitor["DependsOn"])
    roles = {k for k in platform.find_resources("AWS::IAM::Role") if k.startswith("InferenceIam")}
    assert roles <= set(janitor["DependsOn"])
