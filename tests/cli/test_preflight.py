"""``hyperpod-dpd preflight`` against moto, and botocore ``Stubber`` where moto has nothing.

moto (5.2.5) serves: STS get_caller_identity, SSM get_parameter (the CDK bootstrap version), EC2
describe_availability_zones (static AZ IDs: us-west-2a = usw2-az2, ...), describe_vpcs/describe_addresses, IAM
get_role, S3 get_bucket_location, Service Quotas for service code ``vpc``.

botocore Stubber with the real service models (the stub validates every request and response against
them), because moto does not implement them (shared/reference/operations.md, "moto coverage"):
Service Quotas for ``sagemaker`` and ``ec2``, SageMaker DescribeTrainingPlan, EKS DescribeAddonVersions.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from lifecycle_fixtures import no_aws_credentials
from moto import mock_aws
from typer.testing import CliRunner

from hyperpod_core.config import parse_config
from hyperpod_dpd import preflight
from hyperpod_dpd.commands.preflight import target

REGION = "us-west-2"
REPO_CHECKOUT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # moto's default account
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
PLAN_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/p5-plan"
#: Per-test names (set by the ``aws`` fixture).
NAMES = {"admin": "Admin", "bucket": "team-models"}


def admin_arn() -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{NAMES['admin']}"
P5_QUOTA = "ml.p5.48xlarge for cluster usage"


@pytest.fixture
def aws(monkeypatch) -> Iterator[None]:
    """moto, with names unique to the test: another module may hold moto open for the whole session, and a
    nested ``mock_aws`` does not reset the backends."""
    import uuid

    run = uuid.uuid4().hex[:10]
    monkeypatch.setattr(preflight, "bootstrap_qualifier", lambda: f"q{run}")
    monkeypatch.setitem(NAMES, "admin", f"Admin-{run}")
    monkeypatch.setitem(NAMES, "bucket", f"team-models-{run}")
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield


def _config(base: dict, **changes: Any):
    data = copy.deepcopy(base)
    data["eks"]["admin_principal_arn"] = admin_arn()
    data["model_bucket"]["existing_name"] = NAMES["bucket"]
    for g in data["hyperpod"]["instance_groups"]:
        g["training_plan_arn"] = PLAN_ARN
    for path, value in changes.items():
        node = data
        *parents, leaf = path.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return parse_config(data)


def _rc(instance_type: str, count: int, zone: str) -> dict[str, Any]:
    """One ReservedCapacitySummaries entry (the fields the service model requires, AZ by name)."""
    return {"ReservedCapacityArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:reserved-capacity/rc-1",
            "InstanceType": instance_type, "TotalInstanceCount": count, "Status": "Active", "AvailabilityZone": zone}


class World:
    """The account: moto resources plus stubbed clients, with the responses a passing account gives."""

    def __init__(self) -> None:
        self.sagemaker_quota = {P5_QUOTA: 2.0, preflight.TOTAL_HYPERPOD_QUOTA: 4.0}
        self.eip_quota = 5.0
        self.plan: dict[str, Any] = {
            "TrainingPlanArn": PLAN_ARN, "TrainingPlanName": "p5-plan", "Status": "Active",
            "StartTime": NOW - dt.timedelta(days=1), "EndTime": NOW + dt.timedelta(days=30),
            "TargetResources": ["hyperpod-cluster"],
            "ReservedCapacitySummaries": [_rc("ml.p5.48xlarge", 2, "us-west-2a")]}
        self.addon_offered: dict[str, list[str]] = {p.name: [p.version] for p in preflight.addon_pins()}
        self.bootstrap: str | None = "30"
        self.admin = True
        self.bucket_region: str | None = REGION
        #: The bucket's ``ApplyServerSideEncryptionByDefault``; ``None``: none put (moto then answers
        #: ``ServerSideEncryptionConfigurationNotFoundError``, as S3 did for a bucket without one before 2023).
        self.bucket_encryption: dict[str, str] | None = None

    def clients(self, config) -> preflight.Clients:
        if self.bootstrap is not None:
            boto3.client("ssm", REGION).put_parameter(
                Name=f"/cdk-bootstrap/{preflight.bootstrap_qualifier()}/version", Value=self.bootstrap,
                Type="String")
        if self.admin:
            boto3.client("iam", REGION).create_role(RoleName=NAMES["admin"], AssumeRolePolicyDocument="{}")
        if self.bucket_region:
            kwargs = {} if self.bucket_region == "us-east-1" else {
                "CreateBucketConfiguration": {"LocationConstraint": self.bucket_region}}
            boto3.client("s3", self.bucket_region).create_bucket(Bucket=NAMES["bucket"], **kwargs)
            if self.bucket_encryption is not None:
                boto3.client("s3", self.bucket_region).put_bucket_encryption(
                    Bucket=NAMES["bucket"], ServerSideEncryptionConfiguration={"Rules": [
                        {"ApplyServerSideEncryptionByDefault": self.bucket_encryption, "BucketKeyEnabled": True}]})
        clients = preflight.Clients(lambda service: boto3.client(service, REGION))
        clients.put("service-quotas", "sagemaker", self._quotas("sagemaker", self.sagemaker_quota, config))
        clients.put("service-quotas", "ec2", self._quotas("ec2", {preflight.EIP_QUOTA: self.eip_quota}, config))
        clients.put("sagemaker", "", self._sagemaker(config))
        clients.put("eks", "", self._eks(config))
        return clients

    def _quotas(self, code: str, values: dict[str, float], config) -> Any:
        client = boto3.client("service-quotas", REGION)
        stub = Stubber(client)
        names = ([f"{t} for cluster usage" for t in sorted({g.instance_type for g in config.hyperpod.instance_groups})]
                 + [preflight.TOTAL_HYPERPOD_QUOTA]) if code == "sagemaker" else [preflight.EIP_QUOTA]
        listing = [{"ServiceCode": code, "QuotaCode": f"L-{i:08X}", "QuotaName": name, "Value": 1.0}
                   for i, name in enumerate(values)]
        # Two pages, listed once per service code; the names we look for may sit on either.
        half = len(listing) // 2
        stub.add_response("list_aws_default_service_quotas", {"Quotas": listing[:half], "NextToken": "p2"},
                          {"ServiceCode": code, "MaxResults": 100})
        stub.add_response("list_aws_default_service_quotas", {"Quotas": listing[half:]},
                          {"ServiceCode": code, "MaxResults": 100, "NextToken": "p2"})
        for name in names:
            quota = next((q for q in listing if q["QuotaName"] == name), None)
            if quota is not None:
                stub.add_response("get_service_quota",
                                  {"Quota": {**quota, "Value": values[name]}},
                                  {"ServiceCode": code, "QuotaCode": quota["QuotaCode"]})
        stub.activate()
        return client

    def _sagemaker(self, config) -> Any:
        client = boto3.client("sagemaker", REGION)
        stub = Stubber(client)
        for g in config.hyperpod.instance_groups:
            if g.training_plan_arn:
                stub.add_response("describe_training_plan", self.plan, {"TrainingPlanName": "p5-plan"})
        stub.activate()
        return client

    def _eks(self, config) -> Any:
        client = boto3.client("eks", REGION)
        stub = Stubber(client)
        for pin in preflight.addon_pins():
            stub.add_response(
                "describe_addon_versions",
                {"addons": [{"addonName": pin.name, "addonVersions": [
                    {"addonVersion": v} for v in self.addon_offered[pin.name]]}]},
                {"addonName": pin.name, "kubernetesVersion": config.eks.kubernetes_version})
        stub.activate()
        return client


def _run(world: World, config) -> dict[str, preflight.Check]:
    results = preflight.run(target(config), world.clients(config), now=NOW)
    return {c.name: c for c in results}


def test_a_ready_account_passes_every_check(aws, default_config_dict) -> None:
    config = _config(default_config_dict)
    checks = _run(World(), config)
    assert {c.status for c in checks.values()} == {"PASS"}, [c for c in checks.values() if c.status != "PASS"]
    assert set(checks) >= {
        "credentials", "CDK bootstrap", "GPU AZ ID", f"quota sagemaker: {P5_QUOTA}",
        f"quota sagemaker: {preflight.TOTAL_HYPERPOD_QUOTA}", "training plan of prefill", "training plan of decode",
        "admin principal", "model bucket", preflight.MODEL_BUCKET_KEY, "quota vpc: VPCs per Region",
        "quota vpc: NAT gateways per Availability Zone", f"quota ec2: {preflight.EIP_QUOTA}",
        *(f"add-on {p.name}" for p in preflight.addon_pins())}
    assert checks["GPU AZ ID"].detail == "usw2-az2 is us-west-2a in this account"


def test_every_pinned_addon_is_checked() -> None:
    from hyperpod_core import pins

    names = {p.name for p in preflight.addon_pins()}
    assert {pins.VPC_CNI.name, pins.INFERENCE_OPERATOR.name, pins.OBSERVABILITY.name, pins.CERT_MANAGER.name} <= names


def _fail(checks: dict[str, preflight.Check], name: str) -> preflight.Check:
    check = checks[name]
    assert check.status == "FAIL", check
    assert check.fix
    return check


def test_missing_bootstrap_fails_with_the_bootstrap_command(aws, default_config_dict) -> None:
    world = World()
    world.bootstrap = None
    check = _fail(_run(world, _config(default_config_dict)), "CDK bootstrap")
    assert check.fix == f"npx cdk bootstrap aws://{ACCOUNT}/{REGION}"


def test_an_old_bootstrap_fails(aws, default_config_dict) -> None:
    world = World()
    world.bootstrap = "5"
    _fail(_run(world, _config(default_config_dict)), "CDK bootstrap")


def test_a_published_az_id_the_account_does_not_list_fails(aws, default_config_dict) -> None:
    """An AZ ID that does not exist fails the config itself (tests/cli/test_az_ids.py); one AWS publishes can still be
    missing from an account's list (newer accounts reach two of us-west-1's three AZs, and AWS may hide a constrained
    AZ from new accounts: AWS docs, "AWS Availability Zones"). The account's list here is moto's, less usw2-az4."""
    data = copy.deepcopy(default_config_dict)
    data["network"]["gpu_availability_zone_id"] = "usw2-az4"
    config = _config(data)
    zones = {name: az for name, az in preflight.zone_ids(World().clients(config)).items() if az != "usw2-az4"}
    check = preflight.check_az(config.network.gpu_availability_zone_id, config.region, zones)
    assert (check.status, check.detail) == ("FAIL", "usw2-az4 is not an AZ of us-west-2")
    assert check.fix == "network.gpu_availability_zone_id: one of usw2-az1, usw2-az2, usw2-az3"


def test_quota_below_the_instance_count_fails_by_quota_name(aws, default_config_dict) -> None:
    world = World()
    world.sagemaker_quota[P5_QUOTA] = 1.0
    check = _fail(_run(world, _config(default_config_dict)), f"quota sagemaker: {P5_QUOTA}")
    assert check.detail.startswith("1 < 2 needed")


def test_total_hyperpod_quota_fails(aws, default_config_dict) -> None:
    world = World()
    world.sagemaker_quota[preflight.TOTAL_HYPERPOD_QUOTA] = 0.0
    _fail(_run(world, _config(default_config_dict)), f"quota sagemaker: {preflight.TOTAL_HYPERPOD_QUOTA}")


def test_a_quota_name_that_is_not_listed_is_unknown(aws, default_config_dict) -> None:
    """A check that could not be made is not a warning about a soft problem: UNKNOWN, and not ok."""
    world = World()
    del world.sagemaker_quota[P5_QUOTA]
    checks = _run(world, _config(default_config_dict))
    assert checks[f"quota sagemaker: {P5_QUOTA}"].status == "UNKNOWN"
    assert not preflight.ok(list(checks.values()))


def test_a_quota_that_cannot_be_read_is_unknown_with_the_fix_of_its_error(aws, default_config_dict) -> None:
    """GetServiceQuota denied (Stubber with the real Service Quotas model): UNKNOWN, the fix names the action."""
    world = World()
    config = _config(default_config_dict)
    clients = world.clients(config)
    sq = boto3.client("service-quotas", REGION)
    stub = Stubber(sq)
    stub.add_client_error("list_aws_default_service_quotas", "AccessDeniedException",
                          "User: arn:aws:sts::123456789012:assumed-role/Ops/alice is not authorized to perform: "
                          "servicequotas:ListAWSDefaultServiceQuotas", 400,
                          expected_params={"ServiceCode": "sagemaker", "MaxResults": 100})
    stub.activate()
    clients.put("service-quotas", "sagemaker", sq)
    checks = {c.name: c for c in preflight.run(target(config), clients, now=NOW)}
    check = checks[f"quota sagemaker: {P5_QUOTA}"]
    assert check.status == "UNKNOWN" and check.detail.startswith("could not read it (AccessDeniedException: User:")
    assert check.fix == "allow servicequotas:ListAWSDefaultServiceQuotas for your IAM principal (or use a role that " \
                        "has it)"
    assert json.loads(preflight.as_json(list(checks.values())))["ok"] is False


@pytest.mark.parametrize(("code", "fix"), [
    ("ExpiredToken", "the session expired: aws sso login"),
    ("InvalidClientTokenId", "these credentials are not valid here"),
])
def test_credentials_that_do_not_work_fail_with_the_fix_of_their_code(default_config, code, fix) -> None:
    sts = boto3.client("sts", REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sts) as stub:
        stub.add_client_error("get_caller_identity", code, "The security token included in the request is bad")
        clients = preflight.Clients(lambda s: None)
        clients.put("sts", "", sts)
        check, account = preflight.check_identity(clients, default_config.arn_accounts())
    assert (check.status, account) == ("FAIL", None) and check.fix.startswith(fix)


def test_no_connection_to_sts_is_not_a_login_problem(default_config) -> None:
    from botocore.config import Config

    from fake_http import free_port

    sts = boto3.client("sts", REGION, aws_access_key_id="x", aws_secret_access_key="x",
                       endpoint_url=f"http://127.0.0.1:{free_port()}",
                       config=Config(retries={"max_attempts": 1}, connect_timeout=2))
    clients = preflight.Clients(lambda s: None)
    clients.put("sts", "", sts)
    check, _ = preflight.check_identity(clients, default_config.arn_accounts())
    assert check.status == "FAIL" and check.detail.startswith("EndpointConnectionError")
    assert "sso" not in check.fix and "network access" in check.fix


@pytest.mark.parametrize(("change", "detail"), [
    ({"Status": "Expired"}, "status Expired"),
    ({"EndTime": NOW - dt.timedelta(hours=1)}, "ended 2026-11-30 23:00"),
    ({"TargetResources": ["training-job"]}, "plan is for training-job, not hyperpod-cluster"),
    ({"ReservedCapacitySummaries": [_rc("ml.p5.48xlarge", 1, "us-west-2a")]}, "1 x ml.p5.48xlarge reserved < 2"),
    ({"ReservedCapacitySummaries": [_rc("ml.p5.48xlarge", 2, "us-west-2b")]}, "capacity in usw2-az1, not usw2-az2"),
    ({"ReservedCapacitySummaries": [_rc("ml.p5en.48xlarge", 2, "us-west-2a")]}, "0 x ml.p5.48xlarge reserved"),
])
def test_a_training_plan_that_does_not_cover_the_group_fails(aws, default_config_dict, change, detail) -> None:
    world = World()
    world.plan.update(change)
    config = _config(default_config_dict)
    # Both groups share the plan; their counts are 1 each, so "reserved < 2" needs a group of 2.
    config = config.model_copy(update={"hyperpod": config.hyperpod.model_copy(update={"instance_groups": tuple(
        g.model_copy(update={"instance_count": 2}) for g in config.hyperpod.instance_groups)})})
    world.sagemaker_quota = {P5_QUOTA: 4.0, preflight.TOTAL_HYPERPOD_QUOTA: 4.0}
    check = _fail(_run(world, config), "training plan of prefill")
    assert detail in check.detail


def test_a_plan_that_has_not_started_warns(aws, default_config_dict) -> None:
    world = World()
    world.plan.update(Status="Scheduled", StartTime=NOW + dt.timedelta(days=2))
    check = _run(world, _config(default_config_dict))["training plan of decode"]
    assert (check.status, check.detail) == ("WARN", "Scheduled; starts 2026-12-03 00:00 UTC")


def test_an_addon_version_not_offered_for_the_kubernetes_version_fails(aws, default_config_dict) -> None:
    from hyperpod_core import pins

    world = World()
    world.addon_offered[pins.INFERENCE_OPERATOR.name] = ["v1.2.0-eksbuild.1"]
    check = _fail(_run(world, _config(default_config_dict)), f"add-on {pins.INFERENCE_OPERATOR.name}")
    assert check.fix == "pin one of v1.2.0-eksbuild.1 in core/hyperpod_core/pins.py"


def test_a_missing_admin_principal_fails(aws, default_config_dict) -> None:
    world = World()
    world.admin = False
    _fail(_run(world, _config(default_config_dict)), "admin principal")


@pytest.mark.parametrize(("region", "detail"), [
    ("eu-west-1", "is in eu-west-1, not us-west-2"), (None, "NoSuchBucket")])
def test_a_model_bucket_elsewhere_or_missing_fails(aws, default_config_dict, region, detail) -> None:
    world = World()
    world.bucket_region = region
    assert detail in _fail(_run(world, _config(default_config_dict)), "model bucket").detail


# --- the model bucket's key (issue 30, item 3) ----------------------------------------------------------------
# S3 API Reference, GetBucketEncryption: the bucket's default encryption is ServerSideEncryptionConfiguration.Rules[]
# .ApplyServerSideEncryptionByDefault, with SSEAlgorithm (AES256 | aws:kms | aws:kms:dsse) and KMSMasterKeyID, which
# "can be the key ID, key alias, or the Amazon Resource Name (ARN) of the KMS key" (ServerSideEncryptionByDefault);
# aws:kms without a KMSMasterKeyID is the AWS managed key aws/s3. moto serves GetBucketEncryption, PutBucketEncryption
# and KMS CreateKey/CreateAlias/DescribeKey.

def _kms_key(alias: str | None = None) -> dict[str, str]:
    """A customer managed key in moto's KMS: its ``KeyMetadata``."""
    kms = boto3.client("kms", REGION)
    meta = kms.create_key(Description="model weights")["KeyMetadata"]
    if alias:
        kms.create_alias(AliasName=alias, TargetKeyId=meta["KeyId"])
    return meta


