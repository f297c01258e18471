"""One endpoint's spec + its deploy-time inputs -> the typed props of the endpoint components (a pure function)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_core import fit, names, pins, staged_model
from hyperpod_core.config import EndpointConfig, RoleAutoscalingConfig, RoleConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import Mode
from hyperpod_core.inputs import EndpointInputs
from hyperpod_core.telemetry import queries
from hyperpod_core.telemetry.targets import scaling_target
from hyperpod_k8s.endpoint import defaults as d

Role = Literal["prefill", "decode"]

#: Concurrency AWS validated DPD at (Llama 3.3 70B, p5.48xlarge) [DPD, Limitations].
VALIDATED_CONCURRENCY = 64


@dataclass(frozen=True, kw_only=True)
class RoleScaling:
    min_replicas: int
    max_replicas: int
    target_value: float
    query: str
    metric_type: Literal["Average", "Value"]


@dataclass(frozen=True, kw_only=True)
class WorkerRequests:
    """CPU (whole CPUs) and memory (GiB) requests of one worker container."""

    cpu: int
    memory_gib: int


@dataclass(frozen=True, kw_only=True)
class RoleProps:
    """One pdSpec role: ``prefillSpec`` or ``decodingSpec``."""

    replicas: int
    gpus: int
    requests: WorkerRequests
    """Derived from the node the role runs on (:meth:`hyperpod_core.config.spec.EndpointSpec.worker_requests`),
    never a per-GPU constant."""
    args: tuple[str, ...]
    node_selector: dict[str, str]
    """The role's instance group's label when the role names one, else the pool label when all of its capacity is
    dedicated, else none (:meth:`hyperpod_core.config.spec.EndpointSpec.node_selector`)."""
    scaling: RoleScaling | None


@dataclass(frozen=True, kw_only=True)
class EndpointProps:
    """Everything both manifests need; the DPD one adds ``prefill``/``decode``/routing/topology."""

    name: str
    namespace: str
    labels: dict[str, str]
    tags: tuple[tuple[str, str], ...]
    """``spec.tags``: this deployment's name and EKS cluster ARN (``hyperpod_core.names``), the tags the endpoint
    janitor and ``sweep`` delete by. The CRD says only that they are "the tags to be added to the Sagemaker
    Endpoint" (v3.3 ``spec.tags``), and with ``spec.endpointName`` empty, as our manifests leave it, "Sagemaker
    endpoint will not be created" (v3.3 ``spec.endpointName``): whether the operator puts them on anything else it
    creates (certificates, load balancers) is not published [I]. The janitor therefore goes first by what the
    objects' status names; the tags are the second path, for whatever does carry them."""
    model_name: str
    model_path: str
    """``worker.modelVolumeMount.mountPath`` and vLLM's ``--model``: ``/opt/ml/model/<model.name>/<revision>``
    (:func:`model_path`), the model identity LMCache puts into every cache key."""
    served_model_name: str
    """vLLM's ``--served-model-name``: the name clients send as ``model`` (``model.name``), the same for every
    revision."""
    instance_type: str
    invocation_path: str
    image: str
    worker_args: tuple[str, ...]
    container_port: int
    bucket_name: str
    region: str
    model_location: str
    """``modelSourceConfig.modelLocation``: the weights' key prefix in the bucket, ``<model.s3_prefix><revision>`` for
    a staged revision (content-addressed: another staging never writes into it), ``model.s3_prefix`` when the config
    names the revision (:func:`hyperpod_core.staged_model.weights_prefix`)."""
    gpus_per_replica: int
    worker_requests: WorkerRequests
    """``worker.resources``: what the colocated baseline's pods request (DPD pods take their role's)."""
    scrape_interval_seconds: int
    routing_strategy: str
    kv_cache_l1: bool
    kv_cache_l2: bool
    l2_cache_backend: str | None
    l2_cache_local_url: str | None
    # cold start and the load balancer (operator v3.3), alike on both manifests
    image_cache: bool
    weights_cache: bool
    weights_cache_host_path: str
    load_balancer_idle_timeout_seconds: int
    # DPD only
    dpd_environment: tuple[tuple[str, str], ...]
    prefill: RoleProps
    decode: RoleProps
    routing_threshold_tokens: int
    availability_zone: str | None
    availability_zone_id: str
    autoscaling_server_address: str | None
    # colocated only
    colocated_node_labels: tuple[tuple[str, tuple[str, ...]], ...]
    """Node labels that confine the colocated baseline, beside its instance type, to the groups either role may use
    (:meth:`hyperpod_core.config.spec.EndpointSpec.colocated_node_labels`): one required node-affinity term per
    label; none: any node of the instance type."""
    colocated_replicas: int
    colocated_args: tuple[str, ...]
    """Appended to ``worker_args``: decode's ``--max-num-seqs`` and its other flags, less the memory flags, and the
    baseline's own ``--gpu-memory-utilization`` (:func:`colocated_args`)."""
    colocated_environment: tuple[tuple[str, str], ...]
    colocated_routing_strategy: str = "roundrobin"
    """The colocated endpoint's router spreads requests over its replicas: ``prefixaware`` would send the
    benchmark's shared-prefix prompts to one replica and leave the others idle (operator docs: ``roundrobin``
    distributes evenly)."""


