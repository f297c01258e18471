"""Preflight: what must be true in the account before ``deploy``, each check with the fix when it is not.

Read-only AWS calls only. Facts (``/work/shared/reference/operations.md``, "Preflight"):

* quotas are matched by ``QuotaName`` (codes differ between accounts and over time): SageMaker
  ``<type> for cluster usage`` and ``Total number of instances allowed across SageMaker HyperPod clusters``;
  VPC ``VPCs per Region``, ``NAT gateways per Availability Zone``; EC2 ``EC2-VPC Elastic IPs``. The code of a
  name comes from ``ListAWSDefaultServiceQuotas``; the account's value from ``GetServiceQuota`` (the default
  when nothing was applied);
* CDK bootstrap: the SSM parameter ``/cdk-bootstrap/<qualifier>/version`` (templates need version >= 6);
* training plans: ``DescribeTrainingPlan``; type, count and AZ sit in ``ReservedCapacitySummaries[]``
  (``AvailabilityZoneId`` when the service model has it, else the AZ *name*, mapped to its ID with
  ``ec2.describe_availability_zones``); usable from ``Scheduled``; ``TargetResources`` holds ``hyperpod-cluster``;
* add-ons: ``eks.describe_addon_versions(addonName, kubernetesVersion)``;
* each model bucket the deployment does not create (``model_bucket.existing_name``, and every endpoint's own
  ``model.bucket``): its region (``GetBucketLocation``), and the key of its default encryption
  (``GetBucketEncryption``, S3 API Reference) against the key the config names for it
  (``model_bucket.existing_kms_key_arn``, the endpoint's ``model.kms_key_arn``: :func:`check_model_bucket_key`);
* deep health checks: HyperPod refuses ``UpdateCluster`` while deep health checks run (AWS HyperPod EKS deep health
  check page). ``DescribeCluster`` gives the deployed instance groups (compared with the config: a change makes the
  HyperPod stack call ``UpdateCluster``), ``ListClusterNodes`` each node's ``InstanceStatus.Status``
  (``DeepHealthCheckInProgress`` while they run; the SageMaker API's ``ClusterInstanceStatus``).

Each check ends ``PASS``, ``WARN`` (it completed and found a soft problem, e.g. a training plan that has not started),
``FAIL`` (the deploy would fail) or ``UNKNOWN`` (it could not complete: access denied, throttled, unreachable, a quota
name not listed). ``FAIL`` and ``UNKNOWN`` make the command exit 1 and ``"ok": false``: a check that was not made
is not a pass. The fix of an ``UNKNOWN`` is the one its error's code calls for (:func:`hyperpod_dpd.aws.explain`).

The checks take the facts they need (:class:`Target`, which the command reads from the config once), never the
whole config: the cluster-wide checks run once, the model-bucket checks once per bucket.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from hyperpod_core import paths, pins
from hyperpod_core.assembly import undeployable_line
from hyperpod_core.config.cluster import EksConfig, HyperPodConfig, InstanceGroupConfig, NetworkConfig
from hyperpod_core.environment import Environment
from hyperpod_core.errors import UsageError
from hyperpod_dpd import aws
from hyperpod_dpd.aws import explain

Status = Literal["PASS", "WARN", "FAIL", "UNKNOWN"]
#: Statuses that make the command exit 1 (and ``"ok": false``).
NOT_OK: frozenset[str] = frozenset({"FAIL", "UNKNOWN"})
DEFAULT_QUALIFIER = "hnb659fds"
#: aws-cdk-lib's synthesized templates refuse bootstrap versions 1-5 (the CheckBootstrapVersion rule).
MIN_BOOTSTRAP_VERSION = 6
TOTAL_HYPERPOD_QUOTA = "Total number of instances allowed across SageMaker HyperPod clusters"
VPC_QUOTA, NAT_QUOTA, EIP_QUOTA = "VPCs per Region", "NAT gateways per Availability Zone", "EC2-VPC Elastic IPs"


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class ModelBucket:
    """A bucket model weights are read from that the deployment does not create, with the key the config names."""

    name: str
    kms_key_arn: str | None
    field: str
    """The key that names the bucket, for messages: ``model_bucket.existing_name`` or ``endpoints[i].model.bucket``."""
    key_field: str
    """The key that names its KMS key: ``model_bucket.existing_kms_key_arn`` or ``endpoints[i].model.kms_key_arn``."""
    endpoints: tuple[str, ...] = ()
    """The endpoints whose own ``model.bucket`` it is; empty for the deployment's bucket."""

    @property
    def label(self) -> str:
        """``model bucket``, or ``model bucket of <endpoints>`` for an endpoint's own bucket (check names)."""
        return "model bucket" + (f" of {', '.join(self.endpoints)}" if self.endpoints else "")


