"""The metric catalogue: every metric a DPD dashboard or alert queries, defined once.

Each :class:`Metric` names its :class:`Source` (the component and the version the name was taken from)
and the Prometheus labels we rely on. Queries are built only from these objects (see ``promql.py``), and
the test exporter serves exactly these names and labels, so a rename is a one-line change here that the
real-Prometheus test then proves.

Label contract (how role and endpoint become Prometheus labels)
---------------------------------------------------------------
We do not rely on pod labels (``app``, ``inference.sagemaker.aws.amazon.com/dpd-role``) reaching
Prometheus: whether the observability add-on's collector propagates them is not verified. Every series
instead carries ``namespace`` and the pod name, and role and endpoint are read from the pod name, which the
operator fixes (``operator.md`` section e):

* DPD prefill pods  ``prefill-<endpoint>-<replicaset-hash>-<pod-hash>``
* DPD decode pods   ``decode-<endpoint>-<replicaset-hash>-<pod-hash>``
* colocated pods    ``<endpoint>-<replicaset-hash>-<pod-hash>`` (a non-DPD InferenceEndpointConfig)
* router pods       ``<endpoint>-<namespace>-router-<replicaset-hash>-<pod-hash>`` in
  ``hyperpod-inference-system``

Engine, LMCache and kube-state-metrics series get ``namespace``/``pod`` from the standard Kubernetes
service-discovery relabelling (``__meta_kubernetes_namespace``, ``__meta_kubernetes_pod_name``); DCGM
exporter emits ``namespace``/``pod`` itself (pod mapping on); the operator's reverse-proxy sidecar emits
``namespace`` and ``pod_name`` itself. :attr:`Metric.pod_label` records which label holds the pod name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MetricType = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, kw_only=True)
class Source:
    """A component that exposes metrics, at the version the names were taken from."""

    name: str
    version: str
    endpoint: str
    """Where it is scraped (port and path)."""
    reference: str
    """Where the names were read: code path or document."""


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One Prometheus metric family as exposed (counters with ``_total``; histograms are the base name)."""

    name: str
    type: MetricType
    unit: str
    """Grafana unit id of the sample value (``s``, ``percentunit``, ``short``, ``decmbytes``...)."""
    help: str
    source: Source
    labels: tuple[str, ...]
    """Labels the source itself emits (besides ``namespace`` and the pod label)."""
    pod_label: Literal["pod", "pod_name"] = "pod"
    renamed_from: str | None = None
    """Older name of the same signal and when it changed. Default: no rename we know of."""

    def series(self, suffix: str = "") -> str:
        """The series name, e.g. ``series("_bucket")`` for a histogram's buckets."""
        if suffix and self.type != "histogram":
            raise ValueError(f"{self.name} is a {self.type}; only histograms have {suffix!r} series")
        return self.name + suffix


# --- sources ------------------------------------------------------------------------------------------

VLLM: Final = Source(
    name="vLLM engine", version="0.19.0 (image lmcache/vllm-openai:v0.4.3)",
    endpoint=":8000/metrics (container port)",
    reference="vllm/v1/metrics/loggers.py; docs.vllm.ai usage/metrics",
)
LMCACHE: Final = Source(
    name="LMCache", version="0.4.3 (image lmcache/vllm-openai:v0.4.3)",
    endpoint=":8000/metrics, through vLLM with PROMETHEUS_MULTIPROC_DIR",
    reference="lmcache/observability.py (PrometheusLogger)",
)
ROUTER: Final = Source(
    name="DPD router (vLLM production-stack router)", version="production-stack router, as forked by "
    "operator 3.2 (PROVISIONAL: AWS fork not verified)",
    endpoint="router pod /metrics", reference="vllm_router/services/metrics_service/__init__.py",
)
SIDECAR: Final = Source(
    name="HyperPod inference operator reverse-proxy sidecar (nginx)", version="operator 3.2",
    endpoint=":9113/metrics", reference="HyperPod inference observability docs; operator.md section d",
)
DCGM: Final = Source(
    name="NVIDIA DCGM exporter", version="dcgm-exporter 4.x default counters (names stable since 2.x)",
    endpoint=":9400/metrics, pod mapping on", reference="NVIDIA/dcgm-exporter etc/default-counters.csv",
)
KUBE_STATE_METRICS: Final = Source(
    name="kube-state-metrics", version="2.x (names stable since 2.0)", endpoint=":8080/metrics",
    reference="kube-state-metrics docs/metrics/workload/pod-metrics.md",
)

