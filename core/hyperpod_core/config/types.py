"""Field types of the config: each carries one single-field rule, in our wording and in the JSON Schema.

A type is ``Annotated[<python type>, FieldRule(...)]``. Its check runs after pydantic's own (strict) validation;
a value that breaks it fails with :data:`RULE_ERROR`, which the loader turns into the one line
``<dotted.path[i]> <what is allowed>, got <value>``. The same rule goes into ``config/schema.json`` as JSON
Schema keywords (``pattern``, ``enum``, ``uniqueItems``, ...), with the wording as ``errorMessage`` (VS Code's
vocabulary), so editors check a config as the model does. Where the schema cannot say all of a rule (a CIDR's
host bits, a private range), its keywords are the part it can say and the check does the rest.

Rules that compare two fields are not here: they are in :mod:`hyperpod_core.config.rules`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from hyperpod_core import instances, pins
from hyperpod_core.config.az_ids import published_az_ids
from hyperpod_core.names import IAM_PRINCIPAL_ARN_PATTERN

#: The pydantic error type of a broken field rule; its context holds ``allowed``, ``value`` and ``detail``.
RULE_ERROR: Final = "config_rule"
_AS_GIVEN: Final = object()


class Broken(Exception):
    """Raised by a rule's check: ``allowed`` says what is allowed (``must be ...``), ``detail`` why not;
    ``shown_as`` is the value the message shows when not the one given (a CIDR in its normal form)."""

    def __init__(self, allowed: str, detail: str = "", *, shown_as: Any = _AS_GIVEN) -> None:
        super().__init__(allowed)
        self.allowed = allowed
        self.detail = detail
        self.shown_as = shown_as


@dataclass(frozen=True, eq=False)
class FieldRule:
    """One single-field rule as ``Annotated`` metadata: ``check`` raises :class:`Broken`; ``summary`` is what
    is allowed, in words (the schema's ``errorMessage``); ``keywords`` are the JSON Schema that says it."""

    check: Callable[[Any], None]
    summary: str
    keywords: Mapping[str, Any] = field(default_factory=dict)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), **self.keywords, "errorMessage": self.summary}

    def _validate(self, value: Any) -> Any:
        try:
            self.check(value)
        except Broken as exc:
            shown = list(value) if isinstance(value, tuple) else value
            if exc.shown_as is not _AS_GIVEN:
                shown = exc.shown_as
            raise PydanticCustomError(RULE_ERROR, "{allowed}",
                                      {"allowed": exc.allowed, "value": shown, "detail": exc.detail}) from None
        return value


def matching(pattern: str, allowed: str, *, flags: re.RegexFlag = re.ASCII, **keywords: Any) -> FieldRule:
    """A string rule that is one anchored regular expression: the check and the schema's ``pattern``."""
    compiled = re.compile(pattern, flags)

    def check(value: str) -> None:
        if not compiled.fullmatch(value):
            raise Broken(allowed)

    return FieldRule(check, allowed, {"pattern": pattern, **keywords})


def one_of(values: tuple[str, ...] | frozenset[str], allowed: str) -> FieldRule:
    """A string rule that is a fixed list; the schema lists it as ``enum`` (sorted when it is a set)."""
    ordered = sorted(values) if isinstance(values, frozenset) else list(values)

    def check(value: str) -> None:
        if value not in values:
            raise Broken(allowed)

    return FieldRule(check, allowed, {"enum": ordered})


def unique(item: str) -> FieldRule:
    """A sequence rule: no item twice (``uniqueItems``)."""
    allowed = f"must not repeat {item}"

    def check(value: tuple[Any, ...]) -> None:
        if len(set(value)) != len(value):
            raise Broken(allowed)

    return FieldRule(check, allowed, {"uniqueItems": True})


# --- AWS: regions, AZ IDs ---------------------------------------------------------------------------------