@dataclass(frozen=True, kw_only=True)
class Target:
    """What preflight checks: the deployment's facts, read from the config by the command
    (:func:`hyperpod_dpd.commands.preflight.target`)."""

    deployment: str
    """The config's ``name`` (stack names)."""
    region: str
    network: NetworkConfig
    eks: EksConfig
    hyperpod: HyperPodConfig
    accounts: frozenset[str]
    """The AWS accounts the config's own ARNs name (``Config.arn_accounts``)."""
    model_buckets: tuple[ModelBucket, ...]
    """Each bucket the weights are read from that the deployment does not create, once."""


def make_clients(region: str) -> Clients:
    """Real clients (bounded retries) in ``region``."""
    return Clients(lambda service: aws.client(service, region))


class Clients:
    """boto3 clients by (service, purpose), created on first use; tests hand in moto or stubbed clients."""

    def __init__(self, factory: Callable[[str], Any]) -> None:
        self._factory = factory
        self._cache: dict[tuple[str, str], Any] = {}
        self.quota_names: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, service: str, purpose: str = "") -> Any:
        key = (service, purpose)
        if key not in self._cache:
            self._cache[key] = self._factory(service)
        return self._cache[key]

    def put(self, service: str, purpose: str, client: Any) -> None:
        self._cache[(service, purpose)] = client


def addon_pins() -> tuple[pins.AddonPin, ...]:
    """``pins.ADDONS`` when the pins module lists them, else every AddonPin constant of the module."""
    listed = getattr(pins, "ADDONS", None)
    if listed:
        return tuple(listed)
    return tuple(v for k, v in vars(pins).items() if k.isupper() and isinstance(v, pins.AddonPin))


def bootstrap_qualifier() -> str:
    """``@aws-cdk/core:bootstrapQualifier`` from the checkout's cdk.json, else (or without a checkout) the CDK
    default."""
    if paths.CHECKOUT is None:
        return DEFAULT_QUALIFIER
    try:
        context = json.loads((paths.CHECKOUT / "cdk.json").read_text()).get("context", {})
    except (OSError, ValueError):
        return DEFAULT_QUALIFIER
    return str(context.get("@aws-cdk/core:bootstrapQualifier", DEFAULT_QUALIFIER))


def _error(exc: Exception) -> str:
    """``<code>: <one line>`` of a botocore error (an HTML page reduced to its title)."""
    e = explain(exc)
    return f"{e.code}: {e.message}".rstrip(": ")


def _code(exc: Exception) -> str:
    return exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""


def _unknown(name: str, what: str, exc: Exception, fix: str) -> Check:
    """A check that could not complete: what it could not do, the error in one line, and the fix the error's code
    calls for (``fix`` when the code calls for nothing in particular)."""
    e = explain(exc)
    return Check(name=name, status="UNKNOWN", detail=f"could not {what} ({e.code}: {e.message})".replace(": )", ")"),
                 fix=e.fix or fix)


# --- quotas ----------------------------------------------------------------------------------------------

def quota_index(clients: Clients, service_code: str) -> dict[str, dict[str, Any]]:
    """``{quota name: default quota}`` of a service, listed once per run (SageMaker has thousands: pages)."""
    if service_code not in clients.quota_names:
        sq = clients.get("service-quotas", service_code)
        found: dict[str, dict[str, Any]] = {}
        for page in sq.get_paginator("list_aws_default_service_quotas").paginate(ServiceCode=service_code,
                                                                                  MaxResults=100):
            found.update({q["QuotaName"]: q for q in page.get("Quotas", []) if "QuotaName" in q})
        clients.quota_names[service_code] = found
    return clients.quota_names[service_code]