def _key_check(world: World, config) -> preflight.Check:  # type: ignore[no-untyped-def]
    return _run(world, config)[preflight.MODEL_BUCKET_KEY]


@pytest.mark.parametrize("named_by", ["key ARN", "key ID", "alias"])
def test_a_bucket_encrypted_with_the_configured_key_passes(aws, default_config_dict, named_by) -> None:
    """The bucket may name its key by ARN, ID or alias: a key ID or alias is resolved to its ARN (DescribeKey)."""
    alias = f"alias/models-{NAMES['bucket']}"
    key = _kms_key(alias)
    world = World()
    named = {"key ARN": key["Arn"], "key ID": key["KeyId"], "alias": alias}[named_by]
    world.bucket_encryption = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": named}
    check = _key_check(world, _config(default_config_dict, model_bucket__existing_kms_key_arn=key["Arn"]))
    assert (check.status, check.detail) == (
        "PASS", f"s3://{NAMES['bucket']} encrypts with {key['Arn']}, model_bucket.existing_kms_key_arn")


def test_a_bucket_encrypted_with_another_key_fails_naming_the_bucket_and_both_keys(aws, default_config_dict) -> None:
    configured, used = _kms_key(), _kms_key()
    world = World()
    world.bucket_encryption = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": used["Arn"]}
    check = _fail(_run(world, _config(default_config_dict, model_bucket__existing_kms_key_arn=configured["Arn"])),
                  preflight.MODEL_BUCKET_KEY)
    assert check.detail.startswith(f"s3://{NAMES['bucket']} encrypts with the KMS key {used['Arn']}, but "
                                   f"model_bucket.existing_kms_key_arn is {configured['Arn']}: ")
    assert check.fix == f"set model_bucket.existing_kms_key_arn: {used['Arn']}"


