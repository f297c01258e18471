"""InfraBucket alone (a bare stack): encrypted, private, TLS-only, and with ``versioned`` or ``retain_on_destroy``
what those promise."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.infra_bucket import InfraBucket, InfraBucketProps


@pytest.fixture(scope="module")
def templates() -> dict[str, Any]:
    """``plain``: the defaults; ``kept``: versioned and retained on destroy."""
    app = stand_ins.app()
    stacks = {name: stand_ins.stack(app, name) for name in ("plain", "kept")}
    InfraBucket(stacks["plain"], "Bucket", props=InfraBucketProps())
    InfraBucket(stacks["kept"], "Bucket", props=InfraBucketProps(versioned=True, retain_on_destroy=True))
    return {name: Template.from_stack(stack).to_json()["Resources"] for name, stack in stacks.items()}


def _only(resources: dict[str, Any], resource_type: str) -> dict[str, Any]:
    (found,) = [r for r in resources.values() if r["Type"] == resource_type]
    return found


def test_encrypted_private_and_tls_only(templates: dict[str, Any]) -> None:
    bucket = _only(templates["plain"], "AWS::S3::Bucket")["Properties"]
    # SSE-S3 (AWS::S3::Bucket ServerSideEncryptionByDefault: SSEAlgorithm AES256) and all four public-access
    # blocks (Security Hub S3.8).
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    # S3 User Guide, "Enforce encryption in transit" / Security Hub S3.5: deny every request with
    # aws:SecureTransport false, on the bucket and its objects.
    statements = _only(templates["plain"], "AWS::S3::BucketPolicy")["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert (deny["Action"], deny["Principal"], deny["Condition"]) == (
        "s3:*", {"AWS": "*"}, {"Bool": {"aws:SecureTransport": "false"}})
    assert len(deny["Resource"]) == 2


def test_versioned_and_retained_keeps_versions_the_bucket_and_its_policy(templates: dict[str, Any]) -> None:
    bucket = _only(templates["kept"], "AWS::S3::Bucket")
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert {"Id": "ExpireNoncurrentVersions", "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
            "Status": "Enabled"} in bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    policy = _only(templates["kept"], "AWS::S3::BucketPolicy")
    # A kept bucket keeps its TLS-only policy too (CloudFormation deletes a resource without DeletionPolicy).
    assert [(r["DeletionPolicy"], r["UpdateReplacePolicy"]) for r in (bucket, policy)] == [("Retain", "Retain")] * 2
    assert not [r for r in templates["kept"].values() if r["Type"] == "Custom::S3AutoDeleteObjects"]
    assert [r["DeletionPolicy"] for r in templates["plain"].values() if r["Type"].startswith("AWS::S3::")] == [
        "Delete", "Delete"]