def quota_value(clients: Clients, service_code: str, name: str) -> float | None:
    """The account's value of the quota called ``name``; ``None`` when no quota has that name."""
    found = quota_index(clients, service_code).get(name)
    if found is None:
        return None
    sq = clients.get("service-quotas", service_code)
    try:
        return float(sq.get_service_quota(ServiceCode=service_code, QuotaCode=found["QuotaCode"])["Quota"]["Value"])
    except ClientError as exc:
        if _code(exc) != "NoSuchResourceException":
            raise
    return float(found["Value"])  # nothing applied: the default


def _quota_check(clients: Clients, service_code: str, name: str, need: int, what: str) -> Check:
    label = f"quota {service_code}: {name}"
    try:
        value = quota_value(clients, service_code, name)
    except (ClientError, BotoCoreError) as exc:
        return _unknown(label, "read it", exc,
                        "allow servicequotas:ListAWSDefaultServiceQuotas and GetServiceQuota, or check the console")
    if value is None:
        return Check(name=label, status="UNKNOWN", detail=f"no quota named {name!r} in {service_code}: cannot tell "
                                                          f"whether {need} fit ({what})",
                     fix="check Service Quotas in the console; the quota may have been renamed")
    if value < need:
        return Check(name=label, status="FAIL", detail=f"{value:g} < {need} needed ({what})",
                     fix=f"request an increase to >= {need}: Service Quotas > {service_code} > {name!r}")
    return Check(name=label, status="PASS", detail=f"{value:g} >= {need} ({what})")


def check_quotas(clients: Clients, groups: Sequence[InstanceGroupConfig]) -> Iterator[Check]:
    """The SageMaker quotas of the instance groups' instances, per type and in all."""
    by_type: dict[str, int] = {}
    for g in groups:
        by_type[g.instance_type] = by_type.get(g.instance_type, 0) + g.instance_count
    for itype, count in sorted(by_type.items()):
        yield _quota_check(clients, "sagemaker", f"{itype} for cluster usage", count,
                           f"instance groups of type {itype}")
    total = sum(by_type.values())
    yield _quota_check(clients, "sagemaker", TOTAL_HYPERPOD_QUOTA, total, "all instance groups")


def check_network_quotas(clients: Clients, nat_gateways: int) -> Iterator[Check]:
    """Room for one more VPC, the NAT gateways (one per AZ at most) and their Elastic IPs (``network.nat_gateways``:
    ``nat_gateways``)."""
    ec2 = clients.get("ec2")
    try:
        vpcs = len(ec2.describe_vpcs()["Vpcs"])
        eips = len(ec2.describe_addresses()["Addresses"])
    except (ClientError, BotoCoreError) as exc:
        yield _unknown("network usage", "count VPCs/EIPs", exc, "allow ec2:DescribeVpcs and ec2:DescribeAddresses")
        return
    yield _quota_check(clients, "vpc", VPC_QUOTA, vpcs + 1, f"{vpcs} in use + 1")
    yield _quota_check(clients, "vpc", NAT_QUOTA, 1, "one NAT gateway per AZ")
    yield _quota_check(clients, "ec2", EIP_QUOTA, eips + nat_gateways, f"{eips} in use + {nat_gateways} for NAT")


# --- identity, bootstrap, AZ ----------------------------------------------------------------------------

def check_identity(clients: Clients, accounts: Collection[str]) -> tuple[Check, str | None]:
    """Whose credentials these are; ``accounts``: those the config's ARNs name (the credentials must be of one)."""
    try:
        ident = clients.get("sts").get_caller_identity()
    except (ClientError, BotoCoreError) as exc:
        e = explain(exc)
        return Check(name="credentials", status="FAIL", detail=f"{e.code}: {e.message}".rstrip(": "),
                     fix=e.fix or "check AWS_PROFILE and the credentials (aws sts get-caller-identity)"), None
    account = ident["Account"]
    expected = set(accounts)
    if expected and account not in expected:
        return Check(name="credentials", status="FAIL",
                     detail=f"account {account}, but the config's ARNs name {', '.join(sorted(expected))}",
                     fix="use credentials of the account the config targets"), account
    return Check(name="credentials", status="PASS", detail=f"account {account} as {ident['Arn']}"), account


