"""The metric catalogue: every metric a dashboard, alert or autoscaling trigger queries, defined once.

Each :class:`Metric` names the exposed series family, the family in the exporter's contract
(``shared/metrics/*.json``: vLLM 0.19.0 and LMCache 0.4.3 as read from their wheels), its :class:`Source`
and the exporter's own labels. How the pod name is labelled depends on the path the series takes to
Prometheus (:attr:`Metric.path`, see ``labels.py``). Queries are built only from these objects
(``queries.py``); the tests serve the contract's series and prove every query returns data from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hyperpod_core.telemetry import labels as lbl

MetricType = Literal["counter", "gauge", "histogram"]
Path = Literal["inference", "dcgm", "kube-state-metrics"]
"""``inference``: the HyperPod inference operator's metrics path (``pod_name``, ``namespace``,
``metric_source``); ``dcgm`` / ``kube-state-metrics``: the observability add-on's collector."""
Category = Literal["inferenceMetrics", "acceleratedComputeMetrics", "clusterMetrics"]
"""The observability add-on's ``metricsProvider`` category that collects a path's series."""

#: Which ``metricsProvider`` category of the HyperPod observability add-on produces each path's series: the
#: inference operator's model and sidecar metrics come with ``inferenceMetrics`` (AWS inference observability
#: page); DCGM with ``acceleratedComputeMetrics`` and kube-state-metrics with ``clusterMetrics`` (HyperPod
#: cluster metrics page; lifecycle-facts.md, "Observability that reaches people").
CATEGORY_OF_PATH: Final[dict[str, Category]] = {
    "inference": "inferenceMetrics", "dcgm": "acceleratedComputeMetrics", "kube-state-metrics": "clusterMetrics",
}


@dataclass(frozen=True, kw_only=True)
class Source:
    """A component that exposes metrics, at the version the names were taken from."""

    name: str
    version: str
    endpoint: str
    """Where it is scraped (port and path)."""
    reference: str
    """Where the names were read: contract file, code path or document."""


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
    """Labels the exporter itself emits, as the contract lists them."""
    path: Path = "inference"
    """How the series reach Prometheus, which decides the pod and namespace labels. Default: ``inference``."""
    renamed_from: str | None = None
    """Older name of the same signal and when it changed. Default: no rename we know of."""
    buckets: tuple[float, ...] = ()
    """A histogram's finite bucket boundaries (``le``) as the exporter writes them: the only latencies a query
    can count requests under without interpolating. Default: none (not a histogram, or no SLO is read from it)."""

    @property
    def category(self) -> Category:
        """The add-on's ``metricsProvider`` category that must be on for these series to reach the workspace."""
        return CATEGORY_OF_PATH[self.path]

    @property
    def family(self) -> str:
        """The family name as the exporter defines it (``shared/metrics``): counters without ``_total``."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name

    def series(self, suffix: str = "") -> str:
        """The series name, e.g. ``series("_bucket")`` for a histogram's buckets."""
        if suffix and self.type != "histogram":
            raise ValueError(f"{self.name} is a {self.type}; only histograms have {suffix!r} series")
        return self.name + suffix

    def le_matcher(self, bound: float) -> str:
        """``le="2.5"``: the bucket of boundary ``bound``. A whole number matches both spellings, so a bucket is not
        lost on the way to the workspace: ``1.0``, as prometheus_client (the exporter) writes it and Prometheus 3
        normalises it on ingestion (prometheus.io/docs/prometheus/3.0/migration, "le and quantile label values":
        ``le="1"`` is ingested as ``le="1.0"``), and ``1``, as a Prometheus 2 keeps a text exposition that writes
        it so and as OpenTelemetry's translation to remote write writes every bound (prometheus/prometheus,
        ``storage/remote/otlptranslator/prometheusremotewrite/helper.go``: ``strconv.FormatFloat(bound, 'f', -1,
        64)``)."""
        bound = float(bound)
        if bound not in self.buckets:
            raise ValueError(f"{self.name} has no bucket boundary {bound:g}; its boundaries are "
                             f"{', '.join(f'{b:g}' for b in self.buckets) or 'not in the catalogue'}")
        if bound.is_integer():
            return f'{lbl.LE}=~"{int(bound)}(\\\\.0)?"'
        return f'{lbl.LE}="{bound!r}"'

    def pod_label(self, collector: lbl.CollectorLabels) -> str:
        """The label holding the pod name on this metric's series."""
        if self.path == "dcgm":
            return collector.dcgm_pod
        if self.path == "kube-state-metrics":
            return collector.kube_state_metrics_pod
        return lbl.POD_NAME

    def namespace_label(self, collector: lbl.CollectorLabels) -> str:
        """The label holding the pod's namespace on this metric's series."""
        if self.path == "dcgm":
            return collector.dcgm_namespace
        if self.path == "kube-state-metrics":
            return collector.kube_state_metrics_namespace
        return lbl.NAMESPACE


