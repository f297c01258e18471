"""The one typed configuration that drives both the CDK app and the cdk8s app.

Loaded only at the edges (``app.py``, the cdk8s entry point, the scripts). Every rule here produces a
:class:`ConfigError` whose message names the field, the bad value and what is allowed, so that an entry
point can print exactly one line and exit 2.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hyperpod_core import pins, sizing
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.names import IAM_PRINCIPAL_ARN_PATTERN, EndpointNames

# --- facts the rules rely on -----------------------------------------------------------------------------

#: Instance types with EFA RDMA read/write that the operator supports for DPD (sagemaker-hyperpod-model-
#: deployment-dpd, "Requirements"), with GPUs per node from the one instance table.
DPD_INSTANCE_TYPES: tuple[str, ...] = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge",
                                       "ml.p6-b300.48xlarge")
DPD_INSTANCE_GPUS: dict[str, int] = {t: sizing.INSTANCE_FACTS[t].gpus for t in DPD_INSTANCE_TYPES}

#: IP addresses one ml.p5.48xlarge-class node takes from its subnet on EKS (VPC CNI, EFA interfaces and
#: pods), per the HyperPod capacity-planning guide; we double it for rolling replacement.
IPS_PER_GPU_NODE = 81
SUBNET_HEADROOM_FACTOR = 2
#: AWS reserves the first four and the last address of every subnet.
AWS_RESERVED_IPS_PER_SUBNET = 5

#: AZ IDs in which EKS does not create control planes (EKS user guide, "View Amazon EKS networking
#: requirements for VPC and subnets": "us-east-1 use1-az3, us-west-1 usw1-az2, ca-central-1 cac1-az3").
EKS_UNSUPPORTED_AZ_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

_DIRECTIONS = {
    "north": "n", "south": "s", "east": "e", "west": "w", "central": "c",
    "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw",
}
_REGION_RE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$", re.ASCII)
_AZ_ID_RE = re.compile(r"^[a-z]{3,6}\d-az\d{1,2}$", re.ASCII)
_SAGEMAKER_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", re.ASCII)
_EKS_NAME_RE = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$", re.ASCII)
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", re.ASCII)
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", re.ASCII)
_IAM_PRINCIPAL_RE = re.compile(IAM_PRINCIPAL_ARN_PATTERN)
_TRAINING_PLAN_RE = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/[a-z0-9-]+$", re.ASCII)
_IMAGE_RE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$", re.ASCII)
#: S3 "safe characters" for object keys (Amazon S3 User Guide, "Naming Amazon S3 objects"), minus '*': the
#: prefix becomes an IAM resource ARN and an ``s3:prefix`` condition, where '*' and '?' are wildcards.
#: Segments are non-empty and never '.' or '..'.
_S3_PREFIX_RE = re.compile(r"^(?:(?!\.{1,2}/)[A-Za-z0-9!_.'()-]+/)+$", re.ASCII)
#: Kubernetes label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters
#: (kubernetes.io, "Labels and Selectors", Syntax and character set).
_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", re.ASCII)
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", re.ASCII)
#: IAM quotas (IAM User Guide, "IAM and AWS STS quotas"): role and user names at most 64 characters.
IAM_NAME_MAX = 64
#: SageMaker CreateTrainingPlan: TrainingPlanName at most 64 characters.
TRAINING_PLAN_NAME_MAX = 64

#: Region codes of the aws, aws-cn and aws-us-gov partitions, pinned from botocore 1.44.8
#: ``botocore/data/endpoints.json`` (``partitions[].regions``); tests/infra/test_config.py re-reads that file.
AWS_REGIONS: frozenset[str] = frozenset({
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2",
    "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1",
    "me-central-1", "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
    "us-west-2", "cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1",
})


def is_label_key(key: str) -> bool:
    """A valid Kubernetes label key (``[prefix/]name``)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return bool(_LABEL_NAME_RE.fullmatch(name))


def default_control_plane_az_ids(region: str) -> tuple[str, str]:
    """The first two AZ IDs of ``region`` (``<prefix>-az1``, ``-az2``, ...) that EKS supports.

    AZ IDs, unlike names, mean the same physical AZ in every account; ``az1``..``az3`` exist in every
    commercial region. Override ``network.control_plane_availability_zone_ids`` where yours differ.
    """
    prefix = az_id_prefix(region)
    ids = [f"{prefix}-az{i}" for i in range(1, 7) if f"{prefix}-az{i}" not in EKS_UNSUPPORTED_AZ_IDS]
    return ids[0], ids[1]


def az_id_prefix(region: str) -> str:
    """The AZ-ID prefix of a region: ``us-west-2`` -> ``usw2``, ``ap-northeast-1`` -> ``apne1``."""
    parts = region.split("-")
    if len(parts) == 4:  # us-gov-west-1
        return parts[0] + "gw" + parts[3] if parts[1] == "gov" else region
    area, direction, number = parts
    return area + _DIRECTIONS.get(direction, direction[:1]) + number


# --- the model ------------------------------------------------------------------------------------------


class _Model(BaseModel):
    # strict: no coercion, so `true` is not a replica count, "8" not a number, "yes" not a boolean; no inf/nan
    # in any float. Sequences arrive as tuples (parse_config): declare sequence fields as tuple[...], not list.
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True, strict=True,
                              allow_inf_nan=False)


Cidr = Annotated[str, Field(description="IPv4 CIDR block, e.g. 10.0.0.0/16")]
InterfaceEndpoint = Literal[
    "ecr.api", "ecr.dkr", "sts", "eks", "eks-auth", "sagemaker.api", "logs", "monitoring",
    "ssm", "ssmmessages", "ec2messages", "ec2", "elasticloadbalancing", "aps-workspaces",
]


class NetworkConfig(_Model):
    """The VPC. EKS needs subnets in two AZs; the GPU nodes get one subnet in ``gpu_availability_zone_id``."""

    vpc_cidr: Cidr = "10.0.0.0/16"
    """Primary CIDR: public and control-plane/system subnets in two AZs."""
    gpu_cidr: Cidr = "10.1.0.0/16"
    """Secondary VPC CIDR that becomes the single GPU subnet (HyperPod nodes take ~81 IPs each)."""
    gpu_availability_zone_id: str = "usw2-az2"
    """AZ *ID* (not name) of the GPU capacity: names map to different AZs in every account."""
    control_plane_availability_zone_ids: tuple[str, str]
    """The two AZ IDs of the public and control-plane/system subnets. Default (``null`` in YAML): the
    first two AZ IDs of ``region`` that EKS supports (:func:`default_control_plane_az_ids`)."""
    nat_gateways: Annotated[int, Field(ge=1, le=2)] = 1
    interface_endpoints: tuple[InterfaceEndpoint, ...] = ()
    """Interface VPC endpoints to create (needed only for private clusters). Default: none."""
    flow_logs_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 180, 365] = 30
    fsx_lustre: bool = False
    """Open the FSx for Lustre ports (988, 1018-1023) on the GPU security group. Default: off."""