#: Region codes of the aws, aws-cn and aws-us-gov partitions, pinned from botocore 1.44.8
#: ``botocore/data/endpoints.json`` (``partitions[].regions``); tests/infra/test_config.py re-reads that file.
AWS_REGIONS: Final[frozenset[str]] = frozenset({
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2",
    "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1",
    "me-central-1", "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
    "us-west-2", "cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1",
})

#: AZ IDs in which EKS does not create control planes (EKS user guide, "View Amazon EKS networking
#: requirements for VPC and subnets": "us-east-1 use1-az3, us-west-1 usw1-az2, ca-central-1 cac1-az3").
EKS_UNSUPPORTED_AZ_IDS: Final = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

_DIRECTIONS = {
    "north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
    "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw",
}
AZ_ID_PATTERN: Final = r"^[a-z]{3,6}[0-9]-az[0-9]{1,2}$"
_AZ_ID_ALLOWED = "must be an AZ ID such as usw2-az1 (<region prefix>-az<n>; not an AZ name such as us-west-2a)"


def az_id_prefix(region: str) -> str:
    """The AZ-ID prefix of a region: ``us-west-2`` -> ``usw2``, ``ap-northeast-1`` -> ``apne1``."""
    parts = region.split("-")
    if len(parts) == 4:  # us-gov-west-1
        return parts[0] + "gw" + parts[3] if parts[1] == "gov" else region
    area, direction, number = parts
    return area + _DIRECTIONS.get(direction, direction[:1]) + number


def default_control_plane_az_ids(region: str) -> tuple[str, str]:
    """The first two AZ IDs of ``region`` that EKS supports: from the AZ IDs AWS publishes
    (:mod:`hyperpod_core.config.az_ids`), else ``<prefix>-az1``, ``-az2``, ...

    AZ IDs, unlike names, mean the same physical AZ in every account. Override
    ``network.control_plane_availability_zone_ids`` where yours differ.
    """
    prefix = az_id_prefix(region)
    candidates = published_az_ids(region) or tuple(f"{prefix}-az{i}" for i in range(1, 7))
    ids = [i for i in candidates if i not in EKS_UNSUPPORTED_AZ_IDS]
    return ids[0], ids[1]


def aws_partition(region: str) -> str:
    """The ARN partition of a region (IAM User Guide, "IAM identifiers", ARN format): ``aws-cn`` for China,
    ``aws-us-gov`` for GovCloud, ``aws`` for every other region."""
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


Region = Annotated[str, one_of(AWS_REGIONS, "must be an AWS region code such as us-west-2")]
AzId = Annotated[str, matching(AZ_ID_PATTERN, _AZ_ID_ALLOWED)]
#: An AZ ID, or the empty string, which has always meant the same as leaving the key out.
AzIdOrEmpty = Annotated[str, matching(f"^(|{AZ_ID_PATTERN[1:-1]})$", _AZ_ID_ALLOWED)]

_CONTROL_PLANE_NOT = (f"must be an AZ ID where EKS creates control planes (not "
                      f"{', '.join(sorted(EKS_UNSUPPORTED_AZ_IDS))}; EKS user guide, subnet requirements)")


def _control_plane_az_id(value: str) -> None:
    if not re.fullmatch(AZ_ID_PATTERN, value, re.ASCII):
        raise Broken(_AZ_ID_ALLOWED)
    if value in EKS_UNSUPPORTED_AZ_IDS:
        raise Broken(_CONTROL_PLANE_NOT)


ControlPlaneAzId = Annotated[str, FieldRule(
    _control_plane_az_id, f"must be an AZ ID such as usw2-az1 where EKS creates control planes (not "
                          f"{', '.join(sorted(EKS_UNSUPPORTED_AZ_IDS))})",
    {"pattern": AZ_ID_PATTERN, "not": {"enum": sorted(EKS_UNSUPPORTED_AZ_IDS)}})]


# --- IPv4 CIDRs -------------------------------------------------------------------------------------------