def check_bootstrap(clients: Clients, region: str, account: str) -> Check:
    qualifier = bootstrap_qualifier()
    name = f"/cdk-bootstrap/{qualifier}/version"
    fix = f"npx cdk bootstrap aws://{account}/{region}"
    try:
        value = clients.get("ssm").get_parameter(Name=name)["Parameter"]["Value"]
    except ClientError as exc:
        if _code(exc) == "ParameterNotFound":
            return Check(name="CDK bootstrap", status="FAIL", detail=f"{name} not found in {region}", fix=fix)
        return _unknown("CDK bootstrap", f"read {name}", exc, "allow ssm:GetParameter on it")
    except BotoCoreError as exc:
        return _unknown("CDK bootstrap", f"read {name}", exc, "allow ssm:GetParameter on it")
    if not value.isdigit() or int(value) < MIN_BOOTSTRAP_VERSION:
        return Check(name="CDK bootstrap", status="FAIL",
                     detail=f"{name} = {value}, templates need >= {MIN_BOOTSTRAP_VERSION}", fix=fix)
    return Check(name="CDK bootstrap", status="PASS", detail=f"{name} = {value}")


def zone_ids(clients: Clients) -> dict[str, str]:
    """``{AZ name: AZ ID}`` of the region."""
    zones = clients.get("ec2").describe_availability_zones(AllAvailabilityZones=False)["AvailabilityZones"]
    return {z["ZoneName"]: z["ZoneId"] for z in zones}


def check_az(az: str, region: str, zones: dict[str, str]) -> Check:
    """``network.gpu_availability_zone_id`` (``az``) is an AZ of ``region`` in this account (``zones``)."""
    if az not in zones.values():
        return Check(name="GPU AZ ID", status="FAIL", detail=f"{az} is not an AZ of {region}",
                     fix=f"network.gpu_availability_zone_id: one of {', '.join(sorted(zones.values()))}")
    name = next(n for n, i in zones.items() if i == az)
    return Check(name="GPU AZ ID", status="PASS", detail=f"{az} is {name} in this account")


# --- training plans, add-ons, principal, bucket ---------------------------------------------------------

def check_training_plans(clients: Clients, groups: Sequence[InstanceGroupConfig], az: str, zones: dict[str, str],
                         now: dt.datetime | None = None) -> Iterator[Check]:
    """Each group's training plan covers its type, count, the GPU AZ (``az``) and today."""
    now = now or dt.datetime.now(dt.UTC)
    for g in groups:
        if not g.training_plan_arn:
            continue
        label = f"training plan of {g.name}"
        plan_name = g.training_plan_arn.rsplit("/", 1)[-1]
        try:
            plan = clients.get("sagemaker").describe_training_plan(TrainingPlanName=plan_name)
        except (ClientError, BotoCoreError) as exc:
            if explain(exc).kind == "missing":
                yield Check(name=label, status="FAIL", detail=f"no training plan {plan_name}: {_error(exc)}",
                            fix=f"fix hyperpod.instance_groups[{g.name}].training_plan_arn")
            else:
                yield _unknown(label, f"describe training plan {plan_name}", exc,
                               "allow sagemaker:DescribeTrainingPlan")
            continue
        status = plan.get("Status")
        problems: list[str] = []
        if status in ("Expired", "Failed"):
            problems.append(f"status {status}")
        end = plan.get("EndTime")
        if end is not None and end <= now:
            problems.append(f"ended {end:%Y-%m-%d %H:%M}")
        matching = [c for c in plan.get("ReservedCapacitySummaries", []) if c.get("InstanceType") == g.instance_type]
        count = sum(int(c.get("TotalInstanceCount", 0)) for c in matching)
        targets = plan.get("TargetResources", [])
        if targets and "hyperpod-cluster" not in targets:
            problems.append(f"plan is for {', '.join(targets)}, not hyperpod-cluster")
        if count < g.instance_count:
            problems.append(f"{count} x {g.instance_type} reserved < {g.instance_count} in the group")
        plan_azs = {c.get("AvailabilityZoneId") or zones.get(c.get("AvailabilityZone", ""), c.get("AvailabilityZone"))
                    for c in matching}
        plan_azs = {a or "?" for a in plan_azs}
        if matching and az not in plan_azs:
            problems.append(f"capacity in {', '.join(sorted(plan_azs))}, not {az}")
        if problems:
            yield Check(name=label, status="FAIL", detail="; ".join(problems),
                        fix="use a plan that covers type, count, AZ and dates (sagemaker "
                            "search-training-plan-offerings --target-resources hyperpod-cluster)")
            continue
        start = plan.get("StartTime")
        if status == "Pending" or (start is not None and start > now):
            when = f"starts {start:%Y-%m-%d %H:%M} UTC" if start is not None else "pending"
            yield Check(name=label, status="WARN", detail=f"{status}; {when}",
                        fix="deploy once the plan is Scheduled/Active and its window has started")
            continue
        yield Check(name=label, status="PASS",
                    detail=f"{status}: {count} x {g.instance_type} in {az} until {end:%Y-%m-%d}" if end else status)