@dataclass(frozen=True, kw_only=True)
class EndpointChartProps:
    """One endpoint layout's chart (:class:`hyperpod_k8s.endpoint.endpoint_chart.EndpointChart`)."""

    mode: Mode
    """``dpd``: the disaggregated endpoint (``pdSpec``); ``colocated``: the same model without it (the baseline)."""
    endpoint: EndpointProps


@dataclass(frozen=True, kw_only=True)
class AddressProps:
    """The endpoint's stable Service (:class:`hyperpod_k8s.endpoint.address_chart.AddressChart`)."""

    name: str
    """``<endpoint>`` (:attr:`hyperpod_core.names.EndpointNames.stable_service`)."""
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    external_name: str
    """The routing service host of the InferenceEndpointConfig the Service points at."""


def address_props(spec: EndpointSpec) -> AddressProps:
    """The Service ``<endpoint>`` pointing at the endpoint's own InferenceEndpointConfig (revision 0, the one
    ``kubectl apply -f dist/<endpoint>/endpoint/`` creates); ``hyperpod-dpd rollout`` repoints it, with these labels,
    at a later revision."""
    target = spec.names
    return AddressProps(
        name=target.stable_service, namespace=spec.namespace,
        labels={"app.kubernetes.io/name": spec.name, names.PART_OF_LABEL: spec.deployment,
                names.MANAGED_BY_LABEL: names.STABLE_SERVICE_MANAGER},
        annotations={names.TARGET_ANNOTATION: target.name, names.REVISION_ANNOTATION: "0"},
        external_name=target.router_service_host)


#: Role flags that size GPU memory (vLLM ``CacheConfig`` in ``vllm/config/cache.py``: ``gpu_memory_utilization``,
#: ``kv_cache_memory_bytes``).
#: A role's own value makes room for the PD buffer LMCache allocates beside vLLM's share (docs/endpoint.md, GPU
#: memory); the colocated baseline has no buffer, so it never inherits one.
MEMORY_FLAGS: Final = (fit.UTILIZATION_FLAG, "--kv-cache-memory-bytes")


def model_path(model_name: str, revision: str) -> str:
    """``/opt/ml/model/<model.name>/<revision>``: where the weights are mounted and what vLLM's ``--model`` says.

    LMCache 0.4.3 keys every cached chunk on ``--model`` (``integration/vllm/utils.py:260``,
    ``model_name=model_cfg.model``), so the name and the revision (``model.revision`` or the staged manifest's
    digest) must both be in it. Both are validated path segments (``SageMakerName``, ``ModelRevision``): no '/',
    ':' or '@', never '.' or '..'; the whole path stays under 150 characters.

    [I] A mount path other than the CRD default ``/opt/ml/model`` is what every public operator sample leaves
    alone; how the operator's weights cache (``modelCacheConfig.weightsCache``) and its prefetch treat another path
    is not published. The path is kept (the key needs it): check on a cluster that the cached weights are what the
    pod reads (docs/endpoint.md, Model identity)."""
    return f"{d.MODEL_MOUNT_ROOT}/{model_name}/{revision}"


def worker_args(e: EndpointConfig, *, model: str, served_model_name: str) -> tuple[str, ...]:
    """vLLM flags both roles (and the colocated baseline) share [DPD reference manifest]: ``--model`` is the
    revision-bearing mount path (:func:`model_path`), ``--served-model-name`` the stable name clients send (vLLM
    0.19 ``ModelConfig.served_model_name``: "the model name(s) used in the API ... If not specified, the model name
    will be the same as the ``--model`` argument"; also the ``model_name`` label of vLLM's metrics)."""
    return (
        "--model", model,
        "--served-model-name", served_model_name,
        "--host", "0.0.0.0",
        "--port", str(e.container_port),
        "--tensor-parallel-size", str(e.tensor_parallel_size),
        "--max-model-len", str(e.max_model_len),
        "--gpu-memory-utilization", f"{e.gpu_memory_utilization:g}",
    )