def test_a_bucket_encrypted_with_a_customer_managed_key_none_configured_says_what_to_set(aws,
                                                                                         default_config_dict) -> None:
    key = _kms_key()
    world = World()
    world.bucket_encryption = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key["Arn"]}
    check = _fail(_run(world, _config(default_config_dict)), preflight.MODEL_BUCKET_KEY)
    assert "but model_bucket.existing_kms_key_arn is not set" in check.detail
    assert check.fix == f"set model_bucket.existing_kms_key_arn: {key['Arn']}"


@pytest.mark.parametrize(("encryption", "uses"), [
    (None, "SSE-S3 (AES256)"), ({"SSEAlgorithm": "AES256"}, "SSE-S3 (AES256)"),
    ({"SSEAlgorithm": "aws:kms"}, "the AWS managed key aws/s3")], ids=["no-configuration", "sse-s3", "aws-s3-key"])
def test_a_bucket_without_a_customer_managed_key_needs_none(aws, default_config_dict, encryption, uses) -> None:
    """No key configured: PASS. A key configured anyway: WARN (its grant serves only objects uploaded with it)."""
    world = World()
    world.bucket_encryption = encryption
    check = _key_check(world, _config(default_config_dict))
    assert (check.status, check.detail) == ("PASS", f"s3://{NAMES['bucket']} encrypts with {uses}: no key to grant")
    key = _kms_key()
    world.bucket_encryption = None  # the bucket exists already
    config = _config(default_config_dict, model_bucket__existing_kms_key_arn=key["Arn"])
    (bucket,) = target(config).model_buckets
    warned = preflight.check_model_bucket_key(preflight.Clients(lambda service: boto3.client(service, REGION)), bucket)
    assert warned.status == "WARN" and f"not {key['Arn']}" in warned.detail