def check_addons(clients: Clients, k8s: str) -> Iterator[Check]:
    """Every pinned add-on version is offered for Kubernetes ``k8s`` (``eks.kubernetes_version``)."""
    eks = clients.get("eks")
    for pin in addon_pins():
        label = f"add-on {pin.name}"
        try:
            pages = eks.describe_addon_versions(addonName=pin.name, kubernetesVersion=k8s)
        except (ClientError, BotoCoreError) as exc:
            yield _unknown(label, "list its versions", exc, "allow eks:DescribeAddonVersions")
            continue
        offered = [v["addonVersion"] for a in pages.get("addons", []) for v in a.get("addonVersions", [])]
        if pin.version in offered:
            yield Check(name=label, status="PASS", detail=f"{pin.version} offered for Kubernetes {k8s}")
        else:
            newest = ", ".join(offered[:3]) or "none"
            yield Check(name=label, status="FAIL", detail=f"{pin.version} not offered for Kubernetes {k8s}",
                        fix=f"pin one of {newest} in core/hyperpod_core/pins.py")


def check_admin_principal(clients: Clients, arn: str | None) -> Iterator[Check]:
    """``eks.admin_principal_arn`` (``arn``) exists."""
    if not arn:
        return
    kind, _, name = arn.split(":", 5)[5].partition("/")
    name = name.rsplit("/", 1)[-1]
    iam = clients.get("iam")
    try:
        if kind == "role":
            iam.get_role(RoleName=name)
        else:
            iam.get_user(UserName=name)
    except (ClientError, BotoCoreError) as exc:
        if _code(exc) == "NoSuchEntity":
            yield Check(name="admin principal", status="FAIL", detail=f"{arn}: {_error(exc)}",
                        fix="create it, or fix eks.admin_principal_arn")
        else:
            yield _unknown("admin principal", f"read {arn}", exc, f"allow iam:Get{kind.capitalize()} on it")
        return
    yield Check(name="admin principal", status="PASS", detail=f"{arn} exists")


def check_model_bucket(clients: Clients, model_bucket: ModelBucket, region: str) -> Iterator[Check]:
    """A bucket the weights are read from (:class:`ModelBucket`): that it exists in ``region``, then its key
    (:func:`check_model_bucket_key`)."""
    bucket, label = model_bucket.name, model_bucket.label
    try:
        loc = clients.get("s3").get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
    except (ClientError, BotoCoreError) as exc:
        if _code(exc) == "NoSuchBucket":
            yield Check(name=label, status="FAIL", detail=f"s3://{bucket}: {_error(exc)}",
                        fix=f"create it, or fix {model_bucket.field}")
        else:
            yield _unknown(label, f"read the region of s3://{bucket}", exc, "allow s3:GetBucketLocation on it")
        return
    if loc != region:
        yield Check(name=label, status="FAIL", detail=f"s3://{bucket} is in {loc}, not {region}",
                    fix=f"{model_bucket.field}: a bucket in the config's region (the S3 CSI mount and cross-region "
                        "cost)")
        return
    yield Check(name=label, status="PASS", detail=f"s3://{bucket} in {loc}")
    yield check_model_bucket_key(clients, model_bucket)


MODEL_BUCKET_KEY = "model bucket key"


def key_check_name(model_bucket: ModelBucket) -> str:
    """``model bucket key``, or ``model bucket key of <endpoints>`` for an endpoint's own bucket."""
    return MODEL_BUCKET_KEY + (f" of {', '.join(model_bucket.endpoints)}" if model_bucket.endpoints else "")
#: A KMS key ARN (``arn:<partition>:kms:<region>:<account>:key/<key id>``), as opposed to a key ID or an alias.
_KEY_ARN_RE = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/.+", re.ASCII)