_ENGINE = ("model_name", "engine")
_LMC = ("model_name", "worker_id")
_DCGM = ("gpu", "UUID", "modelName", "Hostname", "container")

# --- vLLM 0.19.0 --------------------------------------------------------------------------------------

REQUEST_SUCCESS: Final = Metric(
    name="vllm:request_success_total", type="counter", unit="reqps", source=VLLM,
    labels=(*_ENGINE, "finished_reason"), help="Finished requests by reason (stop, length, abort).")
TIME_TO_FIRST_TOKEN: Final = Metric(
    name="vllm:time_to_first_token_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="Engine-side TTFT. On decode pods it includes the remote-prefill and KV-transfer wait.")
INTER_TOKEN_LATENCY: Final = Metric(
    name="vllm:inter_token_latency_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="Time between consecutive output tokens (ITL).",
    renamed_from="vllm:time_per_output_token_seconds (deprecated 0.11, hidden 0.12, removed 0.13)")
REQUEST_TPOT: Final = Metric(
    name="vllm:request_time_per_output_token_seconds", type="histogram", unit="s", source=VLLM,
    labels=_ENGINE, help="Per-request mean time per output token (TPOT).")
E2E_LATENCY: Final = Metric(
    name="vllm:e2e_request_latency_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="End-to-end request latency inside the engine.")
PREFILL_TIME: Final = Metric(
    name="vllm:request_prefill_time_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="Time a request spends in the PREFILL phase.")
QUEUE_TIME: Final = Metric(
    name="vllm:request_queue_time_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="Time a request spends WAITING in the scheduler queue.")
GENERATION_TOKENS: Final = Metric(
    name="vllm:generation_tokens_total", type="counter", unit="short", source=VLLM, labels=_ENGINE,
    help="Generated (output) tokens.")
PROMPT_TOKENS: Final = Metric(
    name="vllm:prompt_tokens_total", type="counter", unit="short", source=VLLM, labels=_ENGINE,
    help="Prefilled (input) tokens.")
NUM_REQUESTS_WAITING: Final = Metric(
    name="vllm:num_requests_waiting", type="gauge", unit="short", source=VLLM, labels=_ENGINE,
    help="Requests waiting to be scheduled (the prefill queue on prefill pods).")
NUM_REQUESTS_RUNNING: Final = Metric(
    name="vllm:num_requests_running", type="gauge", unit="short", source=VLLM, labels=_ENGINE,
    help="Requests in the running batch (decode concurrency on decode pods). The router exports a gauge "
         "of the same name; the pod selector keeps them apart.")
KV_CACHE_USAGE: Final = Metric(
    name="vllm:kv_cache_usage_perc", type="gauge", unit="percentunit", source=VLLM, labels=_ENGINE,
    help="Fraction (0-1, despite the name) of GPU KV-cache blocks in use.",
    renamed_from="vllm:gpu_cache_usage_perc (deprecated 0.9.2, hidden 0.11, removed 0.12)")
NUM_PREEMPTIONS: Final = Metric(
    name="vllm:num_preemptions_total", type="counter", unit="short", source=VLLM, labels=_ENGINE,
    help="Requests preempted because the KV cache ran out.")

# --- LMCache 0.4.3 (the KV transfer from prefill to decode goes through LMCache) ---------------------

LMCACHE_TIME_TO_RETRIEVE: Final = Metric(
    name="lmcache:time_to_retrieve", type="histogram", unit="s", source=LMCACHE, labels=_LMC,
    help="Time to retrieve KV from LMCache (on decode pods: the KV transfer from prefill).")
LMCACHE_RETRIEVE_SPEED: Final = Metric(
    name="lmcache:retrieve_speed", type="histogram", unit="short", source=LMCACHE, labels=_LMC,
    help="Retrieve speed in tokens per second.")
LMCACHE_RETRIEVE_REQUESTED_TOKENS: Final = Metric(
    name="lmcache:num_retrieve_requested_tokens_total", type="counter", unit="short", source=LMCACHE,
    labels=_LMC, help="Tokens requested from LMCache on retrieve.",
    renamed_from="lmcache:num_requested_tokens (LMCache <= 0.2; still queried by production-stack dashboards)")
LMCACHE_RETRIEVE_RETRIEVED_TOKENS: Final = Metric(
    name="lmcache:num_retrieve_retrieved_tokens_total", type="counter", unit="short", source=LMCACHE,
    labels=_LMC, help="Tokens actually retrieved; requested minus retrieved is recomputed on decode.",
    renamed_from="lmcache:num_hit_tokens (LMCache <= 0.2)")
LMCACHE_TIME_TO_STORE: Final = Metric(
    name="lmcache:time_to_store", type="histogram", unit="s", source=LMCACHE, labels=_LMC,
    help="Time to store KV into LMCache (on prefill pods: the send side of the transfer).")

# --- router (provisional names) -----------------------------------------------------------------------

ROUTER_HEALTHY_PODS: Final = Metric(
    name="vllm:healthy_pods_total", type="gauge", unit="short", source=ROUTER, labels=("server",),
    help="Backends the router considers healthy (a gauge despite _total).")
ROUTER_CURRENT_QPS: Final = Metric(
    name="vllm:current_qps", type="gauge", unit="reqps", source=ROUTER, labels=("server",),
    help="Requests per second the router sends to each backend.")

# --- operator reverse-proxy sidecar --------------------------------------------------------------------

_SIDECAR = ("cluster_name", "resource_name", "model_name", "metric_source")
MODEL_INVOCATIONS: Final = Metric(
    name="model_invocations_total", type="counter", unit="reqps", source=SIDECAR, labels=_SIDECAR,
    pod_label="pod_name", help="Invocations through the pod's reverse proxy.")
MODEL_ERRORS: Final = Metric(
    name="model_errors_total", type="counter", unit="reqps", source=SIDECAR, labels=_SIDECAR,
    pod_label="pod_name", help="Failed invocations through the pod's reverse proxy.")

# --- DCGM and kube-state-metrics ------------------------------------------------------------------------

GPU_UTIL: Final = Metric(
    name="DCGM_FI_DEV_GPU_UTIL", type="gauge", unit="percent", source=DCGM, labels=_DCGM,
    help="GPU utilisation (%). Often pegged near 100 under load; read with KV usage and queues.")
GPU_FB_USED: Final = Metric(
    name="DCGM_FI_DEV_FB_USED", type="gauge", unit="decmbytes", source=DCGM, labels=_DCGM,
    help="GPU framebuffer memory used (MiB).")
GPU_FB_FREE: Final = Metric(
    name="DCGM_FI_DEV_FB_FREE", type="gauge", unit="decmbytes", source=DCGM, labels=_DCGM,
    help="GPU framebuffer memory free (MiB).")
POD_RESTARTS: Final = Metric(
    name="kube_pod_container_status_restarts_total", type="counter", unit="short",
    source=KUBE_STATE_METRICS, labels=("container", "uid"), help="Container restarts per pod.")

CATALOGUE: Final[tuple[Metric, ...]] = (
    REQUEST_SUCCESS, TIME_TO_FIRST_TOKEN, INTER_TOKEN_LATENCY, REQUEST_TPOT, E2E_LATENCY, PREFILL_TIME,
    QUEUE_TIME, GENERATION_TOKENS, PROMPT_TOKENS, NUM_REQUESTS_WAITING, NUM_REQUESTS_RUNNING, KV_CACHE_USAGE,
    NUM_PREEMPTIONS, LMCACHE_TIME_TO_RETRIEVE, LMCACHE_RETRIEVE_SPEED, LMCACHE_RETRIEVE_REQUESTED_TOKENS,
    LMCACHE_RETRIEVE_RETRIEVED_TOKENS, LMCACHE_TIME_TO_STORE, ROUTER_HEALTHY_PODS, ROUTER_CURRENT_QPS,
    MODEL_INVOCATIONS, MODEL_ERRORS, GPU_UTIL, GPU_FB_USED, GPU_FB_FREE, POD_RESTARTS,
)
"""Every metric we query, in one place. Tests check that queries use nothing else."""