class SystemNodeGroupConfig(_Model):
    instance_type: str = "m7i.xlarge"
    desired_size: Annotated[int, Field(ge=1, le=10)] = 2


class EksConfig(_Model):
    cluster_name: str
    """EKS cluster name. Default (``null`` in YAML): ``<name>-eks``, so two deployments never collide."""
    kubernetes_version: str = pins.KUBERNETES_VERSION
    admin_principal_arn: str | None = None
    """IAM role or user granted cluster admin through an access entry. Default: none: the cluster stack then
    takes the required CloudFormation parameter ``AdminPrincipalArn``, which the README deploy command fills
    with the caller (``aws sts get-caller-identity | scripts/admin-principal-arn``)."""
    endpoint_public_access_cidrs: tuple[Cidr, ...] = ("0.0.0.0/0",)
    """CIDRs allowed to reach the public API endpoint; the private endpoint is always on."""
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 180, 365] = 30
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()


DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
Pool = Literal["prefill", "decode", "shared"]


class InstanceGroupConfig(_Model):
    name: str
    instance_type: str = "ml.p5.48xlarge"
    instance_count: Annotated[int, Field(ge=0, le=6758)] = 1
    pool: Pool = "shared"
    """Which DPD role the nodes serve; becomes a Kubernetes node label and the role's nodeSelector."""
    availability_zone_id: str | None = None
    """Default: ``network.gpu_availability_zone_id``. All GPU groups must resolve to one AZ ID."""
    ebs_volume_size_gb: Annotated[int, Field(ge=1, le=16384)] = 500
    threads_per_core: Literal[1, 2] = 1
    deep_health_checks: tuple[DeepHealthCheck, ...] = ("InstanceStress", "InstanceConnectivity")
    training_plan_arn: str | None = None


class HyperPodConfig(_Model):
    cluster_name: str
    """**Create-only.** Default (``null`` in YAML): ``<name>``, so two deployments never collide."""
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    node_provisioning_mode: Literal["Continuous", "Legacy"] = "Continuous"
    instance_groups: Annotated[tuple[InstanceGroupConfig, ...], Field(min_length=1, max_length=100)]


class ModelConfig(_Model):
    name: str = "llama-3-3-70b-instruct"
    """SageMaker model name (also the InferenceEndpointConfig modelName)."""
    s3_prefix: str = "models/Llama-3.3-70B-Instruct/"
    existing_bucket_name: str | None = None
    """Use this bucket instead of creating one. Default: create ``<account>-<region>`` scoped bucket."""
    delete_on_destroy: bool = False
    """Delete the created model bucket and its data on ``cdk destroy``. Default: keep it (RETAIN)."""


def _merge_defaults(model: type[BaseModel], data: Any, fields: tuple[str, ...]) -> Any:
    """Fill the keys a user left out of the sub-mappings ``fields`` from the model's default instances.

    Without this, ``endpoint.prefill: {max_num_seqs: 8}`` would build a fresh ``RoleConfig`` and silently drop
    the role's default ``extra_args`` (``--enforce-eager``). Unknown keys still reach the model and fail there.
    """
    if not isinstance(data, dict):
        return data
    merged = dict(data)
    for name in fields:
        given = merged.get(name)
        default = model.model_fields[name].default
        if isinstance(given, dict) and isinstance(default, BaseModel):
            merged[name] = {**default.model_dump(exclude_unset=True), **given}
    return merged


class RoleConfig(_Model):
    """One DPD role (prefill or decode)."""

    replicas: Annotated[int, Field(ge=1, le=64)] = 1
    gpus: Annotated[int, Field(ge=1, le=8)] = 8
    max_num_seqs: Annotated[int, Field(ge=1, le=4096)]
    extra_args: tuple[str, ...] = ()
    """vLLM flags appended for this role only (pdSpec.<role>.args)."""
    cpu: Annotated[int, Field(ge=1)] | None = None
    """CPU request of one worker. Default: the most the node leaves a worker after the kubelet, DaemonSet and
    operator-sidecar reservations (:mod:`hyperpod_core.sizing`). A larger value is rejected."""
    memory_gib: Annotated[int, Field(ge=1)] | None = None
    """Memory request of one worker in GiB. Default and limit: as for ``cpu``."""


class RoleAutoscalingConfig(_Model):
    min_replicas: Annotated[int, Field(ge=1)] = 1
    max_replicas: Annotated[int, Field(ge=1)] = 1
    target_value: Annotated[float, Field(gt=0)]
    """Prefill: waiting requests per replica. Decode: KV-cache usage ratio (0-1)."""


class AutoscalingConfig(_Model):
    enabled: bool = False
    prefill: RoleAutoscalingConfig = RoleAutoscalingConfig(min_replicas=1, max_replicas=2, target_value=8)
    decode: RoleAutoscalingConfig = RoleAutoscalingConfig(min_replicas=1, max_replicas=1, target_value=0.8)

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        return _merge_defaults(cls, data, ("prefill", "decode"))


class KvCacheConfig(_Model):
    enable_l1_cache: bool = True
    enable_l2_cache: bool = False
    l2_cache_backend: Literal["redis", "tieredstorage"] | None = None
    l2_cache_local_url: str | None = None


class EndpointConfig(_Model):
    name: str = "llama-3-3-70b"
    namespace: str = "default"
    image: str = pins.DPD_WORKER_IMAGE
    instance_type: str = "ml.p5.48xlarge"
    tensor_parallel_size: Annotated[int, Field(ge=1, le=8)] = 8
    max_model_len: Annotated[int, Field(ge=256, le=1_048_576)] = 16384
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.75
    invocation_path: str = "v1/chat/completions"
    container_port: Annotated[int, Field(ge=1024, le=65535)] = 8000
    prefill: RoleConfig = RoleConfig(max_num_seqs=16, extra_args=("--enforce-eager",))
    decode: RoleConfig = RoleConfig(max_num_seqs=32)
    routing_threshold_tokens: Annotated[int, Field(ge=0)] = 4096
    routing_strategy: Literal["prefixaware", "kvaware", "session", "roundrobin"] = "prefixaware"
    kv_cache: KvCacheConfig = KvCacheConfig()
    pd_buffer_size_bytes: Annotated[int, Field(ge=1 << 30, le=64 << 30)] = 8 << 30
    """Decoder-side KV receive buffer per rank (PD_BUFFER_SIZE). AWS default 8 GiB; raise on OOM."""
    autoscaling: AutoscalingConfig = AutoscalingConfig()

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        """Overriding one field of ``prefill``/``decode`` keeps the role's other defaults (field by field)."""
        return _merge_defaults(cls, data, ("prefill", "decode"))