def role_args(r: RoleConfig) -> tuple[str, ...]:
    """Flags appended after ``worker.args`` for one role; they override matching worker flags [CRD].

    Prefill defaults to ``--enforce-eager`` (config ``prefill.extra_args``): CUDA graphs pay off for small
    decode batches, not for long prefill passes, and skipping their capture saves GPU memory and start-up.
    Decode keeps vLLM's default, CUDA graphs on (no ``--enforce-eager``).
    """
    return ("--max-num-seqs", str(r.max_num_seqs), *r.extra_args)


def colocated_args(e: EndpointConfig) -> tuple[str, ...]:
    """Flags appended after ``worker.args`` on the colocated baseline: decode's ``--max-num-seqs`` and decode's
    other flags (a colocated engine spends most of its steps decoding), without :data:`MEMORY_FLAGS`, then the
    baseline's own ``--gpu-memory-utilization``: the endpoint's plus the share the PD buffer takes on a DPD rank
    (:meth:`~hyperpod_core.config.endpoint.EndpointConfig.colocated_gpu_memory_utilization`), never a value lowered
    for a buffer it has not."""
    args, out, i = e.decode.extra_args, [], 0
    while i < len(args):
        flag = args[i]
        if flag in MEMORY_FLAGS:
            i += 2  # the flag and its value
            continue
        if flag.partition("=")[0] not in MEMORY_FLAGS:
            out.append(flag)
        i += 1
    return ("--max-num-seqs", str(e.decode.max_num_seqs), *out,
            fit.UTILIZATION_FLAG, f"{e.colocated_gpu_memory_utilization():g}")


def _scaling(spec: EndpointSpec, role: Role) -> RoleScaling | None:
    a = spec.endpoint.autoscaling
    if not a.enabled:
        return None
    r: RoleAutoscalingConfig = getattr(a, role)
    # The same query definitions the dashboards and alerts use (hyperpod_core.telemetry.queries), on the pods of this
    # InferenceEndpointConfig only (targets.scaling_target: the docs' reference table reads the same one).
    target = scaling_target(spec)
    return RoleScaling(
        min_replicas=r.min_replicas, max_replicas=r.max_replicas, target_value=r.target_value,
        query=queries.prefill_queue(target) if role == "prefill" else queries.decode_kv_usage(target),
        metric_type=d.PREFILL_METRIC_TYPE if role == "prefill" else d.DECODE_METRIC_TYPE,
    )


def _requests(spec: EndpointSpec, role: Literal["prefill", "decode", "colocated"]) -> WorkerRequests:
    r = spec.worker_requests(role)
    return WorkerRequests(cpu=r.cpu, memory_gib=r.memory_gib)


def _role(spec: EndpointSpec, role: Role) -> RoleProps:
    r: RoleConfig = getattr(spec.endpoint, role)
    return RoleProps(replicas=r.replicas, gpus=r.gpus, requests=_requests(spec, role), args=role_args(r),
                     node_selector=spec.node_selector(role), scaling=_scaling(spec, role))


