"""Label names of the series as they are stored on HyperPod, written once.

Sources (``shared/metrics/SOURCES.md``, ``shared/reference/operator.md`` section d):

* vLLM and LMCache series reach Amazon Managed Prometheus through the HyperPod inference operator's metrics
  path (a per-pod collector), which labels every inference metric with ``pod_name`` and ``namespace`` and
  with ``metric_source`` (``model-container`` for the engine's ``/metrics``, ``reverse-proxy`` for the
  sidecar) [AWS, "Implementing inference observability on HyperPod clusters", Metric dimensions]. There is
  **no** ``pod`` label on these series.
* The exporters' own labels: vLLM 0.19.0 ``model_name``, ``engine`` (``finished_reason`` on
  ``vllm:request_success_total``); LMCache 0.4.3 ``model_name``, ``worker_id``, ``role``.
* DCGM exporter and kube-state-metrics series come through the observability add-on's collector, whose
  relabelling is not published. Both exporters write the pod name into a label of their own (dcgm-exporter's
  Kubernetes pod mapper and kube-state-metrics' pod metrics both call it ``pod``), and the collector keeps
  them: AWS's own dashboards for this add-on (aws/sagemaker-hyperpod-cluster-setup, ``eks/cloudformation/
  resources/grafana-lambda-function/lambda_function/dashboards/templates/tasks.json``, 2025-08) query
  ``DCGM_FI_DEV_GPU_UTIL{namespace=~..., pod=~...} * on(pod, namespace) group_left(...) kube_pod_info{...}``, a
  join that returns data only when ``pod``/``namespace`` hold the workload pod; none uses ``exported_pod``.
  So ``pod`` and ``namespace`` are the defaults; ``observability.collector_labels`` overrides them without a
  code change, should a later add-on version relabel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NAMESPACE: Final = "namespace"
POD_NAME: Final = "pod_name"
"""The pod label the HyperPod inference metrics path writes on vLLM, LMCache and sidecar series."""
METRIC_SOURCE: Final = "metric_source"
MODEL_CONTAINER: Final = "model-container"
REVERSE_PROXY: Final = "reverse-proxy"
FINISHED_REASON: Final = "finished_reason"
CONDITION: Final = "condition"
"""kube-state-metrics ``kube_pod_status_ready`` label: ``true``, ``false`` or ``unknown``."""
COMPONENT: Final = "component"
"""Label the endpoint-down alert sets: the part with no ready pod (``prefill``, ``decode``, ``worker``, ``router``)."""
WORKER_ID: Final = "worker_id"
"""LMCache's label for the TP rank: each rank runs its own engine and counts the same tokens."""
LE: Final = "le"
METHOD: Final = "method"
URI: Final = "uri"
STATUS: Final = "status"
"""The reverse-proxy sidecar's request labels: HTTP method, request path and response status. AWS's HyperPod
inference dashboard (aws/sagemaker-hyperpod-cluster-setup @ 6e045f8, ``eks/cloudformation/resources/
grafana-lambda-function/lambda_function/dashboards/templates/inference.json``) filters ``model_invocations_total``
and ``model_errors_total`` on ``method="POST", uri="/invocations"`` and splits errors by ``status``."""
INVOCATION_METHOD: Final = "POST"
NON_INFERENCE_URIS: Final = ("/ping", "/health.*", "/metrics", "/v1/models.*", "/version", "/is_sleeping",
                             "/tokenize", "/detokenize", "/sleep", "/wake_up")
"""Request paths (regular expressions, anchored by PromQL) through the sidecar that are no inference requests.
The inference requests are every other ``POST``: a client or the router may post to any inference path, not only
``/invocations`` or the endpoint's ``invocation_path`` (the production-stack router, which HyperPod's is based on,
posts both legs of a disaggregated request to the path the client used: vllm-project/production-stack @ a6c01db,
``src/vllm_router/services/request_service/request.py`` ``send_request_to_prefiller``/``send_request_to_decode``;
genai-bench posts to ``/v1/chat/completions`` whatever the endpoint declares), so the filter excludes instead of
listing. What it excludes: vLLM's SageMaker probe ``/ping``, which also takes ``POST`` (vllm-project/vllm
@ 09cb327, ``vllm/entrypoints/sagemaker/api_router.py``); the router's backend calls that are no inference:
``POST /tokenize`` (``routers/routing_logic.py``, the KV-aware routing's fallback), ``/detokenize``, ``/sleep`` and
``/wake_up`` (``routers/main_router.py``), and its ``GET``s of ``/v1/models`` (``service_discovery.py``), ``/metrics``
(``stats/engine_stats.py``), ``/health``, ``/version`` and ``/is_sleeping``, which ``method="POST"`` drops anyway."""

HYPERPOD_INFERENCE_LABELS: Final = frozenset({NAMESPACE, POD_NAME, METRIC_SOURCE})
"""Labels the HyperPod metrics path adds to every inference series (SOURCES.md) that our queries may use."""

KV_LOAD_FAILURE_REASONS: Final = ("abort", "error")
"""``finished_reason`` values of requests that did not finish normally; a failed KV load ends as ``error``,
a client disconnect or a cancelled transfer as ``abort`` (SOURCES.md; vLLM ``FinishReason``)."""

DEFAULT_POD_LABEL: Final = "pod"
DEFAULT_NAMESPACE_LABEL: Final = "namespace"


@dataclass(frozen=True, kw_only=True)
class CollectorLabels:
    """Pod-name label of the series that do not come through the inference metrics path."""

    dcgm_pod: str = DEFAULT_POD_LABEL
    """Pod label on DCGM exporter series. Default: ``pod`` (dcgm-exporter's Kubernetes pod mapping)."""
    dcgm_namespace: str = DEFAULT_NAMESPACE_LABEL
    """Namespace label on DCGM exporter series. Default: ``namespace`` (dcgm-exporter's pod mapping; a
    collector that does not honour the exporter's labels renames it ``exported_namespace``)."""
    kube_state_metrics_pod: str = DEFAULT_POD_LABEL
    """Pod label on kube-state-metrics series. Default: ``pod`` (kube-state-metrics pod metrics)."""
    kube_state_metrics_namespace: str = DEFAULT_NAMESPACE_LABEL
    """Namespace label on kube-state-metrics series. Default: ``namespace``."""