def test_a_bucket_encryption_that_cannot_be_read_is_unknown(default_config_dict) -> None:
    """GetBucketEncryption denied (botocore Stubber with the real S3 model): UNKNOWN, the fix names the action."""
    from botocore.config import Config as BotoConfig

    s3 = boto3.client("s3", REGION, aws_access_key_id="x", aws_secret_access_key="x",
                      config=BotoConfig(s3={"addressing_style": "path"}))
    with Stubber(s3) as stub:
        stub.add_client_error("get_bucket_encryption", "AccessDenied", "Access Denied", 403,
                              expected_params={"Bucket": "team-models"})
        clients = preflight.Clients(lambda service: None)
        clients.put("s3", "", s3)
        (bucket,) = target(_config(default_config_dict, model_bucket__existing_name="team-models")).model_buckets
        check = preflight.check_model_bucket_key(clients, bucket)
    assert check.status == "UNKNOWN" and check.detail.startswith(
        "could not read the default encryption of s3://team-models (AccessDenied")


def test_too_few_elastic_ips_fails(aws, default_config_dict) -> None:
    world = World()
    world.eip_quota = 0.0
    _fail(_run(world, _config(default_config_dict)), f"quota ec2: {preflight.EIP_QUOTA}")


def test_credentials_of_another_account_fail(aws, default_config_dict) -> None:
    config = _config(default_config_dict, eks__admin_principal_arn="arn:aws:iam::999999999999:role/Admin")
    config = config.model_copy(update={"hyperpod": config.hyperpod.model_copy(update={"instance_groups": tuple(
        g.model_copy(update={"training_plan_arn": None}) for g in config.hyperpod.instance_groups)})})
    check = preflight.check_identity(preflight.Clients(lambda s: boto3.client(s, REGION)), config.arn_accounts())[0]
    assert check.status == "FAIL" and "the config's ARNs name 999999999999" in check.detail