def endpoint_props(spec: EndpointSpec, inputs: EndpointInputs, *, availability_zone_id: str) -> EndpointProps:
    """Endpoint ``spec``'s props with its deploy-time ``inputs``; ``availability_zone_id``: the AZ ID of the GPU
    subnet (``network.gpu_availability_zone_id``)."""
    e, model = spec.endpoint, spec.model
    total_gpus = e.prefill.replicas * e.prefill.gpus + e.decode.replicas * e.decode.gpus
    server_address = inputs.amp_workspace_endpoint.value if e.autoscaling.enabled else None
    cache = spec.resolved_model_cache()
    path = model_path(model.name, inputs.model_revision.value or "")
    return EndpointProps(
        name=e.name, namespace=e.namespace,
        labels={"app.kubernetes.io/name": e.name, names.PART_OF_LABEL: spec.deployment,
                "app.kubernetes.io/managed-by": "cdk8s"},
        tags=((names.DEPLOYMENT_TAG, spec.deployment),
              (names.EKS_CLUSTER_ARN_TAG, inputs.eks_cluster_arn.value or "")),
        model_name=model.name, model_path=path, served_model_name=model.name,
        instance_type=e.instance_type, invocation_path=e.invocation_path,
        image=e.image, worker_args=worker_args(e, model=path, served_model_name=model.name),
        container_port=e.container_port,
        bucket_name=inputs.model_bucket_name.value or "", region=spec.region,
        model_location=staged_model.weights_prefix(model.s3_prefix, inputs.model_revision.value or "",
                                                   configured=model.revision is not None).rstrip("/"),
        gpus_per_replica=e.tensor_parallel_size,
        worker_requests=_requests(spec, "colocated"),
        scrape_interval_seconds=spec.observability.scrape_interval_seconds,
        routing_strategy=e.routing_strategy,
        kv_cache_l1=e.kv_cache.enable_l1_cache, kv_cache_l2=e.kv_cache.enable_l2_cache,
        l2_cache_backend=e.kv_cache.l2_cache_backend, l2_cache_local_url=e.kv_cache.l2_cache_local_url,
        image_cache=cache.image_cache, weights_cache=cache.weights_cache,
        weights_cache_host_path=cache.weights_cache_host_path,
        load_balancer_idle_timeout_seconds=spec.load_balancer_idle_timeout().seconds,
        dpd_environment=(
            ("PD_BUFFER_SIZE", str(e.pd_buffer_size_bytes)),
            ("LMCACHE_SAVE_DECODE_CACHE", d.LMCACHE_SAVE_DECODE_CACHE),
            ("PYTHONHASHSEED", d.PYTHONHASHSEED),
            ("PROMETHEUS_MULTIPROC_DIR", d.PROMETHEUS_MULTIPROC_DIR),
        ),
        prefill=_role(spec, "prefill"), decode=_role(spec, "decode"),
        routing_threshold_tokens=e.routing_threshold_tokens,
        availability_zone=inputs.gpu_availability_zone.value,
        availability_zone_id=availability_zone_id,
        autoscaling_server_address=server_address,
        # Same GPUs in total, whole TP-sized replicas; the model's flags plus decode's batch size and non-memory
        # flags (a colocated engine spends most of its steps decoding).
        colocated_node_labels=spec.colocated_node_labels(),
        colocated_replicas=max(1, total_gpus // e.tensor_parallel_size),
        colocated_args=colocated_args(e),
        colocated_environment=(("PYTHONHASHSEED", d.PYTHONHASHSEED),
                               ("PROMETHEUS_MULTIPROC_DIR", d.PROMETHEUS_MULTIPROC_DIR)),
    )


def limit_notes(spec: EndpointSpec) -> list[str]:
    """Operator limits (DPD since v3.2, unchanged in the pinned v3.3) that are reported rather than enforced, one
    line each with its source, naming endpoint ``spec``'s keys as the file does."""
    e, notes = spec.endpoint, []
    v = pins.INFERENCE_OPERATOR_APP_VERSION
    peak_prefill = max(e.prefill.replicas, e.autoscaling.prefill.max_replicas if e.autoscaling.enabled else 0)
    if peak_prefill > 1 and e.routing_strategy != "roundrobin":
        notes.append(f"{spec.field('routing_strategy')} {e.routing_strategy!r} with up to {peak_prefill} prefill "
                     f"replicas: operator v{v} recommends 'roundrobin' for several prefillers "
                     "(DPD guide, intelligent routing)")
    if e.decode.max_num_seqs > VALIDATED_CONCURRENCY:
        notes.append(f"{spec.field('decode.max_num_seqs')} {e.decode.max_num_seqs}: AWS validated DPD up to "
                     f"{VALIDATED_CONCURRENCY} concurrent requests (DPD guide, Limitations)")
    if e.image not in pins.DPD_SUPPORTED_IMAGES:
        notes.append(f"{spec.field('image')} {e.image!r} is not one of the DPD images AWS supports "
                     f"({', '.join(pins.DPD_SUPPORTED_IMAGES)}; DPD guide, Requirements)")
    return notes


def cold_start_notes(spec: EndpointSpec) -> list[str]:
    """What the cache and idle-timeout defaults decided against the file's intent for endpoint ``spec``, one
    ``note:`` line each."""
    notes = []
    timeout, slo, max_len = spec.load_balancer_idle_timeout(), spec.slo, spec.endpoint.max_model_len
    if timeout.clamped:
        notes.append(f"{spec.field('load_balancer_idle_timeout_seconds')} clamped to {timeout.seconds}: "
                     f"slo.ttft_p95_seconds {slo.ttft_p95_seconds:g} + {spec.field('max_model_len')} {max_len} "
                     f"x slo.tpot_p95_seconds {slo.tpot_p95_seconds:g} = {timeout.derived_seconds:.0f} s exceeds the "
                     f"ALB's {timeout.seconds} s maximum (operator v3.3 CRD); stream long answers")
    reason = spec.resolved_model_cache().weights_cache_off_reason
    if reason is not None:
        notes.append(f"{spec.field('model_cache.weights_cache')} off: {reason}; weights load from S3 on every pod "
                     "start")
    return notes