#: What ``ipaddress.IPv4Network`` parses, as a pattern: four decimal octets without leading zeros, then a
#: prefix length (leading zeros allowed, 0-32) or a netmask/hostmask in dotted form, or nothing (a /32).
#: The check parses with ``ipaddress`` itself; the pattern lets editors catch the typos.
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_ADDRESS = rf"{_OCTET}(\.{_OCTET}){{3}}"


def _cidr_pattern(prefix_lengths: str, *, prefix_optional: bool) -> str:
    suffix = rf"/(0*({prefix_lengths})|{_ADDRESS})"
    return rf"^{_ADDRESS}({suffix})?$" if prefix_optional else rf"^{_ADDRESS}{suffix}$"


def parse_cidr(value: str) -> ipaddress.IPv4Network:
    """``value`` as an IPv4 network; :class:`Broken` when it is none or has host bits set."""
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise Broken("must be an IPv4 CIDR with no host bits set", detail=f" ({exc})") from None


def _cidr(value: str) -> None:
    parse_cidr(value)


Cidr = Annotated[str, FieldRule(_cidr, "must be an IPv4 CIDR with no host bits set",
                                {"pattern": _cidr_pattern("[0-9]|[12][0-9]|3[0-2]", prefix_optional=True)})]

_SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")


def _vpc_cidr(largest_prefix: int, prefix_lengths: str, why: str = "") -> FieldRule:
    """A VPC CIDR block: private, /16 to /28 (the VPC limits) and at most ``/largest_prefix`` (``why``)."""

    def check(value: str) -> None:
        net = parse_cidr(value)
        if not 16 <= net.prefixlen <= 28:
            raise Broken("must have a prefix length between /16 and /28 (VPC limits)", shown_as=str(net))
        if not (net.is_private or net.subnet_of(_SHARED_ADDRESS_SPACE)):
            raise Broken("must be a private range (RFC 1918 or 100.64.0.0/10)", shown_as=str(net))
        if net.prefixlen > largest_prefix:
            raise Broken(f"must be /{largest_prefix} or larger {why}".strip(), shown_as=str(net))

    return FieldRule(check, f"must be a private IPv4 CIDR (RFC 1918 or 100.64.0.0/10) with no host bits set, "
                            f"/16 to /{largest_prefix}",
                     {"pattern": _cidr_pattern(prefix_lengths, prefix_optional=False)})


#: The primary VPC CIDR: it holds two public and two private subnets.
PrimaryVpcCidr = Annotated[str, _vpc_cidr(20, "1[6-9]|20", "to hold 2 public and 2 private subnets")]
#: Any CIDR block of a VPC (a secondary one).
VpcCidrBlock = Annotated[str, _vpc_cidr(28, "1[6-9]|2[0-8]")]


# --- names ------------------------------------------------------------------------------------------------

#: Also the Kubernetes label value ``app.kubernetes.io/part-of``: it must end with a letter or digit.
DeploymentName = Annotated[str, matching(
    r"^[A-Za-z]([A-Za-z0-9-]{0,38}[A-Za-z0-9])?$",
    "must start with a letter, end with a letter or digit and hold 1-40 letters, digits or '-'")]
#: EKS CreateCluster ``name``.
EksClusterName = Annotated[str, matching(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$",
                                         "must match ^[0-9A-Za-z][A-Za-z0-9-_]{0,99}$")]
#: SageMaker names (cluster, instance group, model): ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$``.
SageMakerName = Annotated[str, matching(
    r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
    "must be 1-63 letters, digits or '-' and start and end with a letter or digit")]
#: A model revision (``model.revision``): one path segment of the weights' mount path and of vLLM's ``--model``
#: (``/opt/ml/model/<model.name>/<revision>``), so no '/', no ':' (core/v1 ``VolumeMount.mountPath``: "Must not
#: contain ':'", as the v3.3 CRD's embedded pod-spec ``volumeMounts`` describe it, line 2360-2363; the IEC's
#: ``modelVolumeMount.mountPath`` becomes such a mount), no '@' (LMCache joins its key fields with '@'), never '.' or
#: '..'.
ModelRevision = Annotated[str, matching(
    r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
    "must be 1-64 letters, digits, '.', '_' or '-' starting with a letter or digit (a path segment of vLLM's "
    "--model)")]
