"""Fixed values of the endpoint manifests, each with its source.

Tunable values (model, image, TP size, max-model-len, GPU memory utilization, max-num-seqs, routing threshold
and strategy, PD buffer, autoscaling targets) live in :mod:`hyperpod_core.config` with the AWS-validated
Llama-3.3-70B / ml.p5.48xlarge defaults. What is here follows from the operator or the AWS reference
manifest and is not worth a setting.

Sources: [DPD] docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-dpd.html
(reference manifest, recommended environment, limitations); [CRD] the pinned operator v3.3 CRD;
[OBS] .../sagemaker-hyperpod-model-deployment-observability.html; [ROUTING]
.../sagemaker-hyperpod-model-deployment-caching-routing.html.
"""

from __future__ import annotations

from typing import Final

API_VERSION: Final = "inference.sagemaker.aws.amazon.com/v1"
"""The storage version; the only one with ``pdSpec`` [CRD]."""

MODEL_VOLUME_NAME: Final = "model-weights"
MODEL_MOUNT_ROOT: Final = "/opt/ml/model"
"""Volume name of the model weights, and the folder their mount path is under [DPD reference manifest; CRD default
mountPath]. The mount path itself is ``<root>/<model.name>/<revision>`` and is vLLM's ``--model``
(:func:`hyperpod_k8s.endpoint.props.model_path`): LMCache keys its cache on that value, so a bare root would give
every model and every staging of one the same keys."""

HEALTH_CHECK_PATH: Final = "/health"
"""ALB target-group health check: vLLM serves ``/health`` [DPD reference manifest]; the CRD default
``/ping`` is the SageMaker container contract, which vLLM does not implement."""

METRICS_PATH: Final = "/metrics"
"""vLLM and LMCache metrics. The port is the container port: the KV Cache dashboard appears only when
``metrics.modelMetrics.port`` equals it [OBS]."""

# Pod CPU and memory requests are not constants: the reference manifest's 96 CPU per 8 GPUs is every CPU of an
# ml.p5.48xlarge with ThreadsPerCore 1 and never fits. They come from the node: the workers of one node request
# at most 90 % of it, the rest covers the kubelet, DaemonSets, router and operator sidecars
# (hyperpod_core.config.spec.EndpointSpec.worker_requests; docs/cluster.md, "Worker requests come from the node").

GPU_RESOURCE: Final = "nvidia.com/gpu"

PYTHONHASHSEED: Final = "0"
"""Same hash seed in every pod so that LMCache/prefix-cache keys match across prefill and decode [DPD]."""
LMCACHE_SAVE_DECODE_CACHE: Final = "False"
"""The decoder does not store its own KV cache back to LMCache [DPD recommended environment]."""

POOL_NODE_LABEL: Final = "hyperpod-dpd/pool"
"""Node label the CDK side puts on instance groups with ``pool: prefill|decode`` (HyperPod instance group
``KubernetesConfig.Labels``). A role gets ``nodeSelector {POOL_NODE_LABEL: <role>}`` only when all of its
capacity is dedicated; with ``shared`` groups it has none and may land on any GPU node of the endpoint's
instance type."""

ROLE_LABEL: Final = "inference.sagemaker.aws.amazon.com/dpd-role"
"""Label the operator puts on prefill and decode pods [DPD]; used in docs, not set by us."""

MODE_LABEL: Final = "hyperpod-dpd/mode"
AZ_ID_ANNOTATION: Final = "hyperpod-dpd/availability-zone-id"

# --- autoscaling (KEDA through the operator) ------------------------------------------------------------
POLLING_INTERVAL_SECONDS: Final = 30
COOLDOWN_SECONDS: Final = 300
SCALE_UP_STABILIZATION_SECONDS: Final = 60
SCALE_DOWN_STABILIZATION_SECONDS: Final = 600
"""CRD defaults are 30 s polling, 300 s cooldown, 0 s up / 300 s down stabilization [CRD]. We wait 60 s
before scaling prefill up (a 70B replica takes minutes to load, so reacting to a 30 s burst only adds a
replica after the burst) and 600 s before scaling down, twice the default: a replica removed too early
sends its queue back to the survivors (N -> N-1 oscillation seen in Dynamo's planner, dpd-anchors E)."""

# The trigger queries themselves are hyperpod_core.telemetry.queries.prefill_queue / decode_kv_usage: the
# dashboards and alerts use the same definitions, so the three cannot disagree.
PREFILL_METRIC_TYPE: Final = "Average"
"""Prefill backlog: requests waiting in the prefill engines, averaged per replica by KEDA (``Average``)."""
DECODE_METRIC_TYPE: Final = "Value"
"""Decode pressure: KV-cache usage (0-1) of the fullest decoder (``Value``): decode is bound by KV memory,
not by a queue (llm-d and production-stack use the same signal at 0.8, dpd-anchors 1.1)."""

PROMETHEUS_MULTIPROC_DIR: Final = "/tmp"
"""Where vLLM's API server and LMCache (in the engine process) share their prometheus_client files, so that
LMCache series appear on vLLM's ``/metrics`` (LMCache docs, vllm_endpoint; shared/metrics/SOURCES.md). The
CRD gives the worker container no volume mounts besides the model (``worker`` has only
``modelVolumeMount``), so no emptyDir can be mounted; ``/tmp`` exists in every image, is writable and starts
empty with each container, which is the wiping vLLM asks for when the variable is set by the user."""