class SloConfig(_Model):
    """Thresholds the alerts fire on."""

    ttft_p95_seconds: Annotated[float, Field(gt=0)] = 2.0
    tpot_p95_seconds: Annotated[float, Field(gt=0)] = 0.1
    error_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.01
    kv_cache_usage_ratio: Annotated[float, Field(gt=0, le=1)] = 0.9
    prefill_queue_per_replica: Annotated[float, Field(gt=0)] = 16
    kv_transfer_miss_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Share of requested KV tokens decode may fail to receive from prefill before the alert fires."""
    pod_restarts_per_15m: Annotated[int, Field(ge=1)] = 2
    """Container restarts of one DPD pod within 15 minutes above which it counts as a restart loop."""


_PROM_LABEL = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]


class CollectorLabelsConfig(_Model):
    """Pod and namespace labels of the DCGM and kube-state-metrics series in the workspace. The observability
    add-on's relabelling is not published; the defaults are the labels both exporters write themselves
    (docs/observability.md, "Labels")."""

    dcgm_pod: _PROM_LABEL = "pod"
    dcgm_namespace: _PROM_LABEL = "namespace"
    kube_state_metrics_pod: _PROM_LABEL = "pod"
    kube_state_metrics_namespace: _PROM_LABEL = "namespace"


class GrafanaWorkspaceConfig(_Model):
    """An existing Amazon Managed Grafana workspace that receives the dashboards and the AMP data source."""

    workspace_id: Annotated[str, Field(pattern=r"^g-[0-9a-f]{10}$")]
    """Workspace ID (``g-`` and 10 hex digits), in ``region``."""
    folder: Annotated[str, Field(min_length=1, max_length=100)] = "HyperPod DPD"
    """Grafana folder of the dashboards."""


class ObservabilityConfig(_Model):
    enabled: bool = True
    """Create the Amazon Managed Prometheus workspace and the HyperPod observability add-on."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300)] = 15
    grafana_sidecar_label: str = "grafana_dashboard"
    slo: SloConfig = SloConfig()
    collector_labels: CollectorLabelsConfig = CollectorLabelsConfig()
    grafana_workspace: GrafanaWorkspaceConfig | None = None
    """Deploy dashboards and the AMP data source into this Amazon Managed Grafana workspace.
    Default: none (dashboards ship as sidecar ConfigMaps and JSON files only)."""


# --- benchmark (hyperpod-dpd bench / report; cdk8s chart <endpoint>-benchmark) ----------------------------

#: genai-bench traffic scenarios we accept: deterministic ``D(in,out)``, normal ``N(mean,std)/(mean,std)``,
#: uniform ``U(min,max)/(min,max)`` (genai-bench docs, "Traffic scenarios"; scenarios/text.py).
_SCENARIO_D_RE = re.compile(r"^D\((\d+),(\d+)\)$")
_SCENARIO_N_RE = re.compile(r"^N\((\d+),(\d+)\)/\((\d+),(\d+)\)$")
_SCENARIO_U_RE = re.compile(r"^U\((\d+),(\d+)\)/\((\d+),(\d+)\)$")
#: How far from ``endpoint.routing_threshold_tokens`` a prompt must stay so that the router's *estimate*
#: cannot flip its path (the router estimates tokens; chat templates add some): 25 %.
BENCHMARK_PATH_MARGIN = 0.25


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


class BenchmarkScenarioConfig(_Model):
    """One traffic shape of the benchmark matrix."""

    name: str
    """Short DNS label (part of Job and file names)."""
    traffic: str
    """genai-bench ``--traffic-scenario`` string."""
    path: Literal["dpd", "direct", "reference"] = "dpd"
    """Which router path the prompts must take on the DPD endpoint: ``dpd`` (input well above
    ``endpoint.routing_threshold_tokens``), ``direct`` (well below: straight to decode), ``reference``
    (reproduces a published setup as is, e.g. AWS's D(4096,256), even when it sits at the threshold)."""


#: Output lengths of the adoption checklist's shapes: "long" is AWS's >= 256 output tokens and more.
_SHORT_OUTPUT, _LONG_OUTPUT = 128, 1024


