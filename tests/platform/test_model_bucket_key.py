"""The model bucket's key reaches every reader of the weights (issue 30, item 3: a kept bucket is reusable).

A bucket this project created is SSE-KMS with its own key; after a destroy keeps it, the next deployment names it
with ``model_bucket.existing_name`` and its key with ``existing_kms_key_arn``. The weights are then readable only
if every reader's policy allows ``kms:Decrypt`` on that key: S3 decrypts an SSE-KMS object for a GET only when the
caller may use the key (Amazon S3 User Guide, "Using server-side encryption with AWS KMS keys (SSE-KMS)": to
download an object encrypted with a KMS key you need ``kms:Decrypt`` on it), and an IAM policy names a key by its
key ARN only (KMS Developer Guide, "Specifying KMS keys in IAM policy statements"). moto serves an SSE-KMS object
without checking ``kms:Decrypt``, so a read test would pass either way: the policies are what is tested.

The readers are built as constructs in a bare stack (ModelBucket, the S3 CSI driver's policy in InferenceIam, the
benchmark Jobs' identity and a node policy from the same statements); the whole-app fact (every reader policy of
every matrix config decrypts with exactly the bucket's key) reads the config matrix's templates.
"""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_core import outputs

#: A key ARN as the KMS Developer Guide writes one ("Key identifiers (KeyId)").
KEY_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
BUCKET = "kept-models"
PREFIX = "models/m/"


def _list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _reader_policies(template: dict) -> dict[str, list[dict]]:
    """Every ``AWS::IAM::Policy`` that reads the model objects (``ModelBucket.read_statements``: the statement
    ``ReadModelObjects``), by logical ID, with its statements."""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        if any(st.get("Sid") == "ReadModelObjects" for st in statements):
            found[logical_id] = statements
    return found


def _kms_grants(statements: list[dict]) -> list[tuple[list[str], list[Any]]]:
    """``(actions, resources)`` of every statement that allows a KMS action."""
    return [(_list(st["Action"]), _list(st["Resource"])) for st in statements
            if any(a.startswith("kms:") for a in _list(st["Action"]))]