#: Kubernetes DNS label (RFC 1123): endpoint and namespace names.
DnsLabel = Annotated[str, matching(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                                   "must be a Kubernetes DNS label (lowercase a-z, 0-9, '-', at most 63)")]
#: A benchmark scenario name: a DNS label short enough for the Job and file names it becomes part of.
ScenarioName = Annotated[str, matching(r"^[a-z0-9]([-a-z0-9]{0,22}[a-z0-9])?$",
                                       "must be a DNS label of at most 24 characters")]

#: Kubernetes label key: optional DNS-subdomain prefix of at most 253 characters and '/', then a name of at most
#: 63 characters (kubernetes.io, "Labels and Selectors", Syntax and character set). An empty prefix ("/name")
#: has always been let through (kept as it was; Kubernetes itself would refuse it).
_LABEL_KEY_PATTERN = (r"^((?=[^/]{0,253}/)([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?/)?"
                      r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_KEY_RE = re.compile(_LABEL_KEY_PATTERN, re.ASCII)


def is_label_key(key: str) -> bool:
    """A valid Kubernetes label key (``[prefix/]name``)."""
    return bool(_LABEL_KEY_RE.fullmatch(key))


LabelKey = Annotated[str, matching(
    _LABEL_KEY_PATTERN, "must be a Kubernetes label key ([DNS-subdomain prefix/]name of at most 63 letters, "
                        "digits, '-', '_', '.', starting and ending with a letter or digit)")]
#: A Prometheus label name.
PrometheusLabel = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]
#: An Amazon Managed Grafana workspace ID.
GrafanaWorkspaceId = Annotated[str, Field(pattern=r"^g-[0-9a-f]{10}$")]


# --- IAM, SageMaker, EC2, EKS -----------------------------------------------------------------------------

#: IAM quotas (IAM User Guide, "IAM and AWS STS quotas"): role and user names at most 64 characters.
IAM_NAME_MAX: Final = 64
#: SageMaker CreateTrainingPlan: TrainingPlanName at most 64 characters.
TRAINING_PLAN_NAME_MAX: Final = 64

_IAM_ALLOWED = "must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)"


def _iam_principal_arn(value: str) -> None:
    if not re.fullmatch(IAM_PRINCIPAL_ARN_PATTERN, value):
        raise Broken(_IAM_ALLOWED)
    if len(value.rsplit("/", 1)[1]) > IAM_NAME_MAX:
        raise Broken(f"must name a role or user of at most {IAM_NAME_MAX} characters (IAM quota)")


IamPrincipalArn = Annotated[str, FieldRule(
    _iam_principal_arn, f"{_IAM_ALLOWED}, its name at most {IAM_NAME_MAX} characters",
    {"pattern": IAM_PRINCIPAL_ARN_PATTERN, "allOf": [{"pattern": f"/[^/]{{0,{IAM_NAME_MAX}}}$"}]})]

_TRAINING_PLAN_PATTERN = r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:training-plan/[a-z0-9-]+$"
_TRAINING_PLAN_ALLOWED = ("must be a SageMaker training plan ARN "
                          "(arn:aws:sagemaker:<region>:<account>:training-plan/<name>)")


def _training_plan_arn(value: str) -> None:
    if not re.fullmatch(_TRAINING_PLAN_PATTERN, value, re.ASCII):
        raise Broken(_TRAINING_PLAN_ALLOWED)
    if len(value.rsplit("/", 1)[1]) > TRAINING_PLAN_NAME_MAX:
        raise Broken(f"must name a training plan of at most {TRAINING_PLAN_NAME_MAX} characters")