def default_scenarios(endpoint: EndpointConfig) -> tuple[BenchmarkScenarioConfig, ...]:
    """AWS's D(4096,256) plus the adoption checklist's four shapes, sized from the endpoint's routing threshold
    (long prompts twice the threshold, short ones a quarter of it) and ``max_model_len``.

    Default endpoint (threshold 4096, max-model-len 16384): D(8192,1024), D(8192,128), D(1024,1024), D(1024,128).
    """
    s, t, cap = BenchmarkScenarioConfig, endpoint.routing_threshold_tokens, endpoint.max_model_len
    out: list[BenchmarkScenarioConfig] = []
    if cap >= 4096 + 256:
        # AWS's published DPD benchmark (1 prefill + 1 decode p5 vs one colocated node).
        out.append(s(name="aws-reference", traffic="D(4096,256)", path="reference"))
    long_in = min(2 * t if t else 8192, cap - _LONG_OUTPUT)
    if long_in >= t * (1 + BENCHMARK_PATH_MARGIN) and long_in > 0:
        out += [s(name="long-in-long-out", traffic=f"D({long_in},{_LONG_OUTPUT})", path="dpd"),
                s(name="long-in-short-out", traffic=f"D({long_in},{_SHORT_OUTPUT})", path="dpd")]
    short_in = max(128, t // 4) if t else 1024
    if short_in + _LONG_OUTPUT <= cap and (not t or short_in <= t * (1 - BENCHMARK_PATH_MARGIN)):
        path: Literal["dpd", "direct"] = "direct" if t else "dpd"
        out += [s(name="short-in-long-out", traffic=f"D({short_in},{_LONG_OUTPUT})", path=path),
                s(name="short-in-short-out", traffic=f"D({short_in},{_SHORT_OUTPUT})", path=path)]
    return tuple(out)


class BenchmarkConfig(_Model):
    """The colocated-vs-DPD benchmark matrix (``hyperpod-dpd bench``; docs/benchmark.md)."""

    client_image: str = pins.BENCHMARK_CLIENT_IMAGE
    """Image of the benchmark Job; must be pinned by digest (genai-bench is installed from a hash-pinned
    lock file mounted from a ConfigMap)."""
    scenarios: Annotated[tuple[BenchmarkScenarioConfig, ...], Field(min_length=1, max_length=20)] | None = None
    """The traffic shapes; default: :func:`default_scenarios` of the endpoint (``Config.benchmark_scenarios``)."""
    concurrency: Annotated[tuple[Annotated[int, Field(ge=1, le=1024)], ...], Field(min_length=1, max_length=10)] = (
        8, 16, 32)
    warmup_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.1
    """Share of the first requests of each run left out of the statistics (genai-bench ``--warmup-ratio``)."""
    cooldown_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.0
    max_time_per_run_minutes: Annotated[int, Field(ge=1, le=240)] = 15
    """Stop condition: a run ends after this many minutes (genai-bench ``--max-time-per-run``)..."""
    max_requests_per_run: Annotated[int, Field(ge=1, le=100_000)] = 320
    """...or after this many requests (``--max-requests-per-run``), whichever comes first."""
    target: Literal["service", "load_balancer"] = "service"
    """``service``: the router's in-cluster Service; ``load_balancer``: ``load_balancer_url`` over TLS."""
    load_balancer_url: str | None = None
    """``https://...`` of the endpoint's ALB; needs ``ca_secret_name`` (a Secret holding ``ca.pem``)."""
    ca_secret_name: str | None = None
    """Secret with key ``ca.pem``: the endpoint's TLS certificate (from the TLS bucket), for
    ``REQUESTS_CA_BUNDLE``."""
    results_s3_uri: str | None = None
    """``s3://bucket/prefix/``: where each Job uploads its result files; none = the pod log."""
    split_min_saving: Annotated[float, Field(ge=0, lt=1)] = 0.10
    """The report recommends DPD only when it is at least this much cheaper per output token than colocated
    (within that, run-to-run noise and a second pool to operate are not worth it)."""
    instance_hour_usd: Annotated[float, Field(gt=0)] | None = None
    """Price of one ``endpoint.instance_type`` node-hour; the report then adds USD per 1M output tokens
    (it always shows GPU-hours per 1M output tokens)."""


class Config(_Model):
    """The whole deployment. ``config/default.yaml`` is the AWS DPD walkthrough."""

    name: str = "hyperpod-dpd"
    """Prefix of every stack name."""
    region: str = "us-west-2"
    network: NetworkConfig
    """Always present after validation (:meth:`_derive_defaults` fills the name- and region-derived keys)."""
    eks: EksConfig
    hyperpod: HyperPodConfig
    model: ModelConfig = ModelConfig()
    endpoint: EndpointConfig = EndpointConfig()
    observability: ObservabilityConfig = ObservabilityConfig()
    benchmark: BenchmarkConfig = BenchmarkConfig()

    def benchmark_scenarios(self) -> tuple[BenchmarkScenarioConfig, ...]:
        """``benchmark.scenarios``, else the defaults sized from the endpoint."""
        return self.benchmark.scenarios or default_scenarios(self.endpoint)

    def benchmark_resource_name(self) -> str:
        """``<endpoint>-benchmark``: the benchmark ConfigMap and the ServiceAccount the Jobs run as (the cdk8s
        chart writes it; the platform stack gives it its Pod Identity association)."""
        return f"{self.endpoint.name}-benchmark"

    @model_validator(mode="before")
    @classmethod
    def _derive_defaults(cls, data: Any) -> Any:
        """Fill what derives from ``name`` and ``region`` when the YAML leaves it out or sets ``null``:
        ``eks.cluster_name`` (``<name>-eks``), ``hyperpod.cluster_name`` (``<name>``) and
        ``network.control_plane_availability_zone_ids``. After loading these are always plain values."""
        if not isinstance(data, dict):
            return data
        name = data.get("name", cls.model_fields["name"].default)
        region = data.get("region", cls.model_fields["region"].default)
        data = dict(data)
        derived: list[tuple[str, str, Any, bool]] = []
        if isinstance(name, str):
            derived += [("eks", "cluster_name", f"{name}-eks", True),
                        ("hyperpod", "cluster_name", name, False)]
        if isinstance(region, str):
            # An invalid region gets placeholders here; the region rule then reports the region itself.
            cp = default_control_plane_az_ids(region) if _REGION_RE.fullmatch(region) else ("", "")
            derived.append(("network", "control_plane_availability_zone_ids", cp, True))
        for section, key, value, create in derived:
            sub = data.get(section)
            if sub is None and create:
                sub = {}
            if isinstance(sub, dict) and sub.get(key) is None:
                data[section] = {**sub, key: value}
        return data

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Config:
        for rule in _RULES:
            rule(self)
        return self

    # Derived values used by both apps -------------------------------------------------------------------

    def worker_budget(self, role: Literal["prefill", "decode", "colocated"]) -> sizing.PodRequests:
        """The most one worker of ``role`` may request: the smallest node budget among the instance groups of
        ``endpoint.instance_type`` it can land on (its pool and ``shared``; any pool for the colocated
        baseline), shared by as many workers as the node has GPUs for."""
        e = self.endpoint
        pools: tuple[str, ...] = ("prefill", "decode", "shared") if role == "colocated" else (role, "shared")
        groups = [g for g in self.hyperpod.instance_groups
                  if g.instance_type == e.instance_type and g.pool in pools]
        groups = groups or [g for g in self.hyperpod.instance_groups if g.instance_type == e.instance_type]
        budgets = [sizing.max_pod_requests(e.instance_type, tpc, e.tensor_parallel_size)
                   for tpc in sorted({g.threads_per_core for g in groups}) or [1]]
        return sizing.PodRequests(cpu=min(b.cpu for b in budgets),
                                          memory_gib=min(b.memory_gib for b in budgets))

    def worker_requests(self, role: Literal["prefill", "decode", "colocated"]) -> sizing.PodRequests:
        """CPU and memory requests of one worker of ``role``: the configured ones, else the node budget.
        The colocated baseline runs the decode role's engine and takes its requests."""
        budget = self.worker_budget(role)
        r: RoleConfig = self.endpoint.decode if role == "colocated" else getattr(self.endpoint, role)
        return sizing.PodRequests(cpu=min(r.cpu or budget.cpu, budget.cpu),
                                          memory_gib=min(r.memory_gib or budget.memory_gib, budget.memory_gib))

    def pool_gpus(self, pool: Pool) -> int:
        """GPUs available to a DPD role: nodes in groups labelled for it, plus shared groups."""
        return sum(
            g.instance_count * DPD_INSTANCE_GPUS[g.instance_type]
            for g in self.hyperpod.instance_groups
            if g.pool in (pool, "shared")
        )


# --- cross-field rules (one function each, one failing test each) ---------------------------------------


def _fail(field: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{field} {allowed}, got {shown(value)}")


def _rule_names(c: Config) -> None:
    # Also the Kubernetes label value app.kubernetes.io/part-of: it must end with a letter or digit.
    if not re.fullmatch(r"[A-Za-z]([A-Za-z0-9-]{0,38}[A-Za-z0-9])?", c.name, re.ASCII):
        _fail("name", c.name, "must start with a letter, end with a letter or digit and hold 1-40 letters, "
                              "digits or '-'")
    if not _EKS_NAME_RE.fullmatch(c.eks.cluster_name):
        _fail("eks.cluster_name", c.eks.cluster_name, "must match ^[0-9A-Za-z][A-Za-z0-9-_]{0,99}$")
    if not _SAGEMAKER_NAME_RE.fullmatch(c.hyperpod.cluster_name):
        _fail("hyperpod.cluster_name", c.hyperpod.cluster_name,
              "must be 1-63 letters, digits or '-' and start and end with a letter or digit")
    if not _SAGEMAKER_NAME_RE.fullmatch(c.model.name):
        _fail("model.name", c.model.name,
              "must be 1-63 letters, digits or '-' and start and end with a letter or digit")
    for field, value in (("endpoint.name", c.endpoint.name), ("endpoint.namespace", c.endpoint.namespace)):
        if not _DNS_LABEL_RE.fullmatch(value):
            _fail(field, value, "must be a Kubernetes DNS label (lowercase a-z, 0-9, '-', at most 63)")
    # The operator derives Deployment names "prefill-<name>" and the router "<name>-<namespace>-router".
    if len(EndpointNames.of(c).router_service) > 63:
        _fail("endpoint.name", c.endpoint.name,
              "plus endpoint.namespace must stay under 63 characters in '<name>-<namespace>-routing-service'")
    seen: set[str] = set()
    for i, g in enumerate(c.hyperpod.instance_groups):
        if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", g.name, re.ASCII):
            _fail(f"hyperpod.instance_groups[{i}].name", g.name,
                  "must be 1-63 letters, digits or '-' and start and end with a letter or digit")
        if g.name in seen:
            _fail(f"hyperpod.instance_groups[{i}].name", g.name, "must be unique")
        seen.add(g.name)


def is_bucket_name(name: str) -> bool:
    """An S3 general-purpose bucket name (Amazon S3 User Guide, "Bucket naming rules"): 3-63 characters."""
    return bool(_BUCKET_RE.fullmatch(name)) and ".." not in name and not name.startswith("xn--") \
        and not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name, re.ASCII) and not name.endswith("-s3alias")


def _rule_labels(c: Config) -> None:
    key = c.observability.grafana_sidecar_label
    if not is_label_key(key):
        _fail("observability.grafana_sidecar_label", key,
              "must be a Kubernetes label key ([DNS-subdomain prefix/]name of at most 63 letters, digits, "
              "'-', '_', '.', starting and ending with a letter or digit)")


def _rule_s3(c: Config) -> None:
    b = c.model.existing_bucket_name
    if b is not None and not is_bucket_name(b):
        _fail("model.existing_bucket_name", b,
              "must be a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-')")
    p = c.model.s3_prefix
    if p.startswith("/") or not p.endswith("/") or "//" in p or len(p) > 512:
        _fail("model.s3_prefix", p, "must be a key prefix without a leading '/' that ends with '/'")
    if not _S3_PREFIX_RE.fullmatch(p):
        _fail("model.s3_prefix", p, "must hold only S3 safe characters (letters, digits, ! _ . ' ( ) -) "
                                    "in '/'-separated segments, no '*' and no '.' or '..' segment")
    if b is not None and c.model.delete_on_destroy:
        _fail("model.delete_on_destroy", True, "cannot be true for an existing bucket we did not create")


def _rule_region_and_az(c: Config) -> None:
    if not _REGION_RE.fullmatch(c.region) or c.region not in AWS_REGIONS:
        _fail("region", c.region, "must be an AWS region code such as us-west-2")
    prefix = az_id_prefix(c.region)
    azs: set[str] = set()
    for i, g in enumerate(c.hyperpod.instance_groups):
        az = g.availability_zone_id or c.network.gpu_availability_zone_id
        field = (f"hyperpod.instance_groups[{i}].availability_zone_id" if g.availability_zone_id
                 else "network.gpu_availability_zone_id")
        if not _AZ_ID_RE.fullmatch(az) or not az.startswith(prefix + "-"):
            _fail(field, az, f"must be an AZ ID of {c.region} such as {prefix}-az1")
        azs.add(az)
    if len(azs) != 1:
        _fail("hyperpod.instance_groups[*].availability_zone_id", sorted(azs),
              "must resolve to exactly one AZ ID (DPD moves the KV cache over EFA within one AZ)")
    cp = c.network.control_plane_availability_zone_ids
    for i, az in enumerate(cp):
        field = f"network.control_plane_availability_zone_ids[{i}]"
        if not _AZ_ID_RE.fullmatch(az) or not az.startswith(prefix + "-"):
            _fail(field, az, f"must be an AZ ID of {c.region} such as {prefix}-az1")
        if az in EKS_UNSUPPORTED_AZ_IDS:
            _fail(field, az, "must be an AZ ID where EKS creates control planes (not "
                             f"{', '.join(sorted(EKS_UNSUPPORTED_AZ_IDS))}; EKS user guide, subnet requirements)")
    if cp[0] == cp[1]:
        _fail("network.control_plane_availability_zone_ids", list(cp),
              "must name two different AZ IDs (EKS needs subnets in at least two AZs)")
    if c.network.gpu_availability_zone_id not in azs:
        _fail("network.gpu_availability_zone_id", c.network.gpu_availability_zone_id,
              f"must be the AZ ID of the GPU instance groups ({sorted(azs)[0]})")


def _rule_instance_types(c: Config) -> None:
    allowed = ", ".join(DPD_INSTANCE_GPUS)
    for i, g in enumerate(c.hyperpod.instance_groups):
        if g.instance_type not in DPD_INSTANCE_GPUS:
            _fail(f"hyperpod.instance_groups[{i}].instance_type", g.instance_type,
                  f"must be an EFA RDMA instance type that supports DPD ({allowed})")
        plan = g.training_plan_arn
        if plan is not None and not _TRAINING_PLAN_RE.fullmatch(plan):
            _fail(f"hyperpod.instance_groups[{i}].training_plan_arn", plan,
                  "must be a SageMaker training plan ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>)")
        if plan is not None and plan.split(":")[3] != c.region:
            _fail(f"hyperpod.instance_groups[{i}].training_plan_arn", plan,
                  f"must be a training plan in region {c.region} (a plan reserves capacity in one region)")
        if plan is not None and len(plan.rsplit("/", 1)[1]) > TRAINING_PLAN_NAME_MAX:
            _fail(f"hyperpod.instance_groups[{i}].training_plan_arn", plan,
                  f"must name a training plan of at most {TRAINING_PLAN_NAME_MAX} characters")
        if len(set(g.deep_health_checks)) != len(g.deep_health_checks):
            _fail(f"hyperpod.instance_groups[{i}].deep_health_checks", list(g.deep_health_checks),
                  "must not repeat a check")
    if c.endpoint.instance_type not in DPD_INSTANCE_GPUS:
        _fail("endpoint.instance_type", c.endpoint.instance_type,
              f"must be an EFA RDMA instance type that supports DPD ({allowed})")
    if c.endpoint.instance_type not in {g.instance_type for g in c.hyperpod.instance_groups}:
        _fail("endpoint.instance_type", c.endpoint.instance_type,
              "must be the instance type of at least one hyperpod.instance_groups entry")


def _rule_parallelism(c: Config) -> None:
    e = c.endpoint
    per_node = DPD_INSTANCE_GPUS.get(e.instance_type, 8)
    if per_node % e.tensor_parallel_size:
        _fail("endpoint.tensor_parallel_size", e.tensor_parallel_size,
              f"must divide the {per_node} GPUs of one {e.instance_type} (1, 2, 4 or 8)")
    for role in ("prefill", "decode"):
        r: RoleConfig = getattr(e, role)
        if r.gpus > per_node:
            _fail(f"endpoint.{role}.gpus", r.gpus, f"must fit one {e.instance_type} node (<= {per_node})")
        if r.gpus != e.tensor_parallel_size:
            _fail(f"endpoint.{role}.gpus", r.gpus,
                  f"must equal endpoint.tensor_parallel_size ({e.tensor_parallel_size}): one vLLM engine per pod")


def _rule_pod_fit(c: Config) -> None:
    """Worker requests must fit the node: allocatable (kubelet reservation) minus DaemonSets and sidecars."""
    e = c.endpoint
    if e.instance_type not in sizing.INSTANCE_FACTS:
        return  # _rule_instance_types reports it
    for role in ("prefill", "decode"):
        r: RoleConfig = getattr(e, role)
        budget = c.worker_budget(role)
        tpc = sorted({g.threads_per_core for g in c.hyperpod.instance_groups if g.instance_type == e.instance_type})
        where = f"one {e.instance_type} (threads_per_core {'/'.join(map(str, tpc))}) leaves a worker"
        if r.cpu is not None and r.cpu > budget.cpu:
            _fail(f"endpoint.{role}.cpu", r.cpu,
                  f"must be <= {budget.cpu}: {where} {budget.cpu} CPUs after kubelet, DaemonSet and "
                  "operator-sidecar reservations")
        if r.memory_gib is not None and r.memory_gib > budget.memory_gib:
            _fail(f"endpoint.{role}.memory_gib", r.memory_gib,
                  f"must be <= {budget.memory_gib}: {where} {budget.memory_gib} GiB after kubelet, DaemonSet and "
                  "operator-sidecar reservations")


def _rule_addons(c: Config) -> None:
    """Every pinned add-on must be offered for the cluster's Kubernetes version (pins.ADDONS table)."""
    v = c.eks.kubernetes_version
    for pin in pins.ADDONS:
        if v not in pin.kubernetes_versions:
            _fail("eks.kubernetes_version", v,
                  f"must be a version the pinned add-on {pin.name} {pin.version} is offered for "
                  f"({', '.join(pin.kubernetes_versions)}; pins.ADDONS, checked {pin.checked}; refresh with "
                  "scripts/refresh-addon-versions)")


def _peak_replicas(e: EndpointConfig, role: str) -> int:
    """Replicas a role can reach: its fixed count, or the autoscaling maximum when that is on."""
    fixed: int = getattr(e, role).replicas
    return max(fixed, getattr(e.autoscaling, role).max_replicas) if e.autoscaling.enabled else fixed


def _rule_capacity(c: Config) -> None:
    e = c.endpoint
    for role in ("prefill", "decode"):
        r: RoleConfig = getattr(e, role)
        need, have = _peak_replicas(e, role) * r.gpus, c.pool_gpus(role)
        if need > have:
            _fail(f"endpoint.{role}.replicas", r.replicas,
                  f"needs {need} GPUs at peak but instance groups for the {role} pool (and 'shared') hold {have}")
    peak_total = sum(_peak_replicas(e, role) * getattr(e, role).gpus for role in ("prefill", "decode"))
    total = sum(g.instance_count * DPD_INSTANCE_GPUS[g.instance_type] for g in c.hyperpod.instance_groups)
    if peak_total > total:
        _fail("endpoint", f"{peak_total} GPUs",
              f"prefill + decode must fit the {total} GPUs of all hyperpod.instance_groups")


def _rule_routing(c: Config) -> None:
    e = c.endpoint
    if e.routing_threshold_tokens >= e.max_model_len:
        _fail("endpoint.routing_threshold_tokens", e.routing_threshold_tokens,
              f"must be below endpoint.max_model_len ({e.max_model_len}) or no prompt is ever disaggregated")
    if e.routing_strategy == "kvaware" and (
            not e.invocation_path.endswith("completions") or "chat" in e.invocation_path):
        _fail("endpoint.routing_strategy", e.routing_strategy,
              "'kvaware' needs endpoint.invocation_path 'v1/completions' (not chat), per the operator docs")
    if not re.fullmatch(r"[A-Za-z0-9_\-/.]{1,200}", e.invocation_path) or e.invocation_path.startswith("/"):
        _fail("endpoint.invocation_path", e.invocation_path, "must be a URL path without a leading '/'")
    if e.decode.replicas > pins.DPD_MAX_DECODE_REPLICAS:
        _fail("endpoint.decode.replicas", e.decode.replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS}: operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder with several prefillers (DPD guide, Limitations)")
    if e.kv_cache.enable_l2_cache and e.kv_cache.l2_cache_backend is None:
        _fail("endpoint.kv_cache.l2_cache_backend", None, "must be 'redis' or 'tieredstorage' when L2 is on")
    if not _IMAGE_RE.fullmatch(e.image) or (":" not in e.image.rsplit("/", 1)[-1] and "@" not in e.image):
        _fail("endpoint.image", e.image, "must be an image reference pinned to a tag or digest")


def _rule_autoscaling(c: Config) -> None:
    a = c.endpoint.autoscaling
    for role in ("prefill", "decode"):
        r: RoleAutoscalingConfig = getattr(a, role)
        if r.min_replicas > r.max_replicas:
            _fail(f"endpoint.autoscaling.{role}.min_replicas", r.min_replicas,
                  f"must be <= endpoint.autoscaling.{role}.max_replicas ({r.max_replicas})")
    if a.decode.max_replicas > pins.DPD_MAX_DECODE_REPLICAS:
        _fail("endpoint.autoscaling.decode.max_replicas", a.decode.max_replicas,
              f"must be <= {pins.DPD_MAX_DECODE_REPLICAS} (operator v{pins.INFERENCE_OPERATOR_APP_VERSION} "
              "runs a single decoder)")
    e = c.endpoint
    prefill_seqs, decode_seqs = (a.prefill.max_replicas * e.prefill.max_num_seqs,
                                 a.decode.max_replicas * e.decode.max_num_seqs)
    if a.enabled and prefill_seqs > decode_seqs:
        # Prefill scaled past what the decoders admit only moves the queue to the decoders and back.
        _fail("endpoint.autoscaling.prefill.max_replicas", a.prefill.max_replicas,
              f"x endpoint.prefill.max_num_seqs ({prefill_seqs} sequences) must not exceed "
              f"endpoint.autoscaling.decode.max_replicas x endpoint.decode.max_num_seqs ({decode_seqs})")
    if not 0 < a.decode.target_value <= 1:
        _fail("endpoint.autoscaling.decode.target_value", a.decode.target_value,
              "is a KV-cache usage ratio and must be in (0, 1]")
    if a.enabled and not c.observability.enabled:
        _fail("endpoint.autoscaling.enabled", True,
              "needs observability.enabled (KEDA scales on metrics in the managed Prometheus workspace)")


def _rule_eks(c: Config) -> None:
    if c.eks.kubernetes_version not in pins.SUPPORTED_KUBERNETES_VERSIONS:
        _fail("eks.kubernetes_version", c.eks.kubernetes_version,
              f"must be one of {', '.join(pins.SUPPORTED_KUBERNETES_VERSIONS)} (HyperPod-supported, pinned)")
    if c.eks.admin_principal_arn is not None and not _IAM_PRINCIPAL_RE.fullmatch(c.eks.admin_principal_arn):
        _fail("eks.admin_principal_arn", c.eks.admin_principal_arn,
              "must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)")
    if c.eks.admin_principal_arn is not None and len(c.eks.admin_principal_arn.rsplit("/", 1)[1]) > IAM_NAME_MAX:
        _fail("eks.admin_principal_arn", c.eks.admin_principal_arn,
              f"must name a role or user of at most {IAM_NAME_MAX} characters (IAM quota)")
    if not re.fullmatch(r"[a-z][a-z0-9-]*\d[a-z0-9-]*\.[a-z0-9]+", c.eks.system_node_group.instance_type, re.ASCII):
        _fail("eks.system_node_group.instance_type", c.eks.system_node_group.instance_type,
              "must be an EC2 instance type such as m7i.xlarge")


def _network(cidr: str, field: str) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(cidr, strict=True)
    except ValueError as exc:
        raise ConfigError(f"{field} must be an IPv4 CIDR with no host bits set, got {cidr!r} ({exc})") from None


def _rule_cidrs(c: Config) -> None:
    n = c.network
    vpc = _network(n.vpc_cidr, "network.vpc_cidr")
    gpu = _network(n.gpu_cidr, "network.gpu_cidr")
    for field, net in (("network.vpc_cidr", vpc), ("network.gpu_cidr", gpu)):
        if not 16 <= net.prefixlen <= 28:
            _fail(field, str(net), "must have a prefix length between /16 and /28 (VPC limits)")
        if not (net.is_private or net.subnet_of(ipaddress.IPv4Network("100.64.0.0/10"))):
            _fail(field, str(net), "must be a private range (RFC 1918 or 100.64.0.0/10)")
    if vpc.prefixlen > 20:
        _fail("network.vpc_cidr", str(vpc), "must be /20 or larger to hold 2 public and 2 private subnets")
    if vpc.overlaps(gpu):
        _fail("network.gpu_cidr", str(gpu), f"must not overlap network.vpc_cidr ({vpc})")
    nodes = sum(g.instance_count for g in c.hyperpod.instance_groups)
    needed = nodes * IPS_PER_GPU_NODE * SUBNET_HEADROOM_FACTOR
    usable = gpu.num_addresses - AWS_RESERVED_IPS_PER_SUBNET
    if usable < needed:
        _fail("network.gpu_cidr", str(gpu),
              f"must hold {needed} IPs for {nodes} GPU nodes ({IPS_PER_GPU_NODE} each, x{SUBNET_HEADROOM_FACTOR} "
              f"headroom) but has {usable} usable")
    for i, cidr in enumerate(c.eks.endpoint_public_access_cidrs):
        try:
            ipaddress.IPv4Network(cidr, strict=True)
        except ValueError:
            _fail(f"eks.endpoint_public_access_cidrs[{i}]", cidr, "must be an IPv4 CIDR with no host bits set")


def _rule_benchmark(c: Config) -> None:
    b, e = c.benchmark, c.endpoint
    if "@sha256:" not in b.client_image or not _IMAGE_RE.fullmatch(b.client_image):
        _fail("benchmark.client_image", b.client_image, "must be pinned by digest (<image>@sha256:<64 hex>)")
    names: set[str] = set()
    low, high = (e.routing_threshold_tokens * (1 + BENCHMARK_PATH_MARGIN),
                 e.routing_threshold_tokens * (1 - BENCHMARK_PATH_MARGIN))
    for i, s in enumerate(c.benchmark_scenarios()):
        field = f"benchmark.scenarios[{i}]"
        name = f"{e.name}-bench-colocated-{s.name}-c{max(b.concurrency)}"
        if len(name) > 63:
            _fail(f"{field}.name", s.name, f"must keep the Job name {name!r} within 63 characters (with endpoint.name)")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,22}[a-z0-9])?", s.name) or s.name in names:
            _fail(f"{field}.name", s.name, "must be a unique DNS label of at most 24 characters")
        names.add(s.name)
        try:
            in_min, in_max, out_max = scenario_token_range(s.traffic)
        except ValueError as exc:
            raise ConfigError(f"{field}.traffic {exc}, got {s.traffic!r}") from None
        if in_max + out_max > e.max_model_len:
            _fail(f"{field}.traffic", s.traffic,
                  f"input plus output tokens must fit endpoint.max_model_len ({e.max_model_len})")
        if s.path == "dpd" and in_min < low:
            _fail(f"{field}.traffic", s.traffic,
                  f"takes path 'dpd', so its prompts must be at least {int(low)} tokens (endpoint.routing_threshold_"
                  f"tokens {e.routing_threshold_tokens} + {BENCHMARK_PATH_MARGIN:.0%}: the router estimates tokens)")
        if s.path == "direct" and in_max > high:
            _fail(f"{field}.traffic", s.traffic,
                  f"takes path 'direct', so its prompts must be at most {int(high)} tokens (endpoint.routing_"
                  f"threshold_tokens {e.routing_threshold_tokens} - {BENCHMARK_PATH_MARGIN:.0%})")
    if not c.benchmark_scenarios():
        _fail("benchmark.scenarios", [], "must name at least one scenario (none of the defaults fits this endpoint)")
    if len(set(b.concurrency)) != len(b.concurrency):
        _fail("benchmark.concurrency", list(b.concurrency), "must not repeat a level")
    if b.target == "load_balancer":
        if not b.load_balancer_url or not re.fullmatch(r"https://[A-Za-z0-9.-]+(:\d+)?/?", b.load_balancer_url):
            _fail("benchmark.load_balancer_url", b.load_balancer_url,
                  "must be https://<host>[:port] when benchmark.target is load_balancer")
        if not b.ca_secret_name or not _DNS_LABEL_RE.fullmatch(b.ca_secret_name):
            _fail("benchmark.ca_secret_name", b.ca_secret_name,
                  "must name the Secret holding the endpoint's TLS PEM (ca.pem) when benchmark.target is "
                  "load_balancer")
    if b.results_s3_uri is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?",
                                                         b.results_s3_uri):
        _fail("benchmark.results_s3_uri", b.results_s3_uri, "must be s3://<bucket>/<prefix>")