@pytest.fixture(scope="module")
def readers() -> dict:
    """ModelBucket for a kept bucket and its key, and the readers built from its statements, in a bare stack."""
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from hyperpod_constructs.benchmark_client_identity import BenchmarkClientIdentity, BenchmarkClientIdentityProps
    from hyperpod_constructs.inference_iam import InferenceIam, InferenceIamProps
    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps, ModelReadLocation

    stack = cdk.Stack(cdk.App(), "Readers", env=cdk.Environment(region="us-west-2"))
    model = ModelBucket(stack, "Model", props=ModelBucketProps(existing_bucket_name=BUCKET,
                                                                existing_kms_key_arn=KEY_ARN))
    statements = tuple(model.read_statements((ModelReadLocation(key_prefix=PREFIX),)))
    oidc = iam.OpenIdConnectProvider.from_open_id_connect_provider_arn(
        stack, "Oidc", "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE")
    InferenceIam(stack, "InferenceIam", props=InferenceIamProps(
        oidc_provider=oidc, tls_certificates_bucket=s3.Bucket(stack, "Tls"), model_read_statements=statements,
        vpc_arn="arn:aws:ec2:us-west-2:111122223333:vpc/vpc-0example", operator_namespace="hyperpod-inference-system"))
    BenchmarkClientIdentity(stack, "BenchmarkClient", props=BenchmarkClientIdentityProps(
        cluster=eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="dpd-eks"), namespace="default",
        service_account="bench", model_read_statements=statements))
    nodes = iam.Role(stack, "Nodes", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    iam.Policy(stack, "NodesModelRead", roles=[nodes], statements=list(statements))
    return {"model": model, "template": cdk.assertions.Template.from_stack(stack).to_json()}


def test_every_reader_of_a_kept_bucket_may_decrypt_with_exactly_its_key(readers) -> None:
    policies = _reader_policies(readers["template"])
    for reader in ("InferenceIamS3CsiPolicy", "BenchmarkClientPolicy", "NodesModelRead"):
        assert any(k.startswith(reader) for k in policies), (reader, sorted(policies))
    for logical_id, statements in policies.items():
        assert _kms_grants(statements) == [(["kms:Decrypt"], [KEY_ARN])], logical_id


def test_a_kept_bucket_creates_nothing(readers) -> None:
    """``existing_kms_key_arn`` names a key: nothing is created, neither bucket nor key."""
    created = [k for k, r in readers["template"]["Resources"].items() if r["Type"] in ("AWS::S3::Bucket",
                                                                                     "AWS::KMS::Key")]
    assert [k for k in created if not k.startswith("Tls")] == []
    assert readers["model"].created is False
    assert readers["model"].encryption_key.key_arn == KEY_ARN


def test_an_existing_bucket_without_a_key_grants_no_kms() -> None:
    """SSE-S3 or the AWS managed key ``aws/s3`` (whose key policy admits the account's principals through S3): no
    ``kms:Decrypt`` in the readers' statements."""
    import aws_cdk as cdk

    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps, ModelReadLocation

    stack = cdk.Stack(cdk.App(), "NoKey")
    model = ModelBucket(stack, "Model", props=ModelBucketProps(existing_bucket_name=BUCKET))
    actions = [a for st in model.read_statements((ModelReadLocation(key_prefix=PREFIX),)) for a in st.actions]
    assert actions == ["s3:ListBucket", "s3:GetObject"]


def test_fails_when_a_key_is_given_without_an_existing_bucket() -> None:
    import aws_cdk as cdk

    from hyperpod_constructs.model_bucket import ModelBucket, ModelBucketProps

    with pytest.raises(ValueError, match="existing_kms_key_arn must be unset unless existing_bucket_name is set"):
        ModelBucket(cdk.Stack(cdk.App()), "M", props=ModelBucketProps(existing_kms_key_arn=KEY_ARN))


def test_every_matrix_config_decrypts_the_weights_with_exactly_the_buckets_key(synthesized) -> None:
    """Whole app, every config under config/: each policy that reads the model objects may decrypt with the keys of
    the buckets it reads and no other: the deployment bucket's (the created key, or
    ``model_bucket.existing_kms_key_arn``; none for an existing bucket named without a key) and, for objects of an
    endpoint's own ``model.bucket``, that endpoint's ``model.kms_key_arn``; the platform stack outputs the deployment
    bucket's key as ``ModelBucketKeyArn``."""
    s = synthesized.require()
    config = s.config
    template = s.templates[f"{config.name}-platform"]
    created_keys = [k for k, r in template["Resources"].items()
                    if r["Type"] == "AWS::KMS::Key" and k.startswith("ModelKey")]
    if config.model_bucket.existing_kms_key_arn is not None:
        expected: Any = config.model_bucket.existing_kms_key_arn
    elif config.model_bucket.existing_name is None:
        (key,) = created_keys
        expected = {"Fn::GetAtt": [key, "Arn"]}
    else:
        expected = None
    policies = _reader_policies(template)
    assert len(policies) >= 3, sorted(policies)  # S3 CSI driver, HyperPod nodes, benchmark Jobs
    own = {spec.model.bucket: spec.model.kms_key_arn for spec in config.specs() if spec.model.bucket is not None}
    for logical_id, statements in policies.items():
        reads = [r for st in statements if st.get("Sid") == "ReadModelObjects" for r in _list(st["Resource"])]
        keys: list[Any] = []
        for resource in reads:
            # arn:<partition>:s3:::<bucket>/<prefix>*, written as a string or an Fn::Join of the partition
            text = resource if isinstance(resource, str) else "".join(
                part for part in resource.get("Fn::Join", ["", []])[1] if isinstance(part, str))
            bucket = text.split(":s3:::", 1)[1].split("/", 1)[0] if ":s3:::" in text else ""
            key = own.get(bucket, expected)
            if key is not None and key not in keys:
                keys.append(key)
        assert _kms_grants(statements) == ([(["kms:Decrypt"], keys)] if keys else []), logical_id
    output = template.get("Outputs", {}).get(outputs.MODEL_BUCKET_KEY_ARN)
    assert (output["Value"] if output else None) == expected