def check_model_bucket_key(clients: Clients, model_bucket: ModelBucket) -> Check:
    """The configured key of a bucket (``model_bucket.existing_kms_key_arn``, an endpoint's ``model.kms_key_arn``)
    against the key the bucket's default encryption uses: the readers may decrypt with the configured key only, so a
    bucket encrypting with another customer managed key fails every read.

    S3 API Reference, GetBucketEncryption: ``ServerSideEncryptionConfiguration.Rules[].
    ApplyServerSideEncryptionByDefault`` holds ``SSEAlgorithm`` (``AES256``, ``aws:kms``, ``aws:kms:dsse``) and, for
    the KMS ones, ``KMSMasterKeyID``: "the key ID, key alias, or the Amazon Resource Name (ARN) of the KMS key"; without
    it S3 uses the AWS managed key ``aws/s3`` (ServerSideEncryptionByDefault). Every bucket has a default encryption
    (SSE-S3 unless set); a bucket without a configuration (``ServerSideEncryptionConfigurationNotFoundError``, as
    before 2023 and in moto) is taken as SSE-S3. A key ID or alias is resolved to its key ARN with KMS
    ``DescribeKey``. Only the default is compared: an object uploaded with another key names it itself."""
    bucket, configured = model_bucket.name, model_bucket.kms_key_arn
    field, name = model_bucket.key_field, key_check_name(model_bucket)
    try:
        rules = clients.get("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    except ClientError as exc:
        if _code(exc) != "ServerSideEncryptionConfigurationNotFoundError":
            return _unknown(name, f"read the default encryption of s3://{bucket}", exc,
                            "allow s3:GetEncryptionConfiguration on it")
        rules = []
    except BotoCoreError as exc:
        return _unknown(name, f"read the default encryption of s3://{bucket}", exc,
                        "check credentials and network access to S3")
    by_default = "ApplyServerSideEncryptionByDefault"
    default = next((r[by_default] for r in rules if by_default in r), {"SSEAlgorithm": "AES256"})
    algorithm, key_id = default.get("SSEAlgorithm", "AES256"), default.get("KMSMasterKeyID")
    uses = "SSE-S3 (AES256)" if not algorithm.startswith("aws:kms") else "the AWS managed key aws/s3"
    if algorithm.startswith("aws:kms") and key_id:
        key_arn = key_id
        if not _KEY_ARN_RE.fullmatch(key_id):
            try:
                key_arn = clients.get("kms").describe_key(KeyId=key_id)["KeyMetadata"]["Arn"]
            except (ClientError, BotoCoreError) as exc:
                return _unknown(name, f"resolve {key_id}, the default encryption key of s3://{bucket}",
                                exc, "allow kms:DescribeKey on it")
        if key_arn == configured:
            return Check(name=name, status="PASS",
                         detail=f"s3://{bucket} encrypts with {key_arn}, {field}")
        have = f"{field} is {configured}" if configured else f"{field} is not set"
        return Check(name=name, status="FAIL",
                     detail=f"s3://{bucket} encrypts with the KMS key {key_arn}, but {have}: the readers of the "
                            "weights get kms:Decrypt on that key only, so every read of a new object would be denied",
                     fix=f"set {field}: {key_arn}")
    if configured:
        return Check(name=name, status="WARN",
                     detail=f"s3://{bucket} encrypts new objects with {uses}, not {configured}: the kms:Decrypt grant "
                            "serves only objects uploaded with that key",
                     fix=f"leave {field} out unless objects of the bucket use that key")
    return Check(name=name, status="PASS", detail=f"s3://{bucket} encrypts with {uses}: no key to grant")


# --- deep health checks -----------------------------------------------------------------------------------

DEEP_HEALTH_CHECK_NAME = "deep health checks"
IN_DEEP_HEALTH_CHECKS = "DeepHealthCheckInProgress"


def instance_group_changes(groups: Sequence[InstanceGroupConfig], deployed: list[dict[str, Any]]) -> list[str]:
    """What the configured instance groups change in the deployed ones (``DescribeCluster`` ``InstanceGroups``), one
    phrase each, e.g. ``decode: instance_count 1 -> 2``; every such change is an ``UpdateCluster``."""
    by_name = {g.get("InstanceGroupName"): g for g in deployed}
    changes: list[str] = []
    for g in groups:
        live = by_name.pop(g.name, None)
        if live is None:
            changes.append(f"{g.name}: new group")
            continue
        wanted = {"instance_type": g.instance_type, "instance_count": g.instance_count,
                  "threads_per_core": g.threads_per_core,
                  "deep_health_checks": sorted(g.deep_health_checks)}
        have = {"instance_type": live.get("InstanceType"), "instance_count": live.get("TargetCount"),
                "threads_per_core": live.get("ThreadsPerCore"),
                "deep_health_checks": sorted(live.get("OnStartDeepHealthChecks") or [])}
        changes += [f"{g.name}: {key} {have[key]} -> {value}" for key, value in wanted.items()
                    if have[key] is not None and have[key] != value]
    changes += [f"{name}: removed" for name in sorted(n for n in by_name if n)]
    return changes


def _cluster_missing(exc: ClientError) -> bool:
    """DescribeCluster of a cluster that does not exist: ``ResourceNotFound`` (service model), or moto's and some
    regions' ``ValidationException`` naming the cluster as not found."""
    message = str(exc.response.get("Error", {}).get("Message", "")).lower()
    return _code(exc) == "ResourceNotFound" or (_code(exc) == "ValidationException" and "not find" in message)


def check_deep_health_checks(clients: Clients, hyperpod: HyperPodConfig, deployment: str, *,
                             modified: tuple[str, ...] = ()) -> Check:
    """FAIL when the config changes an instance group while nodes of the cluster are in deep health checks: the
    HyperPod stack's update would call ``UpdateCluster``, which HyperPod refuses then. ``hyperpod``: the config's
    ``hyperpod`` section (cluster name, instance groups); ``deployment``: its ``name`` (the stack's).

    ``modified``: the properties of the cluster that the HyperPod stack's change set modifies in place (``deploy``
    reads them). Any of them is an ``UpdateCluster`` too, also one the config comparison cannot see (a new
    lifecycle script's ``SourceS3Uri`` in ``InstanceGroups``)."""
    sm = clients.get("sagemaker", "cluster")
    name = hyperpod.cluster_name
    try:
        cluster = sm.describe_cluster(ClusterName=name)
        nodes: list[dict[str, Any]] = []
        for page in sm.get_paginator("list_cluster_nodes").paginate(ClusterName=name):
            nodes += page.get("ClusterNodeSummaries", [])
    except ClientError as exc:
        if _cluster_missing(exc):
            return Check(name=DEEP_HEALTH_CHECK_NAME, status="PASS",
                         detail=f"no HyperPod cluster {name} yet: the deploy creates it")
        return _unknown(DEEP_HEALTH_CHECK_NAME, f"read cluster {name}", exc,
                        "allow sagemaker:DescribeCluster and sagemaker:ListClusterNodes")
    except BotoCoreError as exc:
        return _unknown(DEEP_HEALTH_CHECK_NAME, f"read cluster {name}", exc,
                        "check credentials and network access to SageMaker")
    checking = sorted(f"{n.get('InstanceId')} ({n.get('InstanceGroupName')})" for n in nodes
                      if (n.get("InstanceStatus") or {}).get("Status") == IN_DEEP_HEALTH_CHECKS)
    changes = instance_group_changes(hyperpod.instance_groups, cluster.get("InstanceGroups") or [])
    what = (f"the config changes {'; '.join(changes)}" if changes else
            f"the change set modifies HyperPodCluster's {', '.join(modified)}" if modified else "")
    if checking and what:
        shown_nodes = ", ".join(checking[:5]) + (f" and {len(checking) - 5} more" if len(checking) > 5 else "")
        return Check(name=DEEP_HEALTH_CHECK_NAME, status="FAIL",
                     detail=f"{len(checking)} node(s) in deep health checks ({shown_nodes}), and {what}: HyperPod "
                            f"refuses UpdateCluster until they finish, so the {deployment}-hyperpod stack update "
                            "would fail",
                     fix="wait until 'hyperpod-dpd status' shows every node Running, then deploy; meanwhile deploy "
                         "only the other stacks")
    if checking:
        return Check(name=DEEP_HEALTH_CHECK_NAME, status="PASS",
                     detail=f"{len(checking)} node(s) in deep health checks; the config changes no instance group")
    detail = f"no node of {name} in deep health checks"
    if changes:
        detail += f"; the update changes {'; '.join(changes)}"
        live = {g.get("InstanceGroupName"): g.get("TargetCount") or 0 for g in cluster.get("InstanceGroups") or []}
        groups = hyperpod.instance_groups
        if any(g.deep_health_checks and g.instance_count > live.get(g.name, 0) for g in groups):
            detail += " and starts deep health checks on the new nodes: later instance-group changes are refused " \
                      "until they end"
    return Check(name=DEEP_HEALTH_CHECK_NAME, status="PASS", detail=detail)


# --- all ----------------------------------------------------------------------------------------------------

class _NoCredentials:
    """A client every call of which raises ``NoCredentialsError``, as botocore's does without credentials (before
    anything is sent): what the checks would call without running any."""

    def __getattr__(self, operation: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise NoCredentialsError

        return call


def run(target: Target, clients: Clients, now: dt.datetime | None = None) -> list[Check]:
    """Every check, in the order a deploy would hit them. Without working credentials, the credentials check FAILs
    and every other check of this config is listed ``UNKNOWN``, ``not run: ...`` (no AWS call is made): the user sees
    what preflight would check."""
    identity, account = check_identity(clients, target.accounts)
    if account is None:
        why = "no credentials" if identity.detail.startswith("NoCredentialsError") else "the credentials check failed"
        not_run = _account_checks(target, Clients(lambda service: _NoCredentials()), "000000000000", now)
        return [identity, *(Check(name=c.name, status="UNKNOWN", detail=f"not run: {why}",
                                  fix="fix the credentials row, then run preflight again") for c in not_run)]
    return [identity, *_account_checks(target, clients, account, now)]


def _account_checks(target: Target, clients: Clients, account: str, now: dt.datetime | None) -> list[Check]:
    """The checks after the credentials one, of ``account``: the cluster-wide ones once, the bucket checks once per
    model bucket."""
    t = target
    checks = [check_bootstrap(clients, t.region, account)]
    try:
        zones = zone_ids(clients)
    except (ClientError, BotoCoreError) as exc:
        checks.append(_unknown("GPU AZ ID", "list the AZs", exc, "allow ec2:DescribeAvailabilityZones"))
        zones = {}
    else:
        checks.append(check_az(t.network.gpu_availability_zone_id, t.region, zones))
    checks += list(check_quotas(clients, t.hyperpod.instance_groups))
    checks += list(check_training_plans(clients, t.hyperpod.instance_groups, t.network.gpu_availability_zone_id,
                                        zones, now))
    checks += list(check_addons(clients, t.eks.kubernetes_version))
    checks += list(check_admin_principal(clients, t.eks.admin_principal_arn))
    for bucket in t.model_buckets:
        checks += list(check_model_bucket(clients, bucket, t.region))
    checks += list(check_network_quotas(clients, t.network.nat_gateways))
    checks.append(check_deep_health_checks(clients, t.hyperpod, t.deployment))
    return checks


def ok(checks: list[Check]) -> bool:
    """No check failed and every check completed."""
    return not any(c.status in NOT_OK for c in checks)


def as_json(checks: list[Check]) -> str:
    return json.dumps({"ok": ok(checks), "checks": [asdict(c) for c in checks]}, indent=2)


TEMPLATES_CHECK = "templates"


def check_templates(env: Environment) -> Check:
    """The environment's synthesized templates: of the config as it is now, and deployable (CloudFormation refuses a
    template holding the stand-in of a Helm chart set-up could not fetch: :func:`hyperpod_core.assembly.undeployable`).
    Local files only."""
    try:
        cdk_out = env.require_synthesized()
    except UsageError as exc:
        return Check(name=TEMPLATES_CHECK, status="FAIL", detail=str(exc).split("; run:")[0],
                     fix=f"hyperpod-dpd synth {env.selector}")
    blocked = undeployable_line(cdk_out, ["--all"])
    if blocked:
        return Check(name=TEMPLATES_CHECK, status="FAIL", detail=blocked.split("; run ")[0],
                     fix="./scripts/setup with access to raw.githubusercontent.com (or HYPERPOD_CHART_CACHE), then "
                         f"hyperpod-dpd synth {env.selector}")
    return Check(name=TEMPLATES_CHECK, status="PASS", detail=f"{cdk_out}: synthesized from {env.config_path} as it is "
                                                             "now, deployable")