_RULES = (
    _rule_names, _rule_s3, _rule_region_and_az, _rule_instance_types, _rule_parallelism,
    _rule_capacity, _rule_routing, _rule_autoscaling, _rule_eks, _rule_addons, _rule_cidrs, _rule_pod_fit,
    _rule_benchmark, _rule_labels,
)


# --- loading --------------------------------------------------------------------------------------------

#: Largest config file read (the default is ~3 KB); anything bigger is not a config.
MAX_CONFIG_BYTES = 1 << 20
#: Most YAML nodes a config may expand to, aliases followed (the default has ~150). Stops alias bombs
#: ("billion laughs") before anything walks the expanded document.
MAX_YAML_NODES = 20_000
#: Deepest nesting a config may have (the default has 5 levels).
MAX_YAML_DEPTH = 64


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 core-schema scalars: only ``true``/``false`` are booleans (not
    ``yes``, ``on``, ``y``), no sexagesimal or legacy-octal integers, no timestamps (strings stay strings)."""

    yaml_implicit_resolvers: dict = {}  # PyYAML's class-level registry, filled below
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """Refuse nesting deeper than :data:`MAX_YAML_DEPTH` as soon as the parser reaches it."""
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise ConfigError(f"config must nest at most {MAX_YAML_DEPTH} levels deep, got more "
                                  f"(line {self.peek_event().start_mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
):
    _ConfigLoader.add_implicit_resolver(_tag, re.compile(_pattern, re.ASCII), list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    text = str(loader.construct_scalar(node))
    if text.lower() not in ("true", "false"):  # an explicit !!bool tag on "yes"
        raise yaml.constructor.ConstructorError(None, None, f"{shown(text)} is not true or false", node.start_mark)
    return text.lower() == "true"


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_ConfigLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


def _key_path(path: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def _check_nodes(root: yaml.Node) -> None:
    """Refuse duplicate keys (naming the key and both lines) and documents that expand past
    :data:`MAX_YAML_NODES`. Iterative, so it costs at most that many steps whatever the input."""
    stack: list[tuple[yaml.Node, tuple[Any, ...]]] = [(root, ())]
    count = 0
    while stack:
        node, path = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise ConfigError(f"config must expand to at most {MAX_YAML_NODES} YAML nodes (aliases followed), "
                              "got more (an alias bomb?)")
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + 1
                if key is not None and key != "<<" and key in seen:
                    raise ConfigError(f"{_key_path((*path, key))} must appear once, got it at lines "
                                      f"{seen[key]} and {line} (YAML keeps only the last one)")
                if key is not None:
                    seen[key] = line
                stack.append((value_node, (*path, key if key is not None else "?")))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*path, i)) for i, child in enumerate(node.value))


def _freeze(value: Any) -> Any:
    """Lists become tuples (the strict model takes sequences as tuples); mappings are copied."""
    if isinstance(value, dict):
        return {k: _freeze(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _one_line(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = _key_path(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"{shown(loc, 120)[1:-1]} is not a known setting (check the spelling; see README 'Configuration')"
    if err["type"] == "missing":
        return f"{loc} is required"
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, ConfigError):
        return str(ctx_err)
    msg = err["msg"].removeprefix("Value error, ")
    return f"{loc or 'config'}: {msg}, got {shown(err.get('input'))}"


def parse_config(data: Any) -> Config:
    """Validate a mapping into a :class:`Config`; raises :class:`ConfigError` with one line."""
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a YAML mapping, got {type(data).__name__}")
    try:
        return Config.model_validate(_freeze(data))
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    except RecursionError:
        raise ConfigError("config is nested too deeply") from None


def load_yaml(text: str, source: str) -> Any:
    """Parse config YAML strictly (see :class:`_ConfigLoader`, :func:`_check_nodes`); one-line errors."""
    loader: _ConfigLoader | None = None
    try:
        loader = _ConfigLoader(text)  # the reader already rejects control characters here
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        raise ConfigError(f"config file {source} is not valid YAML{where}"
                          + (f": {shown(str(problem), 120)[1:-1]}" if problem else "")) from None
    except RecursionError:
        raise ConfigError(f"config file {source} is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file (UTF-8, at most :data:`MAX_CONFIG_BYTES`)."""
    p = Path(path)
    source = shown(str(p), 200)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {source} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {source} must be at most {MAX_CONFIG_BYTES} bytes, got more")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {source} must be UTF-8 text, got byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start}") from None
    data = load_yaml(text, source)
    return parse_config(data if data is not None else {})