TrainingPlanArn = Annotated[str, FieldRule(
    _training_plan_arn, f"{_TRAINING_PLAN_ALLOWED}, its name at most {TRAINING_PLAN_NAME_MAX} characters",
    {"pattern": _TRAINING_PLAN_PATTERN.replace("+$", f"{{1,{TRAINING_PLAN_NAME_MAX}}}$")})]

#: An instance type the operator runs DPD on (EFA RDMA read/write; :data:`hyperpod_core.instances.DPD_INSTANCE_TYPES`).
DpdInstanceType = Annotated[str, one_of(
    instances.DPD_INSTANCE_TYPES,
    f"must be an EFA RDMA instance type that supports DPD ({', '.join(instances.DPD_INSTANCE_TYPES)})")]
Ec2InstanceType = Annotated[str, matching(r"^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.[a-z0-9]+$",
                                          "must be an EC2 instance type such as m7i.xlarge")]

_K8S_ALLOWED = (f"must be one of {', '.join(pins.SUPPORTED_KUBERNETES_VERSIONS)} (HyperPod-supported, pinned)")


def _kubernetes_version(value: str) -> None:
    if value not in pins.SUPPORTED_KUBERNETES_VERSIONS:
        raise Broken(_K8S_ALLOWED)
    for pin in pins.ADDONS:  # read at validation time: the table is the one pins holds now
        if value not in pin.kubernetes_versions:
            raise Broken(f"must be a version the pinned add-on {pin.name} {pin.version} is offered for "
                         f"({', '.join(pin.kubernetes_versions)}; pins.ADDONS, checked {pin.checked}; refresh with "
                         "scripts/refresh-addon-versions)")


#: A Kubernetes version HyperPod supports and every pinned add-on is offered for (pins.ADDONS).
KubernetesVersion = Annotated[str, FieldRule(
    _kubernetes_version, f"{_K8S_ALLOWED}, offered for every pinned add-on (pins.ADDONS)",
    {"enum": list(pins.SUPPORTED_KUBERNETES_VERSIONS)})]


# --- S3 ---------------------------------------------------------------------------------------------------

