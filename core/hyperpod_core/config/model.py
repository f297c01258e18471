"""The schema of the config: sections, fields, defaults and what each field means.

Field types with a single-field rule come from :mod:`hyperpod_core.config.types`; the rules that compare
fields run after validation from :mod:`hyperpod_core.config.rules`. Every field's docstring reaches
``config/schema.json`` and ``docs/config.md`` (``use_attribute_docstrings``): it says what the field is and,
after ``Default:``, what happens when the file leaves it out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hyperpod_core import pins, sizing
from hyperpod_core.config import rules
from hyperpod_core.config.types import (
    AWS_REGIONS,
    BENCHMARK_PATH_MARGIN,
    AzId,
    AzIdOrEmpty,
    Broken,
    BucketName,
    Cidr,
    ControlPlaneAzId,
    DeploymentName,
    DigestPinnedImage,
    DnsLabel,
    DpdInstanceType,
    Ec2InstanceType,
    EksClusterName,
    EmailAddress,
    FieldRule,
    GrafanaWorkspaceId,
    IamPrincipalArn,
    InvocationPath,
    KmsKeyArn,
    KubernetesVersion,
    LabelKey,
    ModelRevision,
    NvmeHostPath,
    PinnedImage,
    PrimaryVpcCidr,
    PrometheusLabel,
    Region,
    S3Prefix,
    S3Uri,
    SageMakerName,
    ScenarioName,
    SnsTopicArn,
    TrafficScenario,
    TrainingPlanArn,
    VpcCidrBlock,
    default_control_plane_az_ids,
    unique,
)
from hyperpod_core.errors import ConfigError, shown
from hyperpod_core.telemetry import objectives


class _Model(BaseModel):
    # strict: no coercion, so `true` is not a replica count, "8" not a number, "yes" not a boolean; no inf/nan
    # in any float. Sequences arrive as tuples (parse_config): declare sequence fields as tuple[...], not list.
    # validate_default: a default passes the same field rules as a value from the file.
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True, strict=True,
                              allow_inf_nan=False, validate_default=True, use_attribute_docstrings=True)


InterfaceEndpoint = Literal[
    "ecr.api", "ecr.dkr", "sts", "eks", "eks-auth", "sagemaker.api", "logs", "monitoring",
    "ssm", "ssmmessages", "ec2messages", "ec2", "elasticloadbalancing", "aps-workspaces",
]
#: CloudWatch Logs retention periods (days) this project offers.
RetentionDays = Literal[1, 3, 5, 7, 14, 30, 60, 90, 180, 365]


class NetworkConfig(_Model):
    """The VPC. EKS needs subnets in two AZs; the GPU nodes get one subnet in `gpu_availability_zone_id`."""

    vpc_cidr: PrimaryVpcCidr = "10.0.0.0/16"
    """Primary VPC CIDR: the public and the control-plane/system subnets in two AZs. A private range, /16 to /20.
    Default: `10.0.0.0/16`."""
    gpu_cidr: VpcCidrBlock = "10.1.0.0/16"
    """Secondary VPC CIDR, used whole as the single GPU subnet: it must hold 81 IPs x 2 per GPU node (HyperPod
    capacity planning, doubled for rolling replacement) and must not overlap `vpc_cidr`. Default: `10.1.0.0/16`."""
    gpu_availability_zone_id: AzId = "usw2-az2"
    """AZ *ID* (not name) of the GPU capacity or training plan: AZ names map to different AZs in every account.
    Every instance group must resolve to it. Default: `usw2-az2`."""
    control_plane_availability_zone_ids: tuple[ControlPlaneAzId, ControlPlaneAzId]
    """The two AZ IDs of the public and control-plane/system subnets, in `region`, never one where EKS creates
    no control planes. Default (`null`): the first two AZ IDs of `region` that EKS supports (`usw2-az1`,
    `usw2-az2` in us-west-2)."""
    nat_gateways: Annotated[int, Field(ge=1, le=2)] = 1
    """NAT gateways of the private subnets: 1, or 2 for one per AZ. Default: 1."""
    interface_endpoints: tuple[InterfaceEndpoint, ...] = ()
    """Interface VPC endpoints to create (needed only for private clusters), e.g. `[ecr.api, ecr.dkr, sts,
    eks-auth, sagemaker.api, logs, aps-workspaces]` (the collector remote-writes to Amazon Managed Prometheus).
    Each admits HTTPS from `vpc_cidr` and `gpu_cidr`. Default: none."""
    flow_logs_retention_days: RetentionDays = 30
    """Retention of the VPC flow logs in CloudWatch, in days. Default: 30."""
    fsx_lustre: bool = False
    """Open the FSx for Lustre ports (988, 1018-1023) on the GPU security group. Default: off."""


class SystemNodeGroupConfig(_Model):
    """The managed node group for system pods (CoreDNS, controllers, add-ons)."""

    instance_type: Ec2InstanceType = "m7i.xlarge"
    """EC2 instance type of the group. Default: `m7i.xlarge`."""
    desired_size: Annotated[int, Field(ge=1, le=10)] = 2
    """Nodes in the group. Default: 2."""


class EksConfig(_Model):
    """The EKS cluster the HyperPod cluster joins."""

    cluster_name: EksClusterName
    """EKS cluster name. Default (`null`): `<name>-eks`, so two deployments never collide."""
    kubernetes_version: KubernetesVersion = pins.KUBERNETES_VERSION
    """Kubernetes version of the cluster: a HyperPod-supported one that every pinned add-on is offered for.
    Default: the pinned version (`pins.KUBERNETES_VERSION`)."""
    admin_principal_arn: IamPrincipalArn | None = None
    """IAM role or user granted cluster admin (kubectl) through an access entry. Default: none: the cluster stack
    then takes the required CloudFormation parameter `AdminPrincipalArn`, which the README deploy command fills
    with the caller (`aws sts get-caller-identity | scripts/admin-principal-arn`)."""
    endpoint_public_access_cidrs: tuple[Cidr, ...] = ("0.0.0.0/0",)
    """CIDRs allowed to reach the public API endpoint; the private endpoint is always on. Default: `[0.0.0.0/0]`."""
    log_retention_days: RetentionDays = 30
    """Retention of the control-plane logs in CloudWatch, in days. Default: 30."""
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    """The managed node group for system pods. Default: 2 x `m7i.xlarge`."""


DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]
Pool = Literal["prefill", "decode", "shared"]


class InstanceGroupConfig(_Model):
    """One HyperPod instance group of GPU nodes."""

    name: SageMakerName
    """Instance group name, unique in the cluster. Required."""
    instance_type: DpdInstanceType = "ml.p5.48xlarge"
    """Instance type of the nodes: one with EFA RDMA that the operator supports for DPD. Default: `ml.p5.48xlarge`."""
    instance_count: Annotated[int, Field(ge=0, le=6758)] = 1
    """Nodes in the group. Default: 1."""
    pool: Pool = "shared"
    """Which DPD role the nodes serve; becomes a Kubernetes node label and the role's nodeSelector. Default:
    `shared` (either role)."""
    availability_zone_id: AzIdOrEmpty | None = None
    """AZ ID of the group's nodes; all GPU groups must resolve to one AZ ID. Default (`null` or empty):
    `network.gpu_availability_zone_id`."""
    ebs_volume_size_gb: Annotated[int, Field(ge=1, le=16384)] = 500
    """Size of the EBS volume HyperPod attaches to each node, in GB. Default: 500."""
    threads_per_core: Literal[1, 2] = 1
    """HyperPod `ThreadsPerCore`: 1 turns hyper-threading off and halves the CPUs a node reports. Default: 1."""
    deep_health_checks: Annotated[tuple[DeepHealthCheck, ...], unique("a check")] = (
        "InstanceStress", "InstanceConnectivity")
    """Deep health checks HyperPod runs on new nodes (`OnStartDeepHealthChecks`), each at most once; empty: none.
    Default: both."""
    training_plan_arn: TrainingPlanArn | None = None
    """SageMaker training plan, in `region`, whose reserved capacity the group runs on. Default: none
    (on-demand capacity)."""


class HyperPodConfig(_Model):
    """The SageMaker HyperPod cluster (EKS-orchestrated) and its GPU instance groups."""

    cluster_name: SageMakerName
    """HyperPod cluster name. **Create-only**: changing it replaces the GPU cluster. Default (`null`): `<name>`,
    so two deployments never collide."""
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    """HyperPod `NodeRecovery`: `Automatic` replaces or reboots faulty nodes. Default: `Automatic`."""
    node_provisioning_mode: Literal["Continuous", "Legacy"] = "Continuous"
    """HyperPod `NodeProvisioningMode`. Default: `Continuous`."""
    instance_groups: Annotated[tuple[InstanceGroupConfig, ...], Field(min_length=1, max_length=100)]
    """The GPU instance groups (1 to 100). Required."""
    tiered_storage_memory_percent: Annotated[int, Field(ge=1, le=50)] | None = None
    """Share of each node's memory HyperPod's tiered storage takes (`TieredStorageConfig`
    `InstanceMemoryAllocationPercentage`; its memory daemon serves the `tieredstorage` L2 KV cache), set aside
    in the workers' node budget. Setting it turns tiered storage on. Default (`null`): 20 when
    `endpoint.kv_cache.l2_cache_backend` is `tieredstorage` (the value of AWS's managed-KV-cache example),
    else tiered storage stays off."""


class ModelConfig(_Model):
    """The model the endpoint serves, read from S3."""

    name: SageMakerName = "llama-3-3-70b-instruct"
    """SageMaker model name (also the InferenceEndpointConfig `modelName`) and the name clients send as `model`
    (vLLM `--served-model-name`). Default: `llama-3-3-70b-instruct`."""
    revision: ModelRevision | None = None
    """Which weights these are, in vLLM's `--model` (`/opt/ml/model/<name>/<revision>`, the weights' mount path),
    and so in every LMCache key: two revisions never share a cached KV. When set, it is your word: the weights are
    read from `s3_prefix` as configured, so give each revision its own `s3_prefix`. Default: none: the digest of the
    manifest `hyperpod-dpd stage-model` wrote (`sha256-<16 hex>`, from `staged-model.json` beside the outputs file),
    whose weights are under `<s3_prefix><revision>/`; with neither, the manifests hold a placeholder and are not
    deployable."""
    s3_prefix: S3Prefix = "models/Llama-3.3-70B-Instruct/"
    """Key prefix of the model files in the model bucket, ending with '/': `hyperpod-dpd stage-model` stages each
    revision under its own `<s3_prefix>sha256-<16 hex>/` (with `revision` set, the files sit directly under it). It
    becomes an IAM resource and an `s3:prefix` condition, hence no wildcards. Default:
    `models/Llama-3.3-70B-Instruct/`."""
    existing_bucket_name: Annotated[BucketName | None, Field(
        deprecated="model.existing_bucket_name is model_bucket.existing_name now")] = None
    """Deprecated, still read: the former name of `model_bucket.existing_name`; a file that sets it loads as if it
    set that key (setting both is an error). Default: none."""
    delete_on_destroy: Annotated[bool | None, Field(
        deprecated="model.delete_on_destroy is model_bucket.delete_on_destroy now")] = None
    """Deprecated, still read: the former name of `model_bucket.delete_on_destroy`; a file that sets it loads as if
    it set that key (setting both is an error). Default: none."""
    parameters_billion: Annotated[float, Field(gt=0, le=10_000)] | None = None
    """Parameters of the model in billions, for the GPU-memory check (weights per GPU + one `max_model_len`
    sequence of KV cache must fit vLLM's share). Set it, with `kv_cache_kib_per_token`, for a model the size table
    does not know (`hyperpod_core.models`: Llama-3.3-70B-Instruct, Llama-3.1-70B-Instruct, Llama-3.1-8B-Instruct,
    Qwen3-32B, found by `name` or the `s3_prefix` folder). Default: none: the table's size, or no weights check."""
    kv_cache_kib_per_token: Annotated[float, Field(gt=0, le=100_000)] | None = None
    """KV cache of one token for the whole model in KiB: 2 x layers x KV heads x head dim x 2 bytes / 1024 from its
    config.json (Llama-3.3-70B: 320). Required with `parameters_billion`. Default: none (the table's)."""
    dtype: Literal["bfloat16", "float16", "float8"] = "bfloat16"
    """Data type of the weights as served (FP8 checkpoints: `float8`), for the GPU-memory check. Default:
    `bfloat16` (the published checkpoints of the models in the table)."""


class ModelBucketConfig(_Model):
    """The S3 bucket the model weights are read from: created by the platform stack, or one that exists. A created
    bucket is kept on destroy with its KMS key (and its access-log bucket); `hyperpod-dpd destroy` prints the
    `existing_name` and `existing_kms_key_arn` lines that let the next deployment read it again."""

    existing_name: BucketName | None = None
    """Read the weights from this bucket, in `region`, instead of creating one: nothing is created, changed or
    deleted, and the readers may read only below `model.s3_prefix`. Formerly `model.existing_bucket_name` (still
    read). Default: none: the platform stack creates a bucket, encrypted with a key of its own."""
    existing_kms_key_arn: KmsKeyArn | None = None
    """The customer managed KMS key, in `region`, that encrypts the objects of `existing_name` (its key ARN: IAM
    names a key by its key ARN only). Every reader of the weights gets `kms:Decrypt` on exactly this key;
    `hyperpod-dpd preflight` compares it with the bucket's default encryption. Only with `existing_name`. Default:
    none: no `kms:Decrypt` (for a bucket encrypted with SSE-S3 or the AWS managed key `aws/s3`)."""
    delete_on_destroy: bool = False
    """Empty (every object version) and delete the created bucket, its key and its access-log bucket on destroy;
    never a bucket named by `existing_name`. Formerly `model.delete_on_destroy` (still read). Default: keep them
    (RETAIN), so that a later deployment reads the weights again through `existing_name`."""


#: Keys `model_bucket` took over from `model`: ``(key under model, key under model_bucket)``. The old ones stay in
#: :class:`ModelConfig`, deprecated, and :meth:`Config._move_deprecated_keys` reads them into `model_bucket`.
MOVED_TO_MODEL_BUCKET: tuple[tuple[str, str], ...] = (
    ("existing_bucket_name", "existing_name"), ("delete_on_destroy", "delete_on_destroy"))


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
    """One DPD role (prefill or decode). A file may name any subset of its fields: the others keep the role's
    defaults."""

    replicas: Annotated[int, Field(ge=1, le=64)] = 1
    """Worker pods of the role, each one vLLM engine. Decode: at most `pins.DPD_MAX_DECODE_REPLICAS` (the
    operator runs a single decoder). Default: 1."""
    gpus: Annotated[int, Field(ge=1, le=8)] = 8
    """GPUs of one worker; must equal `endpoint.tensor_parallel_size`. Default: 8."""
    max_num_seqs: Annotated[int, Field(ge=1, le=4096)]
    """vLLM `--max-num-seqs` of the role. Default: 16 for prefill, 32 for decode."""
    extra_args: tuple[str, ...] = ()
    """vLLM flags appended for this role only (`pdSpec.<role>.args`). Default: `--enforce-eager` for prefill,
    none for decode."""
    cpu: Annotated[int, Field(ge=1)] | None = None
    """CPU request of one worker. Default: the most a worker may request: the workers of a node share 90 % of
    it, the rest covers the kubelet, DaemonSets, router and operator sidecars (docs/cluster.md, "Worker requests
    come from the node"; p5, ThreadsPerCore 1: 86). A larger value is rejected."""
    memory_gib: Annotated[int, Field(ge=1)] | None = None
    """Memory request of one worker in GiB. Default and limit: as for `cpu` (p5, ThreadsPerCore 1: 1843)."""


class RoleAutoscalingConfig(_Model):
    """KEDA autoscaling of one DPD role. A file may name any subset of its fields: the others keep the role's
    defaults."""

    min_replicas: Annotated[int, Field(ge=1)] = 1
    """Fewest replicas of the role. Default: 1."""
    max_replicas: Annotated[int, Field(ge=1)] = 1
    """Most replicas of the role (decode: at most `pins.DPD_MAX_DECODE_REPLICAS`). Default: 2 for prefill, 1 for
    decode."""
    target_value: Annotated[float, Field(gt=0)]
    """Metric value per replica KEDA scales to. Prefill: waiting requests per replica. Decode: KV-cache usage
    ratio (0-1). Default: 8 for prefill, 0.8 for decode."""


class AutoscalingConfig(_Model):
    """KEDA autoscaling of the endpoint's roles on metrics in the Amazon Managed Prometheus workspace."""

    enabled: bool = False
    """Scale the roles with KEDA (needs `observability.enabled`). Default: off (fixed `replicas`)."""
    prefill: RoleAutoscalingConfig = RoleAutoscalingConfig(min_replicas=1, max_replicas=2, target_value=8)
    """Autoscaling of prefill. Default: 1 to 2 replicas at 8 waiting requests per replica."""
    decode: RoleAutoscalingConfig = RoleAutoscalingConfig(min_replicas=1, max_replicas=1, target_value=0.8)
    """Autoscaling of decode. Default: 1 replica at KV-cache usage 0.8."""

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        return _merge_defaults(cls, data, ("prefill", "decode"))


class KvCacheConfig(_Model):
    """LMCache KV-cache offloading of the workers (InferenceEndpointConfig `kvCacheSpec`)."""

    enable_l1_cache: bool = True
    """Offload the KV cache to CPU memory (L1). Default: on."""
    enable_l2_cache: bool = False
    """Offload the KV cache further to an L2 backend (`l2_cache_backend`). Default: off."""
    l2_cache_backend: Literal["redis", "tieredstorage"] | None = None
    """L2 backend; required when `enable_l2_cache` is on. Default: none."""
    l2_cache_local_url: str | None = None
    """URL of the L2 backend (`l2CacheSpec.l2CacheLocalUrl`). Default: none (the operator's default)."""


class ModelCacheConfig(_Model):
    """Cold start: what the operator caches on the GPU nodes (InferenceEndpointConfig `modelCacheConfig`, operator
    v3.3), set alike on the DPD endpoint and its colocated baseline (docs/endpoint.md, "Cold start")."""

    image_cache: bool = True
    """Pre-pull the worker image onto the nodes before a pod needs it (`imageCache.enabled`: the operator creates
    a ModelImageCache and its DaemonSet). Default: on."""
    weights_cache: bool | None = None
    """Keep the model weights on the nodes' NVMe instance store, so a restarted or added pod loads them locally
    instead of from S3 (`weightsCache.enabled`: the operator creates the ModelWeightsCacheConfig). Default
    (`null`): on where `endpoint.instance_type` has an instance store (every DPD type has 8 x 3840 GB, EC2's
    instance-store table), else off with a `note:` saying why; `true` on a type without one is rejected."""
    weights_cache_host_path: NvmeHostPath = pins.WEIGHTS_CACHE_DEFAULT_HOST_PATH
    """Where on the node the weights are cached (`weightsCache.hostPath`). Default: `/opt/dlami/nvme`, where
    HyperPod nodes mount the instance store (the CRD default)."""


@dataclass(frozen=True, kw_only=True)
class ResolvedModelCache:
    """``endpoint.model_cache`` with its defaults applied for the endpoint's instance type."""

    image_cache: bool
    weights_cache: bool
    weights_cache_host_path: str
    weights_cache_off_reason: str | None
    """Why the default left the weights cache off (``None`` when it is on, or off because the file says so)."""


@dataclass(frozen=True, kw_only=True)
class IdleTimeout:
    """``endpoint.load_balancer_idle_timeout_seconds`` as emitted, and how it was derived."""

    seconds: int
    derived_seconds: float | None
    """``slo.ttft_p95 + max_model_len x slo.tpot_p95`` when the value is derived, ``None`` when the file sets it."""

    @property
    def clamped(self) -> bool:
        return self.derived_seconds is not None and self.derived_seconds > self.seconds


class EndpointConfig(_Model):
    """The DPD inference endpoint (the operator's InferenceEndpointConfig) and its colocated baseline."""

    name: DnsLabel = "llama-3-3-70b"
    """Name of the InferenceEndpointConfig; the operator derives its pod, Service and Ingress names from it.
    Default: `llama-3-3-70b`."""
    namespace: DnsLabel = "default"
    """Kubernetes namespace of the endpoint. Default: `default`."""
    image: PinnedImage = pins.DPD_WORKER_IMAGE
    """Worker image (vLLM + LMCache + NIXL + EFA), pinned by tag or digest. Default: the pinned AWS DPD image
    (`pins.DPD_WORKER_IMAGE`)."""
    instance_type: DpdInstanceType = "ml.p5.48xlarge"
    """Instance type the workers run on; must be the type of at least one instance group. Default:
    `ml.p5.48xlarge`."""
    tensor_parallel_size: Annotated[int, Field(ge=1, le=8)] = 8
    """vLLM `--tensor-parallel-size`; must divide the GPUs of one node and equal each role's `gpus`. Default: 8."""
    max_model_len: Annotated[int, Field(ge=256, le=1_048_576)] = 16384
    """vLLM `--max-model-len` (tokens). Default: 16384."""
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.75
    """vLLM `--gpu-memory-utilization`: vLLM's share of each GPU (weights, activations, KV cache). The PD buffer
    is allocated outside it, so share + buffer + a 3 GiB margin must fit the GPU; a role's `extra_args` may set
    its own (`--gpu-memory-utilization 0.65`). Default: 0.75 (AWS's DPD tuning)."""
    invocation_path: InvocationPath = "v1/chat/completions"
    """Invocation endpoint of the model server (InferenceEndpointConfig `invocationEndpoint`, the path after
    `http://<host>:<port>/`); `kvaware` routing needs `v1/completions`. Default: `v1/chat/completions`."""
    container_port: Annotated[int, Field(ge=1024, le=65535)] = 8000
    """Port the vLLM container listens on. Default: 8000."""
    prefill: RoleConfig = RoleConfig(max_num_seqs=16, extra_args=("--enforce-eager",))
    """The prefill role. Default: 1 replica of 8 GPUs, max-num-seqs 16, `--enforce-eager`."""
    decode: RoleConfig = RoleConfig(max_num_seqs=32)
    """The decode role. Default: 1 replica of 8 GPUs, max-num-seqs 32."""
    routing_threshold_tokens: Annotated[int, Field(ge=0)] = 4096
    """Prompts of at least this many tokens go prefill -> decode; shorter ones straight to decode. Must be below
    `max_model_len`. Default: 4096."""
    routing_strategy: Literal["prefixaware", "kvaware", "session", "roundrobin"] = "prefixaware"
    """How the router picks a prefill worker. Default: `prefixaware`."""
    kv_cache: KvCacheConfig = KvCacheConfig()
    """KV-cache offloading. Default: L1 (CPU memory) on, L2 off."""
    pd_buffer_size_bytes: Annotated[int, Field(ge=1 << 30, le=64 << 30)] = 8 << 30
    """LMCache's KV transfer buffer per rank (`PD_BUFFER_SIZE`), allocated on the GPU of every prefill and decode
    rank after vLLM's share. Raising it on `Failed to allocate memory object` needs a lower
    `gpu_memory_utilization` (docs/endpoint.md). Default: 8 GiB (AWS's)."""
    autoscaling: AutoscalingConfig = AutoscalingConfig()
    """KEDA autoscaling of prefill and decode. Default: off."""
    model_cache: ModelCacheConfig = ModelCacheConfig()
    """Image pre-pull and NVMe weights cache (cold start). Default: image cache on; weights cache on where the
    instance type has an instance store."""
    load_balancer_idle_timeout_seconds: Annotated[
        int, Field(ge=pins.LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS[0],
                   le=pins.LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS[1])] | None = None
    """Seconds the ALB keeps a connection open that carries no bytes (`loadBalancer.idleTimeoutSeconds`, 1-4000;
    the ALB's own default is 60, which cuts a long non-streamed answer or a long wait in the prefill queue).
    Must be at least `observability.slo.ttft_p95_seconds`. Default (`null`): the longest answer the SLOs allow,
    `slo.ttft_p95_seconds + max_model_len x slo.tpot_p95_seconds` rounded up, at most 4000 (a `note:` says when
    it is clamped); default config: 2.5 + 16384 x 0.1 = 1641."""
    apply: Literal["dpd", "colocated"] = "dpd"
    """The endpoint `kubectl apply -f dist/endpoint/` applies: `dpd` or `colocated`. The other manifest (same
    name: applying it replaces this one) goes to `dist/alternate/` for rollback and the benchmark baseline.
    Default: `dpd`."""

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        """Overriding one field of ``prefill``/``decode`` keeps the role's other defaults (field by field)."""
        return _merge_defaults(cls, data, ("prefill", "decode"))


def _bucket_boundary(field: str) -> FieldRule:
    """A latency objective the alerts can count requests under: a bucket boundary of each histogram it is read
    from (``telemetry/objectives.py``); the message names the two nearest boundaries."""
    bounds = objectives.boundaries(field)
    allowed = (f"must be a bucket boundary of {objectives.histogram_names(field)} (the alerts count the requests "
               "within it)")

    def check(value: float) -> None:
        if float(value) not in bounds:
            below, above = objectives.nearest(field, value)
            near = [f"{b:g}" for b in (below, above) if b is not None]
            raise Broken(allowed, f"; the nearest {'are' if len(near) > 1 else 'is'} {' and '.join(near)}")

    return FieldRule(check, f"{allowed}: one of {', '.join(f'{b:g}' for b in bounds)}", {"enum": list(bounds)})


class SloConfig(_Model):
    """Thresholds the alerts fire on; the latency ones are also drawn on the dashboards' latency panels."""

    ttft_p95_seconds: Annotated[float, Field(gt=0), _bucket_boundary("ttft_p95_seconds")] = 2.5
    """Time to first token, in seconds, within which 95 % of requests must stay (the alerts fire when fewer do).
    Must be a bucket boundary of vLLM's TTFT and E2E histograms: 0.5, 1, 2.5, 5, 10, 20 or 40. Default: 2.5."""
    tpot_p95_seconds: Annotated[float, Field(gt=0), _bucket_boundary("tpot_p95_seconds")] = 0.1
    """Time per output token, in seconds, within which 95 % of requests must stay. Must be a bucket boundary of
    vLLM's per-request TPOT histogram (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, ...). Default: 0.1."""
    error_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.01
    """Share of failed requests above which the alert fires. Default: 0.01."""
    kv_cache_usage_ratio: Annotated[float, Field(gt=0, le=1)] = 0.9
    """KV-cache usage above which the alert fires. Default: 0.9."""
    # The default stays the int 16 (not validated into 16.0): the alert rules render it as "> 16", as before.
    prefill_queue_per_replica: Annotated[float, Field(gt=0, validate_default=False)] = 16
    """Waiting requests per prefill replica above which the alert fires. Default: 16."""
    kv_transfer_miss_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Share of requested KV tokens decode may fail to receive from prefill before the alert fires. Default: 0.05."""
    pod_restarts_per_15m: Annotated[int, Field(ge=1)] = 2
    """Container restarts of one DPD pod within 15 minutes above which it counts as a restart loop. Default: 2."""


class CollectorLabelsConfig(_Model):
    """Pod and namespace labels of the DCGM and kube-state-metrics series in the workspace. The observability
    add-on's relabelling is not published; the defaults are the labels both exporters write themselves
    (docs/observability.md, "Labels")."""

    dcgm_pod: PrometheusLabel = "pod"
    """Pod label of the DCGM exporter's series. Default: `pod`."""
    dcgm_namespace: PrometheusLabel = "namespace"
    """Namespace label of the DCGM exporter's series. Default: `namespace`."""
    kube_state_metrics_pod: PrometheusLabel = "pod"
    """Pod label of the kube-state-metrics series. Default: `pod`."""
    kube_state_metrics_namespace: PrometheusLabel = "namespace"
    """Namespace label of the kube-state-metrics series. Default: `namespace`."""


class GrafanaWorkspaceConfig(_Model):
    """An existing Amazon Managed Grafana workspace that receives the dashboards and the AMP data source."""

    workspace_id: GrafanaWorkspaceId
    """Workspace ID (`g-` and 10 hex digits), in `region`. Required."""
    folder: Annotated[str, Field(min_length=1, max_length=100)] = "HyperPod DPD"
    """Grafana folder of the dashboards. Default: `HyperPod DPD`."""


class AlertsConfig(_Model):
    """Who the alerts reach. Amazon Managed Service for Prometheus notifies only through its alert manager, whose
    only receiver is Amazon SNS (AMP user guide, alert manager receivers): the observability stack creates an
    encrypted topic that the alert manager publishes every alert to, and subscribes these receivers."""

    email_addresses: Annotated[tuple[EmailAddress, ...], Field(max_length=20), unique("an address")] = ()
    """E-mail addresses subscribed to the alert topic; each must confirm the subscription from the e-mail SNS
    sends. Default: none."""
    topic_arn: SnsTopicArn | None = None
    """An existing Standard SNS topic in this account and `region` that receives every alert as well (pager or
    chat integration). AMP's alert manager routes only to SNS topics in its own account (AMP user guide, "Alert
    Manager"): a topic of another account than the one the config's ARNs name (`eks.admin_principal_arn`,
    training plans) is refused. Its access policy must let `aps.amazonaws.com` publish (and its KMS key, if
    encrypted, decrypt); the stack cannot change a topic it does not own (docs/observability.md). Default: none."""


class ObservabilityConfig(_Model):
    """Metrics, alerts and dashboards (docs/observability.md)."""

    enabled: bool = True
    """Create the Amazon Managed Prometheus workspace, the HyperPod observability add-on and the alert rules.
    Default: on."""
    scrape_interval_seconds: Annotated[int, Field(ge=5, le=300)] = 15
    """Scrape interval of the observability add-on, in seconds. Default: 15."""
    grafana_sidecar_label: LabelKey = "grafana_dashboard"
    """Label key of the dashboard ConfigMaps, for a Grafana sidecar that loads dashboards by label. Default:
    `grafana_dashboard`."""
    slo: SloConfig = SloConfig()
    """Alert thresholds. Default: TTFT p95 2.5 s, TPOT p95 0.1 s, errors 1 %, KV cache 90 %, prefill queue 16 per
    replica, KV-transfer miss 5 %, 2 restarts per 15 min."""
    collector_labels: CollectorLabelsConfig = CollectorLabelsConfig()
    """Labels of the DCGM and kube-state-metrics series. Default: `pod` and `namespace`."""
    grafana_workspace: GrafanaWorkspaceConfig | None = None
    """Deploy dashboards and the AMP data source into this Amazon Managed Grafana workspace on `cdk deploy`.
    Default: none (dashboards ship as JSON files in `dist/dashboards/` to import)."""
    alerts: AlertsConfig = AlertsConfig()
    """Receivers of the alerts (e-mail addresses and/or an existing SNS topic). Default: none: the alerts fire in
    the workspace and reach no one (synth and `status` say so)."""
    in_cluster_manifests: bool = False
    """Also write the alerts as a prometheus-operator `PrometheusRule` and the dashboards as Grafana-sidecar
    ConfigMaps into `dist/in-cluster-observability/`, for clusters that run both (HyperPod's observability
    add-on installs neither: its collector writes to AMP). Default: off."""


# --- benchmark (hyperpod-dpd bench / report; cdk8s chart <endpoint>-benchmark) ----------------------------


class BenchmarkScenarioConfig(_Model):
    """One traffic shape of the benchmark matrix."""

    name: ScenarioName
    """Short DNS label, unique among the scenarios (part of Job and file names). Required."""
    traffic: TrafficScenario
    """genai-bench `--traffic-scenario` string: `D(in,out)`, `N(mean,std)/(mean,std)` or `U(min,max)/(min,max)`
    tokens. Required."""
    path: Literal["dpd", "direct", "reference"] = "dpd"
    """Which router path the prompts must take on the DPD endpoint: `dpd` (input well above
    `endpoint.routing_threshold_tokens`), `direct` (well below: straight to decode), `reference` (reproduces a
    published setup as is, e.g. AWS's D(4096,256), even when it sits at the threshold; it runs in the
    `aws-reference` experiment, at AWS's concurrency 8, 16, 32). Default: `dpd`."""

    @property
    def experiment(self) -> Literal["aws-reference", "equal-gpu"]:
        """The experiment this scenario belongs to: `reference` scenarios reproduce AWS's setup."""
        return "aws-reference" if self.path == "reference" else "equal-gpu"


#: Concurrency of AWS's published D(4096,256) run (AWS ML blog "Disaggregated prefill and decode for LLM
#: inference on SageMaker HyperPod", 2026-07-10, "Benchmarking performance"): the aws-reference experiment's levels.
AWS_REFERENCE_CONCURRENCY: tuple[int, ...] = (8, 16, 32)

#: ``TieredStorageConfig.InstanceMemoryAllocationPercentage`` of AWS's managed KV cache example (awslabs
#: ai-on-sagemaker-hyperpod, "HyperPod Managed KV Cache with LMCache": ``{"Mode": "Enable",
#: "InstanceMemoryAllocationPercentage": 20}``); the SageMaker API publishes no default (ClusterTieredStorageConfig).
TIERED_STORAGE_DEFAULT_PERCENT = 20

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
    """The colocated-vs-DPD benchmark matrix (`hyperpod-dpd bench`; docs/benchmark.md)."""

    client_image: DigestPinnedImage = pins.BENCHMARK_CLIENT_IMAGE
    """Image of the benchmark Jobs, pinned by digest (genai-bench is installed from a hash-pinned lock file mounted
    from a ConfigMap). Default: the pinned image (`pins.BENCHMARK_CLIENT_IMAGE`)."""
    scenarios: Annotated[tuple[BenchmarkScenarioConfig, ...], Field(min_length=1, max_length=20)] | None = None
    """The traffic shapes (1 to 20). Default: AWS's D(4096,256) and four shapes sized from the endpoint's routing
    threshold and `max_model_len` (default endpoint: D(8192,1024), D(8192,128), D(1024,1024), D(1024,128))."""
    concurrency: Annotated[tuple[Annotated[int, Field(ge=1, le=1024)], ...], Field(min_length=1, max_length=10),
                           unique("a level")] = (8, 16, 32)
    """Concurrency levels; every scenario runs at each. Default: 8, 16, 32."""
    warmup_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.1
    """Share of the first requests of each run left out of the statistics (genai-bench `--warmup-ratio`).
    Default: 0.1."""
    cooldown_ratio: Annotated[float, Field(ge=0, lt=0.5)] = 0.0
    """Share of the last requests of each run left out of the statistics (`--cooldown-ratio`). Default: 0."""
    max_time_per_run_minutes: Annotated[int, Field(ge=1, le=240)] = 15
    """Stop condition: a run ends after this many minutes (genai-bench `--max-time-per-run`), or after
    `max_requests_per_run` requests, whichever comes first. Default: 15."""
    max_requests_per_run: Annotated[int, Field(ge=1, le=100_000)] = 320
    """Stop condition: a run ends after this many requests (`--max-requests-per-run`), or after
    `max_time_per_run_minutes`, whichever comes first. Default: 320."""
    target: Literal["service", "load_balancer"] = "service"
    """`service`: the router's in-cluster Service; `load_balancer`: `load_balancer_url` over TLS. Default:
    `service`."""
    load_balancer_url: str | None = None
    """`https://<host>[:port]` of the endpoint's ALB; required when `target` is `load_balancer`, with
    `ca_secret_name`. Default: none."""
    ca_secret_name: str | None = None
    """Secret with key `ca.pem`: the endpoint's TLS certificate (from the TLS bucket), for `REQUESTS_CA_BUNDLE`;
    required when `target` is `load_balancer`. Default: none."""
    results_s3_uri: S3Uri | None = None
    """`s3://bucket/prefix/`: where each Job uploads its result files. Default: none (the pod log only)."""
    split_min_saving: Annotated[float, Field(ge=0, lt=1)] = 0.10
    """The report recommends DPD only when it is at least this much cheaper per output token than colocated
    (within that, run-to-run noise and a second pool to operate are not worth it). Default: 0.10."""
    experiments: Annotated[tuple[Literal["aws-reference", "equal-gpu"], ...], Field(min_length=1, max_length=2),
                           unique("an experiment")] = ("aws-reference", "equal-gpu")
    """Which experiments run: `aws-reference` (the scenarios with `path: reference` at AWS's published
    concurrency 8, 16, 32: 1 prefill + 1 decode replica against one colocated replica) and `equal-gpu` (the
    other scenarios: the configured DPD endpoint against colocated replicas on as many GPUs, the decision
    basis). Default: both."""
    instance_hour_usd: Annotated[float, Field(gt=0)] | None = None
    """Price of one `endpoint.instance_type` node-hour in USD: the report (unless `--price`), `plan` (unless
    `--price`/`--prices`) and the dashboards' cost row price at it before the pinned price table
    (`hyperpod_core.prices`). Default: none (the pinned price; without one, costs in GPU-hours only)."""


class Config(_Model):
    """The whole deployment. `config/default.yaml` is the AWS DPD walkthrough."""

    name: DeploymentName = "hyperpod-dpd"
    """Prefix of every stack name and, by default, of every account-unique name (clusters, buckets, log groups):
    two deployments differ only in `name`. Also the Kubernetes label `app.kubernetes.io/part-of`. Default:
    `hyperpod-dpd`."""
    region: Region = "us-west-2"
    """AWS region of everything. Default: `us-west-2`."""
    network: NetworkConfig
    """The VPC. Default: every key at its default."""
    eks: EksConfig
    """The EKS cluster. Default: every key at its default."""
    hyperpod: HyperPodConfig
    """The HyperPod cluster. Required (its `instance_groups` have no default)."""
    model: ModelConfig = ModelConfig()
    """The model and where its files are. Default: every key at its default."""
    model_bucket: ModelBucketConfig = ModelBucketConfig()
    """The S3 bucket of the model files. Default: a bucket the platform stack creates and keeps on destroy."""
    endpoint: EndpointConfig = EndpointConfig()
    """The DPD inference endpoint. Default: every key at its default."""
    observability: ObservabilityConfig = ObservabilityConfig()
    """Metrics, alerts and dashboards. Default: every key at its default."""
    benchmark: BenchmarkConfig = BenchmarkConfig()
    """The benchmark matrix. Default: every key at its default."""

    def arn_accounts(self) -> set[str]:
        """AWS accounts the config's own ARNs name (``eks.admin_principal_arn``, training plans): when exactly one,
        the deployment's account is known without asking AWS."""
        arns = [self.eks.admin_principal_arn, *(g.training_plan_arn for g in self.hyperpod.instance_groups)]
        return {parts[4] for a in arns if a and len(parts := a.split(":")) > 5
                and re.fullmatch(r"[0-9]{12}", parts[4], re.ASCII)}

    def benchmark_scenarios(self) -> tuple[BenchmarkScenarioConfig, ...]:
        """``benchmark.scenarios``, else the defaults sized from the endpoint."""
        return self.benchmark.scenarios or default_scenarios(self.endpoint)

    def resolved_model_cache(self) -> ResolvedModelCache:
        """``endpoint.model_cache`` with the weights cache's default decided by the instance type."""
        m = self.endpoint.model_cache
        unavailable = sizing.weights_cache_unavailable(self.endpoint.instance_type)
        weights = m.weights_cache if m.weights_cache is not None else unavailable is None
        return ResolvedModelCache(
            image_cache=m.image_cache, weights_cache=weights, weights_cache_host_path=m.weights_cache_host_path,
            weights_cache_off_reason=unavailable if m.weights_cache is None and not weights else None)

    def load_balancer_idle_timeout(self) -> IdleTimeout:
        """``endpoint.load_balancer_idle_timeout_seconds``, else the longest answer the SLOs allow (clamped)."""
        e, slo = self.endpoint, self.observability.slo
        if e.load_balancer_idle_timeout_seconds is not None:
            return IdleTimeout(seconds=e.load_balancer_idle_timeout_seconds, derived_seconds=None)
        derived = slo.ttft_p95_seconds + e.max_model_len * slo.tpot_p95_seconds
        low, high = pins.LOAD_BALANCER_IDLE_TIMEOUT_RANGE_SECONDS
        # Rounded first: 2 + 16384 x 0.1 is 1640.4000000000001 in floating point, and an exact product must not
        # gain a second from the last bit.
        return IdleTimeout(seconds=min(max(math.ceil(round(derived, 6)), low), high), derived_seconds=derived)

    def tiered_storage_percent(self) -> int | None:
        """The share of node memory HyperPod's tiered storage takes, or ``None`` when it stays off:
        ``hyperpod.tiered_storage_memory_percent``, else 20 when the endpoint's L2 cache is ``tieredstorage``."""
        if self.hyperpod.tiered_storage_memory_percent is not None:
            return self.hyperpod.tiered_storage_memory_percent
        kv = self.endpoint.kv_cache
        return TIERED_STORAGE_DEFAULT_PERCENT if kv.enable_l2_cache and kv.l2_cache_backend == "tieredstorage" \
            else None

    def benchmark_concurrency(self, scenario: BenchmarkScenarioConfig) -> tuple[int, ...]:
        """The levels ``scenario`` runs at: AWS's published ones in the aws-reference experiment, else
        ``benchmark.concurrency``."""
        return AWS_REFERENCE_CONCURRENCY if scenario.experiment == "aws-reference" else self.benchmark.concurrency

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
            # An unknown region gets placeholders here; the region's own rule then reports the region itself
            # (its field comes before network's, and the first error is the one reported).
            cp = default_control_plane_az_ids(region) if region in AWS_REGIONS else ("", "")
            derived.append(("network", "control_plane_availability_zone_ids", cp, True))
        for section, key, value, create in derived:
            sub = data.get(section)
            if sub is None and create:
                sub = {}
            if isinstance(sub, dict) and sub.get(key) is None:
                data[section] = {**sub, key: value}
        return data

    @model_validator(mode="before")
    @classmethod
    def _move_deprecated_keys(cls, data: Any) -> Any:
        """Read ``model.existing_bucket_name`` and ``model.delete_on_destroy`` (deprecated) into ``model_bucket``,
        so a file with the old keys loads to the same config as one with the new; a file that sets an old key and
        its new one is refused in one line naming both. A key set to ``null`` counts as not set."""
        if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
            return data
        model, bucket = dict(data["model"]), data.get("model_bucket")
        moved: dict[str, Any] = {}
        for old, new in MOVED_TO_MODEL_BUCKET:
            value = model.pop(old, None)
            if value is None:
                continue
            if isinstance(bucket, dict) and bucket.get(new) is not None:
                raise ConfigError(f"model.{old} must be left out when model_bucket.{new} is set (it is that key's "
                                  f"deprecated name: keep model_bucket.{new} only), got {shown(value)}")
            moved[new] = value
        if bucket is None:
            bucket = {}
        if isinstance(bucket, dict):
            bucket = {**bucket, **moved}
        return {**data, "model": model, "model_bucket": bucket}

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Config:
        rules.check(self)
        return self