# --- sources ------------------------------------------------------------------------------------------

VLLM: Final = Source(
    name="vLLM engine", version="0.19.0 (image lmcache/vllm-openai:v0.4.3)",
    endpoint=":8000/metrics (container port = metrics.modelMetrics.port)",
    reference="shared/metrics/vllm-0.19.0.json (vllm/v1/metrics/loggers.py)",
)
LMCACHE: Final = Source(
    name="LMCache", version="0.4.3 (image lmcache/vllm-openai:v0.4.3)",
    endpoint=":8000/metrics, through vLLM with PROMETHEUS_MULTIPROC_DIR set for both processes",
    reference="shared/metrics/lmcache-0.4.3.json (lmcache/observability.py)",
)
SIDECAR: Final = Source(
    name="HyperPod inference operator reverse-proxy sidecar (nginx)", version="operator 3.2",
    endpoint=":9113/metrics",
    reference="AWS inference observability page (shared/metrics/SOURCES.md; operator.md section d)",
)
DCGM: Final = Source(
    name="NVIDIA DCGM exporter (HyperPod observability add-on)",
    version="dcgm-exporter default counters (names stable since 2.x)",
    endpoint=":9400/metrics, Kubernetes pod mapping on",
    reference="NVIDIA/dcgm-exporter etc/default-counters.csv; HyperPod cluster metrics page (accelerated compute)",
)
KUBE_STATE_METRICS: Final = Source(
    name="kube-state-metrics (HyperPod observability add-on)", version="2.x (names stable since 2.0)",
    endpoint=":8080/metrics",
    reference="kube-state-metrics docs/metrics/workload/pod-metrics.md; HyperPod cluster metrics page",
)

# --- histogram buckets (one place; tests/observability/test_definitions.py compares them with the contract) ---

#: ``vllm:time_to_first_token_seconds`` (vLLM 0.19.0 ``vllm/v1/metrics/loggers.py:727``; vllm-0.19.0.json).
TTFT_BUCKETS: Final = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                       20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
#: ``vllm:inter_token_latency_seconds`` and ``vllm:request_time_per_output_token_seconds`` (loggers.py:760 and
#: :790; shared/metrics/vllm-0.19.0.json).
PER_TOKEN_BUCKETS: Final = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                            20.0, 40.0, 80.0)
#: ``request_latency_buckets`` of vLLM's ``vllm/v1/metrics/loggers.py``: E2E (:843), queue (:853) and prefill (:873)
#: time. The contract names the variable (its extractor keeps only literal lists); the values are the variable's
#: in vLLM's source (vllm-project/vllm, ``vllm/v1/metrics/loggers.py``, ``request_latency_buckets = [...]``).
REQUEST_LATENCY_BUCKETS: Final = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                                  120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)

_ENGINE = ("model_name", "engine")
_LMC = ("model_name", "worker_id", "role")
#: The sidecar's dimensions (AWS inference observability page) and its request labels (``labels.METHOD``...).
_SIDECAR = ("cluster_id", "cluster_name", "resource_name", "resource_type", "model_name", "model_version",
            "model_container_type", "node_name", "instance_type", "task_type", lbl.METHOD, lbl.URI, lbl.STATUS)
_DCGM = ("gpu", "UUID", "device", "modelName", "Hostname", "container")
_KSM = ("uid", "container")

# --- vLLM 0.19.0 --------------------------------------------------------------------------------------

REQUEST_SUCCESS: Final = Metric(
    name="vllm:request_success_total", type="counter", unit="reqps", source=VLLM,
    labels=(*_ENGINE, lbl.FINISHED_REASON),
    help="Finished requests by reason (stop, length, abort, error, repetition); a failed KV load is 'error'.")
TIME_TO_FIRST_TOKEN: Final = Metric(
    name="vllm:time_to_first_token_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    buckets=TTFT_BUCKETS,
    help="Engine-side TTFT. On decode pods it includes the remote-prefill and KV-transfer wait.")
INTER_TOKEN_LATENCY: Final = Metric(
    name="vllm:inter_token_latency_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    help="Time between consecutive output tokens (ITL).", buckets=PER_TOKEN_BUCKETS,
    renamed_from="vllm:time_per_output_token_seconds (deprecated 0.11, hidden 0.12, removed 0.13)")
REQUEST_TPOT: Final = Metric(
    name="vllm:request_time_per_output_token_seconds", type="histogram", unit="s", source=VLLM,
    labels=_ENGINE, help="Per-request mean time per output token (TPOT).", buckets=PER_TOKEN_BUCKETS)