def test_no_credentials_lists_every_other_check_as_not_run(monkeypatch, default_config, tmp_path) -> None:
    """Without credentials the credentials check FAILs and the others are listed, UNKNOWN, ``not run: no
    credentials``, with no AWS call but the credentials one. Fails on main: the credentials row was the only one
    (the fourth review's newcomer run, friction 19: "2 of its 11 checks")."""
    no_aws_credentials(monkeypatch, tmp_path)
    made: list[str] = []
    real = preflight.make_clients(REGION)
    clients = preflight.Clients(lambda service: made.append(service) or real.get(service))
    results = preflight.run(target(default_config), clients)
    assert made == ["sts"]
    assert (results[0].name, results[0].status) == ("credentials", "FAIL")
    assert {(c.status, c.detail) for c in results[1:]} == {("UNKNOWN", "not run: no credentials")}
    names = [c.name for c in results[1:]]
    assert names[:2] == ["CDK bootstrap", "GPU AZ ID"] and names[-1] == "deep health checks"
    assert f"quota sagemaker: {P5_QUOTA}" in names and "add-on vpc-cni" in names and len(names) >= 9


# --- the command --------------------------------------------------------------------------------------------

def _templates_pass(env) -> preflight.Check:  # type: ignore[no-untyped-def]
    return preflight.Check(name=preflight.TEMPLATES_CHECK, status="PASS", detail="(not under test here)")