#: An S3 general-purpose bucket name (Amazon S3 User Guide, "Bucket naming rules"): 3-63 lowercase letters,
#: digits, '.', '-'; no '..', not an IP address, no ``xn--`` prefix, no ``-s3alias`` suffix.
_BUCKET_PATTERN = (r"^(?!xn--)(?!.*\.\.)(?!.*-s3alias$)(?![0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$)"
                   r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RE = re.compile(_BUCKET_PATTERN, re.ASCII)


def is_bucket_name(name: str) -> bool:
    """An S3 general-purpose bucket name (Amazon S3 User Guide, "Bucket naming rules"): 3-63 characters."""
    return bool(_BUCKET_RE.fullmatch(name))


BucketName = Annotated[str, matching(_BUCKET_PATTERN,
                                     "must be a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-')")]

#: S3 "safe characters" for object keys (Amazon S3 User Guide, "Naming Amazon S3 objects"), minus '*': the
#: prefix becomes an IAM resource ARN and an ``s3:prefix`` condition, where '*' and '?' are wildcards.
#: Segments are non-empty and never '.' or '..'.
_S3_PREFIX_PATTERN = r"^(?:(?!\.{1,2}/)[A-Za-z0-9!_.'()-]+/)+$"
S3_PREFIX_MAX = 512
_S3_PREFIX_SHAPE = "must be a key prefix without a leading '/' that ends with '/'"
_S3_PREFIX_CHARACTERS = ("must hold only S3 safe characters (letters, digits, ! _ . ' ( ) -) in '/'-separated "
                         "segments, no '*' and no '.' or '..' segment")


def _s3_prefix(value: str) -> None:
    if value.startswith("/") or not value.endswith("/") or "//" in value or len(value) > S3_PREFIX_MAX:
        raise Broken(_S3_PREFIX_SHAPE)
    if not re.fullmatch(_S3_PREFIX_PATTERN, value, re.ASCII):
        raise Broken(_S3_PREFIX_CHARACTERS)


S3Prefix = Annotated[str, FieldRule(
    _s3_prefix,
    f"{_S3_PREFIX_SHAPE}, at most {S3_PREFIX_MAX} characters; {_S3_PREFIX_CHARACTERS.removeprefix('must ')}",
    {"pattern": _S3_PREFIX_PATTERN, "maxLength": S3_PREFIX_MAX})]
#: ``s3://<bucket>[/<prefix>]``, no white space (Unicode's included, as in the schema's ECMA-262 ``\s``).
S3Uri = Annotated[str, matching(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$", "must be s3://<bucket>/<prefix>",
                                flags=re.NOFLAG)]


# --- KMS --------------------------------------------------------------------------------------------------

#: A KMS key ARN (KMS Developer Guide, "Key identifiers (KeyId)": ``arn:<partition>:kms:<region>:<account>:key/<key
#: ID>``, the key ID a UUID, or ``mrk-`` and 32 hex digits for a multi-Region key). Never an alias or its ARN: an IAM
#: policy names a KMS key by its key ARN only (KMS Developer Guide, "Specifying KMS keys in IAM policy statements":
#: "You cannot use a key id, alias name, or alias ARN to identify a KMS key in an IAM policy statement").
_KMS_KEY_ARN_PATTERN = (r"^arn:aws(-cn|-us-gov)?:kms:[a-z0-9-]+:[0-9]{12}:key/"
                        r"(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
KmsKeyArn = Annotated[str, matching(
    _KMS_KEY_ARN_PATTERN, "must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias: IAM "
                          "names a key by its key ARN only)")]


# --- images and paths -------------------------------------------------------------------------------------

_IMAGE_NAME = r"[a-z0-9][a-z0-9._/-]*"
_IMAGE_TAG = r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_IMAGE_DIGEST = r"@sha256:[a-f0-9]{64}"
#: An image reference pinned to a tag, a digest or both (``<name>:<tag>``, ``<name>@sha256:<hex>``).
PinnedImage = Annotated[str, matching(rf"^{_IMAGE_NAME}(({_IMAGE_TAG})({_IMAGE_DIGEST})?|{_IMAGE_DIGEST})$",
                                      "must be an image reference pinned to a tag or digest")]
#: An image reference pinned by digest (a tag may come with it).
DigestPinnedImage = Annotated[str, matching(rf"^{_IMAGE_NAME}({_IMAGE_TAG})?{_IMAGE_DIGEST}$",
                                            "must be pinned by digest (<image>@sha256:<64 hex>)")]
#: A URL path without a leading '/' and without a '.' or '..' segment: the router and the sidecar would resolve
#: one to another path than the one the operator registers (RFC 3986, section 5.2.4, "Remove Dot Segments").
InvocationPath = Annotated[str, matching(
    r"^(?!/)(?!(.*/)?\.\.?(/|$))[A-Za-z0-9_./-]{1,200}$",
    "must be a URL path without a leading '/' and without '.' or '..' segments (letters, digits, '_', '.', '-', '/')")]
#: The weights cache's host path: the instance-store mount of HyperPod nodes or a directory below it (anything
#: else is the root or EBS volume, which a 70B model's ~140 GB would fill), within the CRD's 255 characters.
_NVME_HOST_PATH = rf"^{re.escape(instances.INSTANCE_STORE_MOUNT)}(/(?!\.\.?(/|$))[A-Za-z0-9._-]+)*$"
_NVME_HOST_PATH_ALLOWED = (f"must be {instances.INSTANCE_STORE_MOUNT} or a directory below it (where HyperPod nodes "
                           "mount the NVMe instance store), at most 255 characters")


def _nvme_host_path(value: str) -> None:
    if len(value) > 255 or not re.fullmatch(_NVME_HOST_PATH, value, re.ASCII):
        raise Broken(_NVME_HOST_PATH_ALLOWED)


NvmeHostPath = Annotated[str, FieldRule(_nvme_host_path, _NVME_HOST_PATH_ALLOWED,
                                        {"pattern": _NVME_HOST_PATH, "maxLength": 255})]


# --- benchmark traffic ------------------------------------------------------------------------------------

#: genai-bench traffic scenarios we accept: deterministic ``D(in,out)``, normal ``N(mean,std)/(mean,std)``,
#: uniform ``U(min,max)/(min,max)`` (genai-bench docs, "Traffic scenarios"; scenarios/text.py). Spaces anywhere.
_SCENARIO_D_RE = re.compile(r"^D\((\d+),(\d+)\)$")
_SCENARIO_N_RE = re.compile(r"^N\((\d+),(\d+)\)/\((\d+),(\d+)\)$")
_SCENARIO_U_RE = re.compile(r"^U\((\d+),(\d+)\)/\((\d+),(\d+)\)$")
#: How far from ``endpoint.routing_threshold_tokens`` a prompt must stay so that the router's *estimate*
#: cannot flip its path (the router estimates tokens; chat templates add some): 25 %.
BENCHMARK_PATH_MARGIN: Final = 0.25


def scenario_token_range(traffic: str) -> tuple[int, int, int]:
    """``(lowest input, highest input, highest output)`` tokens of a genai-bench scenario string.

    ``N`` counts mean +- 2 standard deviations (genai-bench samples a normal distribution and clips at 1).
    Raises :class:`ValueError` for anything else.
    """
    t = traffic.replace(" ", "")
    if m := _SCENARIO_D_RE.fullmatch(t):
        i, o = int(m[1]), int(m[2])
        return i, i, o
    if m := _SCENARIO_N_RE.fullmatch(t):
        im, isd, om, osd = (int(x) for x in m.groups())
        return max(1, im - 2 * isd), im + 2 * isd, om + 2 * osd
    if m := _SCENARIO_U_RE.fullmatch(t):
        imin, imax, omin, omax = (int(x) for x in m.groups())
        if imin > imax or omin > omax:
            raise ValueError("U(min,max): min must not exceed max")
        return imin, imax, omax
    raise ValueError("must be D(in,out), N(mean,std)/(mean,std) or U(min,max)/(min,max)")


def _traffic(value: str) -> None:
    try:
        scenario_token_range(value)
    except ValueError as exc:
        raise Broken(str(exc)) from None


_NUMBER = r"\d( *\d)*"


def _spaced(*tokens: str) -> str:
    """The scenario grammar with spaces allowed between its tokens and inside its numbers (the parser drops
    every space), as one pattern: literal tokens escaped, :data:`_NUMBER` as is."""
    return " *".join(t if t == _NUMBER else re.escape(t) for t in tokens)


_PAIR = ("(", _NUMBER, ",", _NUMBER, ")")
TrafficScenario = Annotated[str, FieldRule(
    _traffic, "must be D(in,out), N(mean,std)/(mean,std) or U(min,max)/(min,max) (U: min must not exceed max)",
    {"pattern": f"^ *({_spaced('D', *_PAIR)}|{_spaced('N', *_PAIR, '/', *_PAIR)}|{_spaced('U', *_PAIR, '/', *_PAIR)})"
                " *$"})]


# --- alerts (observability.alerts) ------------------------------------------------------------------------

#: An e-mail address as SNS takes it for an ``email`` subscription: one '@', no white space, a dotted domain.
EmailAddress = Annotated[str, matching(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$", "must be an e-mail address (name@domain.tld)",
                                       flags=re.NOFLAG)]
#: An SNS topic ARN (SNS API reference, CreateTopic: names of 1-256 letters, digits, '-', '_'; FIFO topics end
#: in '.fifo', which AMP's alert manager cannot publish to: it supports Standard topics only).
SnsTopicArn = Annotated[str, matching(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$",
                                      "must be a Standard SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)")]
