"""The endpoint's sections: one entry of `endpoints` (the DPD endpoint with its colocated baseline: roles,
autoscaling, KV cache, cold start) and the model it serves (its `model`). Kept apart from the cluster's sections:
the endpoint is the unit a deployment repeats (docs/endpoint.md, "Several endpoints").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from hyperpod_core import fit, pins
from hyperpod_core.config.observability import SloConfig
from hyperpod_core.config.section import Section, merge_defaults
from hyperpod_core.config.types import (
    BucketName,
    DnsLabel,
    DpdInstanceType,
    InvocationPath,
    KmsKeyArn,
    ModelRevision,
    NvmeHostPath,
    PinnedImage,
    S3Prefix,
    SageMakerName,
)


class ModelConfig(Section):
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
    bucket: BucketName | None = None
    """Read this model's weights from this bucket, in `region`, instead of the deployment's (`model_bucket`): the
    endpoint's readers get read access below `s3_prefix` of this bucket only; nothing is created or changed in it.
    Stage with `hyperpod-dpd stage-model --endpoint NAME` as usual. Default: none: the deployment's bucket."""
    kms_key_arn: KmsKeyArn | None = None
    """The customer managed KMS key, in `region`, that encrypts the objects of `bucket` (its key ARN); the endpoint's
    readers get `kms:Decrypt` on exactly this key. Only with `bucket`. Default: none (SSE-S3 or `aws/s3`)."""
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

    def memory(self, tensor_parallel_size: int) -> fit.ModelMemory | None:
        """The model by size: ``parameters_billion`` (with ``dtype`` and ``kv_cache_kib_per_token``) when set, else
        the table's model named by ``name`` or its S3 folder (:func:`hyperpod_core.models.known_model`); ``None``
        when neither says how large it is."""
        from hyperpod_core.models import DTYPE_BYTES, known_model

        tp = tensor_parallel_size
        if self.parameters_billion is not None and self.kv_cache_kib_per_token is not None:
            return fit.ModelMemory(
                name=self.name, weight_bytes=int(self.parameters_billion * 1e9 * DTYPE_BYTES[self.dtype]),
                kv_bytes_per_token_per_rank=int(self.kv_cache_kib_per_token * 1024 / tp),
                source="model.parameters_billion, model.kv_cache_kib_per_token")
        shape = known_model(self.name, self.s3_prefix)
        if shape is None:
            return None
        return fit.ModelMemory(name=shape.name, weight_bytes=shape.parameters * DTYPE_BYTES[self.dtype],
                               kv_bytes_per_token_per_rank=shape.kv_bytes_per_token_per_rank(tp),
                               source=shape.source)


class RoleConfig(Section):
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
    instance_group: SageMakerName | None = None
    """The one HyperPod instance group (`hyperpod.instance_groups[].name`) the role's workers run on: the workers
    get a nodeSelector on the group's node label `hyperpod-dpd/instance-group`, which the platform stack puts on
    that group (`KubernetesConfig.Labels`). Its instance type must be `instance_type`. Default: none: the groups
    of the role's pool (`pool: <role>`) of `instance_type` when it has no `shared` group of that type (the pool
    label selects them), else no nodeSelector: any node of `instance_type`. Then no group the role may land on may
    be named by another role (unless it is the only one), since this role could take that group's nodes first."""


class RoleAutoscalingConfig(Section):
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


class AutoscalingConfig(Section):
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
        return merge_defaults(cls, data, ("prefill", "decode"))


class KvCacheConfig(Section):
    """LMCache KV-cache offloading of the workers (InferenceEndpointConfig `kvCacheSpec`)."""

    enable_l1_cache: bool = True
    """Offload the KV cache to CPU memory (L1). Default: on."""
    enable_l2_cache: bool = False
    """Offload the KV cache further to an L2 backend (`l2_cache_backend`). Default: off."""
    l2_cache_backend: Literal["redis", "tieredstorage"] | None = None
    """L2 backend; required when `enable_l2_cache` is on. Default: none."""
    l2_cache_local_url: str | None = None
    """URL of the L2 backend (`l2CacheSpec.l2CacheLocalUrl`). Default: none (the operator's default)."""


class ModelCacheConfig(Section):
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


class EndpointConfig(Section):
    """One DPD inference endpoint (the operator's InferenceEndpointConfig) and its colocated baseline: an entry of
    `endpoints`."""

    name: DnsLabel = "llama-3-3-70b"
    """Name of the InferenceEndpointConfig, unique in the deployment (the command line's `--endpoint NAME`, its
    folder `dist/<name>/`, its stable Service `<name>`); the operator derives its pod, Service and Ingress names from
    it, which must be unique across the deployment too. Must not end in `-r<N>`: `hyperpod-dpd rollout` names the
    endpoint's blue/green revisions `<name>-r<N>`. Default: `llama-3-3-70b`."""
    model: ModelConfig = ModelConfig()
    """The model this endpoint serves and where its files are. Default: every key at its default."""
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
    slo: SloConfig | None = None
    """This endpoint's own alert and dashboard thresholds: the keys it names replace those of
    `observability.slo` for this endpoint (the others keep theirs). Default: none: `observability.slo`."""
    apply: Literal["dpd", "colocated"] = "dpd"
    """The endpoint `kubectl apply -f dist/<name>/endpoint/` applies, and `hyperpod-dpd rollout` changes a live one
    to: `dpd` or `colocated`. The other manifest (same name: one replaces the other) goes to `dist/<name>/alternate/`,
    the benchmark's baseline. Default: `dpd`."""

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        """Overriding one field of ``prefill``/``decode`` keeps the role's other defaults (field by field)."""
        return merge_defaults(cls, data, ("prefill", "decode"))

    def role_gpu_memory_utilization(self, role: Literal["prefill", "decode"]) -> float:
        """The utilization the role's engine runs with: the last ``--gpu-memory-utilization`` in its ``extra_args``
        (appended after ``worker.args``, so it wins), else ``gpu_memory_utilization``."""
        return fit.utilization_in_args(self.gpu_memory_utilization, getattr(self, role).extra_args)

    def colocated_gpu_memory_utilization(self) -> float:
        """The colocated baseline's ``--gpu-memory-utilization``: ``gpu_memory_utilization`` raised by the share of
        one GPU the PD buffer takes on every DPD rank (:func:`hyperpod_core.fit.colocated_utilization`)."""
        return fit.colocated_utilization(self.instance_type, self.gpu_memory_utilization, self.pd_buffer_size_bytes)

    def peak_replicas(self, role: Literal["prefill", "decode"]) -> int:
        """Replicas a role can reach: its fixed count, or the autoscaling maximum when that is on."""
        fixed: int = getattr(self, role).replicas
        return max(fixed, getattr(self.autoscaling, role).max_replicas) if self.autoscaling.enabled else fixed