def _world_command(world: World, default_config_dict, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    import yaml

    config = _config(default_config_dict)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    monkeypatch.setattr(preflight, "make_clients", lambda region: world.clients(config))
    return path


def test_an_unknown_check_makes_the_command_exit_1_and_never_says_deploy(aws, default_config_dict, tmp_path,
                                                                         monkeypatch) -> None:
    from hyperpod_dpd.app import app

    world = World()
    del world.sagemaker_quota[P5_QUOTA]
    path = _world_command(world, default_config_dict, tmp_path, monkeypatch)
    monkeypatch.setattr(preflight, "check_templates", _templates_pass)
    result = CliRunner().invoke(app, ["preflight", "--config", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 1, result.output
    assert "0 failed, 1 could not be checked" in result.stdout and "UNKNOWN" in result.stdout
    assert "next: hyperpod-dpd deploy" not in result.stdout


def test_templates_not_synthesized_or_not_deployable_fail(tmp_path) -> None:
    """The check reads the environment's cdk.out/: no templates, or a template whose rule can never hold (a parameter
    asserted to equal a value its AllowedValues exclude: CloudFormation refuses every create and update of it)."""
    import shutil

    from hyperpod_core import environment

    cfg = tmp_path / "c.yaml"
    shutil.copy(REPO_CHECKOUT / "config" / "default.yaml", cfg)
    e = environment.resolve(str(cfg))
    missing = preflight.check_templates(e)
    assert (missing.status, missing.fix) == ("FAIL", f"hyperpod-dpd synth --config {cfg}")
    e.cdk_out.mkdir(parents=True)
    e.write_stamp(e.cdk_out)
    (e.cdk_out / "manifest.json").write_text(json.dumps({"artifacts": {"Cluster": {
        "type": "aws:cloudformation:stack", "properties": {"templateFile": "Cluster.template.json",
                                                           "stackName": "hyperpod-dpd-cluster"}}}}))
    template = {"Parameters": {"ChartsFetched": {"Type": "String", "Default": "no", "AllowedValues": ["no"]}},
                "Rules": {"ChartsFetchedRule": {"Assertions": [{
                    "Assert": {"Fn::Equals": [{"Ref": "ChartsFetched"}, "yes"]},
                    "AssertDescription": "Helm charts nvidia-device-plugin (NVIDIA/k8s-device-plugin@cb6e45e) were not "
                                         "fetched when this template was synthesized; run ./scripts/setup"}]}},
                "Resources": {}}
    (e.cdk_out / "Cluster.template.json").write_text(json.dumps(template))
    blocked = preflight.check_templates(e)
    assert blocked.status == "FAIL"
    assert blocked.detail == ("stack hyperpod-dpd-cluster cannot deploy yet: Helm charts nvidia-device-plugin "
                              "(NVIDIA/k8s-device-plugin@cb6e45e) were not fetched when this template was synthesized")
    assert blocked.fix.startswith("./scripts/setup with access to raw.githubusercontent.com")
    template["Parameters"]["ChartsFetched"]["AllowedValues"] = ["no", "yes"]  # a rule that can hold
    (e.cdk_out / "Cluster.template.json").write_text(json.dumps(template))
    assert preflight.check_templates(e).status == "PASS"

def test_the_command_prints_json_and_exits_1_on_a_fail(aws, default_config_dict, tmp_path, monkeypatch) -> None:
    from hyperpod_dpd.app import app

    world = World()
    world.bootstrap = None
    config = _config(default_config_dict)
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    monkeypatch.setattr(preflight, "make_clients", lambda region: world.clients(config))
    monkeypatch.setattr(preflight, "check_templates", _templates_pass)
    result = CliRunner().invoke(app, ["preflight", "--config", str(path), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert [c["name"] for c in report["checks"] if c["status"] == "FAIL"] == ["CDK bootstrap"]


def test_the_command_prints_a_table_with_the_fix(aws, default_config_dict, tmp_path, monkeypatch) -> None:
    from hyperpod_dpd.app import app

    world = World()
    config = _config(default_config_dict)
    path = tmp_path / "c.yaml"
    import yaml

    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    monkeypatch.setattr(preflight, "make_clients", lambda region: world.clients(config))
    monkeypatch.setattr(preflight, "check_templates", _templates_pass)
    result = CliRunner().invoke(app, ["preflight", "--config", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout and "0 failed" in result.stdout
    assert f"next: hyperpod-dpd deploy --config {path}" in result.stdout


@pytest.mark.parametrize(("args", "starts"), [
    ((), "error: name the config"), (("--config", "missing.yaml"), "error: config file 'missing.yaml' cannot be read")])
def test_preflight_bad_input_is_one_line_and_exit_2(tmp_path, args, starts) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd", "preflight", *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False,
                            env={k: v for k, v in __import__("os").environ.items() if k != "HYPERPOD_CONFIG"})
    assert result.returncode == 2
    assert result.stderr.strip().startswith(starts) and len(result.stderr.strip().splitlines()) == 1


def test_a_quota_never_changed_takes_its_default_value() -> None:
    """GetServiceQuota answers NoSuchResourceException when nothing was applied: the default value counts."""
    client = boto3.client("service-quotas", REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("list_aws_default_service_quotas", {"Quotas": [
            {"ServiceCode": "sagemaker", "QuotaCode": "L-8762A75F", "QuotaName": P5_QUOTA, "Value": 0.0}]},
            {"ServiceCode": "sagemaker", "MaxResults": 100})
        stub.add_client_error("get_service_quota", service_error_code="NoSuchResourceException",
                              expected_params={"ServiceCode": "sagemaker", "QuotaCode": "L-8762A75F"})
        clients = preflight.Clients(lambda s: None)
        clients.put("service-quotas", "sagemaker", client)
        assert preflight.quota_value(clients, "sagemaker", P5_QUOTA) == 0.0
        assert preflight.quota_value(clients, "sagemaker", "no such quota") is None


# --- deep health checks (issue 20 item 1): HyperPod refuses UpdateCluster while they run --------------------------

def _deployed_cluster(config, **counts: int) -> None:
    """The HyperPod cluster as the stack created it, in moto (which implements DescribeCluster, ListClusterNodes)."""
    sm = boto3.client("sagemaker", REGION)
    sm.create_cluster(
        ClusterName=config.hyperpod.cluster_name, VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
        InstanceGroups=[{"InstanceGroupName": g.name, "InstanceType": g.instance_type,
                         "InstanceCount": counts.get(g.name, g.instance_count), "ThreadsPerCore": g.threads_per_core,
                         "OnStartDeepHealthChecks": list(g.deep_health_checks),
                         "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hp",
                         "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/", "OnCreate": "on_create.sh"}}
                        for g in config.hyperpod.instance_groups])


def _node_status(config, node_id: str, status: str) -> None:
    """Set a node's ``InstanceStatus.Status`` (a value of the service model's ClusterInstanceStatus) on moto."""
    from moto.sagemaker.models import sagemaker_backends

    assert status in boto3.client("sagemaker", REGION).meta.service_model.shape_for("ClusterInstanceStatus").enum
    sagemaker_backends[ACCOUNT][REGION].clusters[config.hyperpod.cluster_name].nodes[node_id].status = status


def _health(config) -> preflight.Check:
    clients = preflight.Clients(lambda service: boto3.client(service, REGION))
    return preflight.check_deep_health_checks(clients, config.hyperpod, config.name)


def test_no_cluster_yet_passes_the_deep_health_check_check(aws, default_config_dict) -> None:
    config = _config(default_config_dict, name=f"first-{NAMES['admin'][-6:].lower()}")
    check = _health(config)
    assert (check.status, check.detail) == ("PASS", f"no HyperPod cluster {config.hyperpod.cluster_name} yet: the "
                                                    "deploy creates it")


def test_an_instance_group_change_during_deep_health_checks_fails(aws, default_config_dict) -> None:
    config = _config(default_config_dict, name=f"dhc-{NAMES['admin'][-6:].lower()}")
    _deployed_cluster(config)
    _node_status(config, "decode-0", "DeepHealthCheckInProgress")
    assert _health(config).status == "PASS"  # nothing to update: the running checks do not matter
    bigger = _config(default_config_dict, name=config.name, hyperpod__instance_groups=[
        {**g.model_dump(), "instance_count": 2 if g.name == "decode" else g.instance_count}
        for g in config.hyperpod.instance_groups])
    check = _health(bigger)
    assert check.status == "FAIL"
    assert check.detail.startswith(f"1 node(s) in deep health checks (decode-0 (decode)), and the config changes "
                                   f"decode: instance_count 1 -> 2: HyperPod refuses UpdateCluster until they finish, "
                                   f"so the {config.name}-hyperpod stack update would fail")
    assert check.fix.startswith("wait until 'hyperpod-dpd status' shows every node Running")
    _node_status(config, "decode-0", "Running")
    calm = _health(bigger)
    assert calm.status == "PASS" and "starts deep health checks on the new nodes" in calm.detail


def test_a_cluster_that_cannot_be_read_is_unknown(default_config_dict) -> None:
    """Stubber with the real SageMaker model: DescribeCluster denied."""
    config = parse_config(default_config_dict)
    client = boto3.client("sagemaker", REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("describe_cluster", "AccessDeniedException", "not authorized",
                          expected_params={"ClusterName": config.hyperpod.cluster_name})
    stub.activate()
    clients = preflight.Clients(lambda service: pytest.fail(f"unexpected client {service}"))
    clients.put("sagemaker", "cluster", client)
    check = preflight.check_deep_health_checks(clients, config.hyperpod, config.name)
    assert check.status == "UNKNOWN" and "AccessDeniedException" in check.detail
    stub.assert_no_pending_responses()


# --- a fleet: each endpoint's own model bucket (issue 34 item 4) ---------------------------------------------------

def test_an_endpoints_own_model_bucket_is_checked_once_beside_the_deployments(aws) -> None:
    """two-models.yaml with the 8B reading from a bucket of its own (``model.bucket``) in another region: its row
    names the endpoint and the key to fix; the deployment's bucket is still checked, once; the cluster-wide checks
    run once. Fails before: preflight checked model_bucket.existing_name only."""
    import yaml

    repo = Path(__file__).resolve().parents[2]
    data = yaml.safe_load((repo / "config" / "examples" / "two-models.yaml").read_text())
    own = f"{NAMES['bucket']}-8b"
    data["model_bucket"] = {"existing_name": NAMES["bucket"]}
    data["endpoints"][1]["model"]["bucket"] = own
    config = parse_config(data)
    boto3.client("s3", "eu-west-1").create_bucket(Bucket=own,
                                                  CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    results = preflight.run(target(config), World().clients(config), now=NOW)
    names = [c.name for c in results]
    assert names.count("model bucket") == names.count("CDK bootstrap") == names.count("deep health checks") == 1
    checks = {c.name: c for c in results}
    assert checks["model bucket"].status == "PASS"
    mine = _fail(checks, "model bucket of llama-3-1-8b")
    assert mine.detail == f"s3://{own} is in eu-west-1, not us-west-2"
    assert mine.fix.startswith("endpoints[1].model.bucket: a bucket in the config's region")
    assert "model bucket key of llama-3-1-8b" not in checks  # no key check of a bucket elsewhere