E2E_LATENCY: Final = Metric(
    name="vllm:e2e_request_latency_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    buckets=REQUEST_LATENCY_BUCKETS,
    help="End-to-end request latency inside the engine. On prefill pods: the whole prefill leg the router "
         "waits for (queue + prefill, max_tokens=1) before it opens the decode request.")
PREFILL_TIME: Final = Metric(
    name="vllm:request_prefill_time_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    buckets=REQUEST_LATENCY_BUCKETS,
    help="Time a request spends in the PREFILL phase.")
QUEUE_TIME: Final = Metric(
    name="vllm:request_queue_time_seconds", type="histogram", unit="s", source=VLLM, labels=_ENGINE,
    buckets=REQUEST_LATENCY_BUCKETS,
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
    help="Requests in the running batch (decode concurrency on decode pods).")
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
LMCACHE_TIME_TO_STORE: Final = Metric(
    name="lmcache:time_to_store", type="histogram", unit="s", source=LMCACHE, labels=_LMC,
    help="Time to store KV into LMCache (on prefill pods: the send side of the transfer).")
LMCACHE_REQUESTED_TOKENS: Final = Metric(
    name="lmcache:num_requested_tokens_total", type="counter", unit="short", source=LMCACHE, labels=_LMC,
    help="Tokens requested from LMCache on retrieve. Every TP rank (worker_id) counts the same tokens.")
LMCACHE_HIT_TOKENS: Final = Metric(
    name="lmcache:num_hit_tokens_total", type="counter", unit="short", source=LMCACHE, labels=_LMC,
    help="Tokens LMCache delivered (hit); requested minus hit is recomputed on decode. Every TP rank (worker_id) "
         "counts the same tokens.")

# --- operator reverse-proxy sidecar --------------------------------------------------------------------

MODEL_INVOCATIONS: Final = Metric(
    name="model_invocations_total", type="counter", unit="reqps", source=SIDECAR, labels=_SIDECAR,
    help="Requests through the pod's reverse proxy, by method, uri and status; the inference requests are "
         "method=\"POST\" to any path but probes and control calls (labels.NON_INFERENCE_URIS).")
MODEL_ERRORS: Final = Metric(
    name="model_errors_total", type="counter", unit="reqps", source=SIDECAR, labels=_SIDECAR,
    help="Failed requests through the pod's reverse proxy, by method, uri and status.")

# --- DCGM and kube-state-metrics ------------------------------------------------------------------------

GPU_UTIL: Final = Metric(
    name="DCGM_FI_DEV_GPU_UTIL", type="gauge", unit="percent", source=DCGM, labels=_DCGM, path="dcgm",
    help="GPU utilisation (%). Often pegged near 100 under load; read with KV usage and queues.")
GPU_FB_USED: Final = Metric(
    name="DCGM_FI_DEV_FB_USED", type="gauge", unit="decmbytes", source=DCGM, labels=_DCGM, path="dcgm",
    help="GPU framebuffer memory used (MiB).")
GPU_FB_FREE: Final = Metric(
    name="DCGM_FI_DEV_FB_FREE", type="gauge", unit="decmbytes", source=DCGM, labels=_DCGM, path="dcgm",
    help="GPU framebuffer memory free (MiB).")
POD_RESTARTS: Final = Metric(
    name="kube_pod_container_status_restarts_total", type="counter", unit="short",
    source=KUBE_STATE_METRICS, labels=_KSM, path="kube-state-metrics",
    help="Container restarts per pod.")

POD_READY: Final = Metric(
    name="kube_pod_status_ready", type="gauge", unit="short", source=KUBE_STATE_METRICS,
    labels=("uid", lbl.CONDITION), path="kube-state-metrics",
    help="1 for the pod's Ready condition value in `condition` (true, false, unknown): the endpoint-down alert "
         "counts pods with condition=\"true\" at 1.")

CATALOGUE: Final[tuple[Metric, ...]] = (
    REQUEST_SUCCESS, TIME_TO_FIRST_TOKEN, INTER_TOKEN_LATENCY, REQUEST_TPOT, E2E_LATENCY, PREFILL_TIME,
    QUEUE_TIME, GENERATION_TOKENS, PROMPT_TOKENS, NUM_REQUESTS_WAITING, NUM_REQUESTS_RUNNING, KV_CACHE_USAGE,
    NUM_PREEMPTIONS, LMCACHE_TIME_TO_RETRIEVE, LMCACHE_TIME_TO_STORE, LMCACHE_REQUESTED_TOKENS,
    LMCACHE_HIT_TOKENS, MODEL_INVOCATIONS, MODEL_ERRORS, GPU_UTIL, GPU_FB_USED, GPU_FB_FREE, POD_RESTARTS,
    POD_READY,
)
"""Every metric we query, in one place. Tests check that queries use nothing else."""
