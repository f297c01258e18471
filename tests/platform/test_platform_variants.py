"""Variants of the platform stack alone (one app, one synth: an existing bucket, a bucket deleted on destroy,
both without a workspace) and the validation rules of its constructs. cdk-nag on the platform stacks of every
config, these variants included (reserved-b200: an existing bucket; kvaware: delete on destroy):
tests/infra/test_validation.py."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.model_bucket import ModelBucketProps
from hyperpod_core import outputs


@pytest.fixture(scope="module")
def variants() -> dict[str, Template]:
    app = stand_ins.app()
    given = stand_ins.given(app)
    built = {
        "ExistingBucket": stand_ins.platform_stack(app, "ExistingBucket", given=given, observability=False,
                                                   model_bucket=ModelBucketProps(existing_bucket_name="my-weights")),
        "DeleteOnDestroy": stand_ins.platform_stack(app, "DeleteOnDestroy", given=given, observability=False,
                                                    model_bucket=ModelBucketProps(
                                                        delete_on_destroy=True, bucket_name="dpd-models-example")),
    }
    return {name: Template.from_stack(stack) for name, stack in built.items()}


@pytest.fixture(scope="module")
def existing_bucket(variants) -> Template:
    return variants["ExistingBucket"]


@pytest.fixture(scope="module")
def delete_on_destroy(variants) -> Template:
    return variants["DeleteOnDestroy"]


def test_existing_bucket_creates_no_model_bucket_or_key(existing_bucket) -> None:
    t = existing_bucket
    assert not any(k.startswith("ModelBucket") for k in t.find_resources("AWS::S3::Bucket"))
    assert t.find_resources("AWS::KMS::Key") == {}
    assert t.find_outputs(outputs.MODEL_BUCKET_NAME)[outputs.MODEL_BUCKET_NAME]["Value"] == "my-weights"
    assert t.find_outputs(outputs.MODEL_BUCKET_KEY_ARN) == {}, "no key named: no key to output"


def test_existing_bucket_scopes_s3_csi_to_that_bucket(existing_bucket) -> None:
    t = existing_bucket
    (doc,) = [r["Properties"]["PolicyDocument"] for k, r in t.find_resources("AWS::IAM::Policy").items()
              if k.startswith("InferenceIamS3CsiPolicy")]
    rendered = json.dumps(doc)
    assert ":s3:::my-weights" in rendered and ":s3:::my-weights/models/m/*" in rendered
    assert "kms:" not in rendered


def test_existing_bucket_means_access_logs_are_not_kept(existing_bucket) -> None:
    t = existing_bucket
    (logs,) = [r for k, r in t.find_resources("AWS::S3::Bucket").items() if k.startswith("AccessLogs")]
    assert logs["DeletionPolicy"] == "Delete"


def test_observability_off_keda_gets_no_policy(existing_bucket) -> None:
    t = existing_bucket
    assert not [k for k in t.find_resources("AWS::IAM::Policy") if k.startswith("InferenceIamKedaPolicy")]


def test_delete_on_destroy_empties_and_deletes_bucket_key_and_logs(delete_on_destroy) -> None:
    t = delete_on_destroy
    buckets = t.find_resources("AWS::S3::Bucket")
    assert all(b["DeletionPolicy"] == "Delete" for b in buckets.values())
    assert all(k["DeletionPolicy"] == "Delete" for k in t.find_resources("AWS::KMS::Key").values())
    emptied = {r["Properties"]["BucketName"]["Ref"] for r in t.find_resources("Custom::S3AutoDeleteObjects").values()}
    assert emptied == set(buckets)


def test_delete_on_destroy_deletes_the_bucket_policies_with_their_buckets(delete_on_destroy) -> None:
    """The other half of test_platform_stack.py's kept-policy test: a bucket that goes takes its policy along
    (``DeletionPolicy``/``UpdateReplacePolicy`` Delete, as the bucket's)."""
    t = delete_on_destroy
    policies = t.find_resources("AWS::S3::BucketPolicy")
    assert {p["Properties"]["Bucket"]["Ref"] for p in policies.values()} == set(t.find_resources("AWS::S3::Bucket"))
    assert {(p.get("DeletionPolicy"), p.get("UpdateReplacePolicy")) for p in policies.values()} == {
        ("Delete", "Delete")}


def test_explicit_bucket_name_is_used(delete_on_destroy) -> None:
    t = delete_on_destroy
    t.has_resource_properties("AWS::S3::Bucket", {"BucketName": "dpd-models-example"})


# --- construct validation (one test per rule) ----------------------------------------------------------

def _stack():
    import aws_cdk as cdk

    return cdk.Stack(cdk.App())


def test_fails_when_existing_bucket_and_bucket_name_are_both_set() -> None:
    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps

    with pytest.raises(ValueError, match="bucket_name must be unset when existing_bucket_name is set"):
        ModelBucket(_stack(), "M", props=ModelBucketProps(existing_bucket_name="a-b-c", bucket_name="x-y-z"))


def test_fails_when_existing_bucket_would_be_deleted() -> None:
    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps

    with pytest.raises(ValueError, match="delete_on_destroy must be false for an existing bucket"):
        ModelBucket(_stack(), "M", props=ModelBucketProps(existing_bucket_name="a-b-c", delete_on_destroy=True))


def test_fails_when_created_bucket_has_no_access_log_target() -> None:
    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps

    with pytest.raises(ValueError, match="server_access_logs_bucket is required"):
        ModelBucket(_stack(), "M", props=ModelBucketProps())


@pytest.mark.parametrize("version", ["v1.3.0-eksbuild.1", "v1.2.0-eksbuild.1", "v1.0.0-eksbuild.1", "latest"])
def test_fails_when_operator_version_predates_dpd(version: str) -> None:
    from hyperpod_constructs.inference_operator import _check_operator_version

    with pytest.raises(ValueError, match=r"versions\.operator"):
        _check_operator_version(version)


def test_fails_when_workspace_alias_is_empty() -> None:
    from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps

    with pytest.raises(ValueError, match="alias must be 1-100 characters"):
        ManagedPrometheus(_stack(), "P", props=ManagedPrometheusProps(alias=""))
