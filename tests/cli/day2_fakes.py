"""Test doubles for the day-2 commands: a local Kubernetes API server, an OpenAI-compatible streaming server,
and log lines in the real formats.

* The Kubernetes server answers the REST paths the official client calls (custom objects, pods, pod logs,
  Deployments, ReplicaSets, Ingresses, nodes) over real HTTP; the client reaches it through a kubeconfig, like a
  cluster. Its InferenceEndpointConfig objects are checked against the operator CRD (:func:`endpoint_object`).
  The operator's Deployments, ReplicaSets and pods carry the labels and annotations of :func:`role_deployment`,
  :func:`replica_set` and :func:`role_pod`, each with its source or an [I] where none is published.
* The OpenAI server streams real server-sent events with chunked transfer encoding, like vLLM's, and, playing
  the decoder, appends LMCache's line for the request to the decode pod's log.
* LMCache lines are rendered by :func:`lmcache_line` with LMCache 0.4.3's own log format string
  (``lmcache/logging.py`` ``build_format``) and message format strings (``lmcache/v1/cache_engine.py``,
  ``lmcache/v1/storage_backend/pd_backend.py``), from the ``lmcache==0.4.3`` wheel.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fake_http import QuietHandler, free_port, local_url, serving, write_kubeconfig

ROLE_LABEL = "inference.sagemaker.aws.amazon.com/dpd-role"
NAME, NAMESPACE = "llama-3-3-70b", "default"
#: Cluster names the test outputs file (day2_fixtures.config_file) reports: those the default config derives
#: from its name, since the command line refuses an outputs file of another deployment.
EKS_CLUSTER, HYPERPOD_CLUSTER = "hyperpod-dpd-eks", "hyperpod-dpd"  # derived from name (config/model.py)

# --- LMCache 0.4.3 log lines ---------------------------------------------------------------------------

#: ``lmcache/logging.py`` ``build_format(color)`` with the INFO colour (green) and WARNING colour (yellow).
_RESET, _ITALIC = "\x1b[0m", "\x1b[3m"
_COLOURS = {logging.INFO: "\x1b[32;20m", logging.WARNING: "\x1b[33;20m"}
#: ``lmcache/v1/cache_engine.py`` line 887, ``LMCacheEngine.retrieve``.
RETRIEVED_FMT = ("[req_id=%s] Retrieved %d out of %d required tokens (from %d total tokens). size: %.4f gb, "
                 "cost %.4f ms, throughput: %.4f GB/s;")
#: ``lmcache/v1/storage_backend/pd_backend.py`` line 540.
ALLOC_FAILED_MSG = "Failed to allocate memory object, retrying..."


def lmcache_line(level: int, msg: str, args: tuple[Any, ...], *, filename: str, lineno: int, logger: str,
                 when: float | None = None) -> str:
    fmt = (f"{_COLOURS[level]}[%(asctime)s] LMCache %(levelname)s:{_RESET} %(message)s "
           f"{_ITALIC}(%(filename)s:%(lineno)d:%(name)s){_RESET}")
    record = logging.LogRecord(logger, level, f"/usr/lib/python3/{filename}", lineno, msg, args, None)
    record.filename = filename
    if when is not None:
        record.created = when
        record.msecs = (when % 1) * 1000
    return logging.Formatter(fmt).format(record)


def retrieved_line(req_id: str, retrieved: int, required: int, total: int, gbps: float,
                   when: float | None = None) -> str:
    size_bytes = retrieved * 320 * 1024  # Llama 3 70B: 80 layers x 2 x 8 KV heads x 128 x bf16 = 320 KiB/token
    cost_s = size_bytes / (gbps * 1024**3) if gbps > 0 else 0.0
    return lmcache_line(logging.INFO, RETRIEVED_FMT,
                        (req_id, retrieved, required, total, size_bytes / 1024**3, cost_s * 1000, gbps),
                        filename="cache_engine.py", lineno=887, logger="lmcache.v1.cache_engine", when=when)


def alloc_failed_line(when: float | None = None) -> str:
    return lmcache_line(logging.WARNING, ALLOC_FAILED_MSG, (), filename="pd_backend.py", lineno=540,
                        logger="lmcache.v1.storage_backend.pd_backend", when=when)


# --- worker start-up lines (vLLM 0.19.0, LMCache 0.4.3, NIXL 1.0.0 wheels) -------------------------------


def worker_line(rank: int | None, line: str, pid: int = 4200) -> str:
    """A line as a vLLM worker process prints it: ``vllm/utils/system_utils.py:204`` ``f"({worker_name} pid={pid}) "``,
    the process named ``Worker_TP<rank>`` under tensor parallelism (``vllm/v1/executor/multiproc_executor.py:986``)."""
    name = "Worker" if rank is None else f"Worker_TP{rank}"
    return f"({name} pid={pid + (rank or 0)}) {line}"


def lmcache_config_line(*, pd_role: str | None, nixl_backends: list[str] | None, enable_pd: bool = True,
                        buffer_device: str = "cuda", when: float | None = None) -> str:
    """``lmcache/v1/config.py:611``: ``logger.info(f"LMCache Configuration: {config_dict}")``, the dict of every key
    of ``_CONFIG_DEFINITIONS`` in its order (a stretch of them here, with the wheel's defaults), the two sizes
    formatted ``f"{value} GB"`` (``config.py:607``)."""
    config: dict[str, Any] = {
        "chunk_size": 256, "local_cpu": True, "max_local_cpu_size": "5.0 GB", "reserve_local_cpu_size": 0.0,
        "local_disk": None, "max_local_disk_size": "0.0 GB", "remote_url": None, "remote_serde": "naive",
        "use_layerwise": False, "save_decode_cache": False, "enable_p2p": False, "enable_controller": False,
        "enable_pd": enable_pd, "pd_role": pd_role, "pd_buffer_size": 8589934592, "pd_buffer_device": buffer_device,
        "pd_peer_host": "10.1.20.7", "pd_peer_init_port": [7300], "pd_peer_alloc_port": [7400],
        "pd_proxy_host": "10.1.20.8", "pd_proxy_port": 7500, "transfer_channel": "nixl",
        "nixl_backends": nixl_backends, "nixl_buffer_size": None, "nixl_buffer_device": None, "gds_path": None,
        "extra_config": None, "save_unfull_chunk": True, "blocking_timeout_secs": 10,
    }
    return lmcache_line(logging.INFO, f"LMCache Configuration: {config}", (), filename="config.py", lineno=611,
                        logger="lmcache.v1.config", when=when)


def stored_line(req_id: str, stored: int, total: int, gbps: float) -> str:
    """``lmcache/v1/cache_engine.py:553``: the sender's line after a store."""
    size_gb = stored * 320 * 1024 / 1024**3
    return lmcache_line(logging.INFO, "[req_id=%s] Stored %d out of total %d tokens. size: %.4f GB, cost %.4f ms, "
                        "throughput: %.4f GB/s; offload_time: %.4f ms, put_time: %.4f ms",
                        (req_id, stored, total, size_gb, size_gb / gbps * 1000, gbps, 1.0, 2.0),
                        filename="cache_engine.py", lineno=552, logger="lmcache.v1.cache_engine")


def connector_line(name: str = "LMCacheConnectorV1") -> str:
    """``vllm/distributed/kv_transfer/kv_connector/factory.py:65`` in vLLM's format (``vllm/logger.py:22``:
    ``%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s``, date ``%m-%d %H:%M:%S``)."""
    return f"INFO 12-01 00:00:00 [factory.py:64] Creating v1 connector with name: {name} and engine_id: 3f2a"


def nixl_missing_plugin_line(backend: str) -> str:
    """``nixl_cu12/_api.py:222`` in NIXL's format (``nixl_cu12/logging.py:44``)."""
    return (f"2026-12-01 00:00:00 NIXL WARNING _api.py:221 Skipping backend registration {backend} due to the "
            "missing plugin.")


def worker_startup(role: str, *, tp: int = 8, nixl_backends: tuple[str, ...] | None = ("LIBFABRIC",),
                   pd_role: str | None = None, enable_pd: bool = True) -> list[str]:
    """What each rank of a DPD worker logs at start-up: the connector, then its LMCache set-up."""
    role_name = pd_role or {"prefill": "sender", "decode": "receiver"}[role]
    backends = list(nixl_backends) if nixl_backends is not None else None
    lines = []
    for rank in range(tp):
        lines.append(worker_line(rank, connector_line()))
        lines.append(worker_line(rank, lmcache_config_line(pd_role=role_name, nixl_backends=backends,
                                                           enable_pd=enable_pd)))
    return lines


# --- Kubernetes objects ----------------------------------------------------------------------------------


#: The worker image, ``worker.args`` and role args of the test endpoint (those of the default config's manifest,
#: ``tests/k8s/snapshots/default/llama-3-3-70b-dpd.k8s.yaml``, shortened), its weights staged as revision
#: :data:`REVISION`: mounted at ``/opt/ml/model/<model.name>/<revision>`` (vLLM's ``--model``), read from the
#: revision's own prefix, served as ``model.name``.
IMAGE = "lmcache/vllm-openai:v0.4.3"
SERVED_NAME = "llama-3-3-70b-instruct"
REVISION = "sha256-1f6441a8da688874"
MODEL_PATH = f"/opt/ml/model/{SERVED_NAME}/{REVISION}"
MODEL_LOCATION = f"models/Llama-3.3-70B-Instruct/{REVISION}"
WORKER_ARGS = ("--model", MODEL_PATH, "--served-model-name", SERVED_NAME, "--host", "0.0.0.0", "--port", "8000",
               "--tensor-parallel-size", "8")
ROLE_ARGS = {"prefill": ("--max-num-seqs", "16", "--enforce-eager"), "decode": ("--max-num-seqs", "32")}
#: The pod-template-hash and pod suffix of each role's first pod (the pod names the tests have always used).
FIRST_POD = {"prefill": ("7d9f8", "abcde"), "decode": ("5c6b7", "fghij")}


def endpoint_object(state: str = "DeploymentComplete", *, tls: bool = True,
                    conditions: list[dict[str, Any]] | None = None,
                    image_cache: dict[str, Any] | None = None, weights_cache: bool = True,
                    name: str = NAME, model_location: str = MODEL_LOCATION + "/") -> dict[str, Any]:
    """An InferenceEndpointConfig as the operator reports it (status fields of the v1 CRD schema, v3.3:
    ``spec.modelCacheConfig`` as the manifests set it, ``status.imageCacheStatus`` Ready on both nodes unless
    ``image_cache`` says otherwise)."""
    status: dict[str, Any] = {
        "state": state,
        "conditions": conditions if conditions is not None else [{
            "type": "DeploymentReady", "status": "True" if state == "DeploymentComplete" else "False",
            "reason": "Ready" if state == "DeploymentComplete" else "InProgress",
            # The message AWS's DPD guide shows for a ready DPD endpoint (operator.md, "(b) Status").
            "message": "DPD prefill and decode deployments are ready" if state == "DeploymentComplete"
            else "waiting for pods", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
        "deploymentStatus": {"name": name, "lastUpdated": "2026-12-01T00:00:00Z",
                             "status": {"replicas": 1, "readyReplicas": 1 if state == "DeploymentComplete" else 0}},
        "metricsStatus": {"enabled": True, "state": "Enabled"},
        "observedGeneration": 1, "replicas": 1,
        "imageCacheStatus": image_cache if image_cache is not None else {
            "state": "Ready", "readyNodes": 2, "targetNodes": 2, "message": "image cached on all target nodes"},
    }
    if tls:
        status["tlsCertificate"] = {
            "tlsCertificateOutputS3Bucket": "hyperpod-tls-test", "tlsCertificateS3Keys": [f"{NAMESPACE}/{name}.pem"],
            "certificateHealth": "Valid", "certificateName": f"{name}-cert", "issuerName": f"{name}-issuer",
            "certificateDomainNames": ["localhost"]}
    return {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "modelName": "llama-3-3-70b-instruct", "instanceType": "ml.p5.48xlarge",
            "invocationEndpoint": "v1/chat/completions",
            "modelSourceConfig": {"modelSourceType": "s3", "modelLocation": model_location,
                                  "s3Storage": {"bucketName": "model-bucket", "region": "us-west-2"}},
            "worker": {"image": IMAGE, "args": list(WORKER_ARGS), "modelInvocationPort": {"containerPort": 8000},
                       "modelVolumeMount": {"name": "model-weights", "mountPath": MODEL_PATH}, "resources": {}},
            "pdSpec": {"prefillSpec": {"replicas": 1, "args": list(ROLE_ARGS["prefill"])},
                       "decodingSpec": {"replicas": 1, "args": list(ROLE_ARGS["decode"])}, "routingThreshold": 4096},
            "modelCacheConfig": {"imageCache": {"enabled": True},
                                 "weightsCache": {"enabled": weights_cache, "hostPath": "/opt/dlami/nvme"}},
            "loadBalancer": {"healthCheckPath": "/health", "idleTimeoutSeconds": 1641},
        },
        "status": status,
    }


#: HyperPod's taint on a node whose deep health checks run (HyperPod EKS prerequisites).
HEALTH_CHECK_TAINT = {"key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable",
                      "effect": "NoSchedule"}


def node(name: str, pool: str, *, ready: bool = True, health_checks: bool = False) -> dict[str, Any]:
    """A HyperPod GPU node as the API lists it (labels as our instance groups set them)."""
    taints = ([HEALTH_CHECK_TAINT] if health_checks else []) + (
        [] if ready else [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"hyperpod-dpd/pool": pool,
                                                  "node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
            "spec": {"taints": taints} if taints else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def weights_cache_object(state: str = "Ready", *, ready: int = 2, target: int = 2, message: str | None = None,
                         owner: str = NAME, owned: bool = True,
                         model_location: str = MODEL_LOCATION) -> dict[str, Any]:
    """A ModelWeightsCacheConfig as the operator creates it for the endpoint's ``weightsCache`` (v3.3 CRD: spec
    requires ``modelSourceConfig``; status ``state``, ``readyNodes``, ``targetNodes``, ``message``). The owner
    reference to the InferenceEndpointConfig is how ``status`` finds it [I]; without one (``owned=False``), the
    model source it caches."""
    status: dict[str, Any] = {"state": state, "readyNodes": ready, "targetNodes": target}
    if message:
        status["message"] = message
    owners = [{"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
               "name": owner, "uid": "0b8c3f2e-1111-4a2b-9c3d-000000000001"}] if owned else []
    return {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "ModelWeightsCacheConfig",
        "metadata": {"name": f"{owner}-weights-cache", "namespace": NAMESPACE, "ownerReferences": owners},
        "spec": {"enabled": True, "hostPath": "/opt/dlami/nvme",
                 "modelSourceConfig": {"modelSourceType": "s3", "modelLocation": model_location,
                                       "s3Storage": {"bucketName": "model-bucket", "region": "us-west-2"}}},
        "status": status,
    }


def pod(name: str, namespace: str, labels: dict[str, str], *, ready: bool = True) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


# The operator's objects for one DPD role. Published: the role label (S2, S13 of shared/reference/operator.md),
# "pdSpec creates separate prefill and decode Deployments" (S2), pods ``<role>-<iec>-XXXX`` (S2, S13), the vLLM
# container ``<role>-<iec>`` (S3), role ``args`` "appended after worker.args" (CRD pdSpec). Kubernetes's own
# (docs "Deployments"; deployment_util.go ``RevisionAnnotation``): ReplicaSets ``<deployment>-<pod-template-hash>``
# owned by the Deployment, the ``pod-template-hash`` label on ReplicaSet and pods, ``deployment.kubernetes.io/
# revision`` on Deployment and ReplicaSets. [I]: the Deployment's name ``<role>-<iec>``, its selector (the role
# label and ``app=<iec>``, the label the HyperPod SDK lists an endpoint's pods by: S1 ``hp_endpoint.py``), the
# container's ``args`` being worker.args then the role's, and the names of the two sidecars (S2: "vLLM, Nginx
# reverse proxy, OpenTelemetry collector").

REVISION = "deployment.kubernetes.io/revision"


def role_labels(name: str, role: str) -> dict[str, str]:
    """The role Deployment's selector [I] (the comment above)."""
    return {"app": name, ROLE_LABEL: role}


def _uid(*parts: str) -> str:
    return "uid-" + "-".join(parts)


def role_deployment(name: str, role: str, *, revision: int = 1, namespace: str = NAMESPACE) -> dict[str, Any]:
    deployment = f"{role}-{name}"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": deployment, "namespace": namespace, "uid": _uid(namespace, deployment),
                         "annotations": {REVISION: str(revision)}},
            "spec": {"replicas": 1, "selector": {"matchLabels": role_labels(name, role)},
                     "template": {"metadata": {"labels": role_labels(name, role)}, "spec": {"containers": [
                         {"name": f"{role}-{name}", "image": IMAGE}]}}}}


def replica_set(name: str, role: str, template_hash: str, *, revision: int = 1,
                namespace: str = NAMESPACE) -> dict[str, Any]:
    deployment = f"{role}-{name}"
    labels = role_labels(name, role) | {"pod-template-hash": template_hash}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{deployment}-{template_hash}", "namespace": namespace, "labels": labels,
                         "uid": _uid(namespace, f"{deployment}-{template_hash}"),
                         "annotations": {REVISION: str(revision)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment,
                                              "uid": _uid(namespace, deployment), "controller": True}]},
            "spec": {"selector": {"matchLabels": labels}}}


def role_pod(name: str, role: str, template_hash: str, suffix: str, *, ready: bool = True, image: str = IMAGE,
             model: str = MODEL_PATH, terminating: bool = False, namespace: str = NAMESPACE,
             scheduled: bool = True) -> dict[str, Any]:
    """A role pod of the ReplicaSet ``<role>-<name>-<template_hash>``: its vLLM container runs ``image`` with
    ``--model model`` (worker.args, then the role's) on the 8 GPUs of TP 8 (``nvidia.com/gpu`` limits, as the DPD
    manifest's role ``resources`` set them), on the role's node (``spec.nodeName``) unless not ``scheduled``."""
    rs = f"{role}-{name}-{template_hash}"
    args = [model if i and WORKER_ARGS[i - 1] == "--model" else a for i, a in enumerate(WORKER_ARGS)]
    obj = pod(f"{rs}-{suffix}", namespace, role_labels(name, role) | {"pod-template-hash": template_hash},
              ready=ready)
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                           "uid": _uid(namespace, rs), "controller": True}]
    if terminating:
        obj["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    obj["spec"] = {"containers": [
        {"name": "reverse-proxy", "image": "nginx"},  # [I] the sidecars' names and images
        {"name": f"{role}-{name}", "image": image, "args": args + list(ROLE_ARGS[role]),
         "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}},
        {"name": "otel-collector", "image": "otel/opentelemetry-collector"}]}
    if scheduled:
        obj["spec"]["nodeName"] = f"hyperpod-i-0{role}"
    else:
        obj["status"]["phase"] = "Pending"
    return obj


@dataclass
class FakeCluster:
    """What the fake API server serves."""

    endpoints: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    deployments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    replica_sets: list[dict[str, Any]] = field(default_factory=list)
    ingresses: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    weights_caches: list[dict[str, Any]] = field(default_factory=list)
    """ModelWeightsCacheConfig objects (operator v3.3); ``weights_cache_crd=False``: the CRD is not installed."""
    weights_cache_crd: bool = True
    endpoint_list_forbidden: bool = False
    """Listing InferenceEndpointConfigs across namespaces is forbidden to the caller (RBAC: 403)."""
    logs: dict[tuple[str, str, str], list[tuple[float, str]]] = field(default_factory=dict)
    """``(namespace, pod, container) -> [(unix time, line)]``."""
    previous_logs: dict[tuple[str, str, str], list[tuple[float, str]]] = field(default_factory=dict)
    """The same for each container's previous instance (``previous=true``)."""
    requests: list[str] = field(default_factory=list)
    forbidden_logs: set[str] = field(default_factory=set)
    """Pods whose log the caller may not read (``pods/log`` forbidden by RBAC: 403)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, namespace: str, pod_name: str, container: str, line: str, when: float | None = None) -> None:
        with self.lock:
            self.logs.setdefault((namespace, pod_name, container), []).append((when or time.time(), line))

    def dpd_endpoint(self, state: str = "DeploymentComplete", *, ready: bool = True, name: str = NAME,
                     model_location: str = MODEL_LOCATION + "/") -> None:
        """The objects the operator creates for a DPD endpoint (names: operator.md, section (e)), each role at
        revision 1 with one pod (:data:`FIRST_POD`)."""
        self.endpoints[(NAMESPACE, name)] = endpoint_object(state, name=name, model_location=model_location)
        self.weights_caches.append(weights_cache_object(owner=name, model_location=model_location.rstrip("/")))
        for role in ("prefill", "decode"):
            template_hash, suffix = FIRST_POD[role]
            self.deployments[(NAMESPACE, f"{role}-{name}")] = role_deployment(name, role)
            self.replica_sets.append(replica_set(name, role, template_hash))
            self.pods.append(role_pod(name, role, template_hash, suffix, ready=ready))
        router = f"{name}-{NAMESPACE}-router"  # [I] the router Deployment's name and selector
        self.deployments[("hyperpod-inference-system", router)] = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": router, "namespace": "hyperpod-inference-system"},
            "spec": {"selector": {"matchLabels": {"app": router}},
                     "template": {"metadata": {"labels": {"app": router}}, "spec": {"containers": []}}}}
        self.pods.append(pod(f"{router}-6f7d8-klmno", "hyperpod-inference-system",
                             {"app": router, "pod-template-hash": "6f7d8"}, ready=ready))
        if any(p["metadata"]["name"] == "decode-another-endpoint-1-y" for p in self.pods):
            return  # the objects every endpoint shares are there already
        self.pods += [
            pod(f"other-{NAMESPACE}-router-1-x", "hyperpod-inference-system", {"app": f"other-{NAMESPACE}-router"}),
            pod("decode-another-endpoint-1-y", NAMESPACE, {"app": "another-endpoint", ROLE_LABEL: "decode"}),
            pod("hyperpod-inference-controller-manager-6d-abc", "hyperpod-inference-system",
                {"control-plane": "hyperpod-inference-controller-manager"}),
        ]
        self.deployments[("hyperpod-inference-system", "hyperpod-inference-controller-manager")] = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "hyperpod-inference-controller-manager", "namespace": "hyperpod-inference-system"},
            "spec": {"selector": {"matchLabels": {"control-plane": "hyperpod-inference-controller-manager"}},
                     "template": {"metadata": {}, "spec": {"containers": []}}}}

    def roll(self, role: str, template_hash: str, revision: int, *, name: str = NAME, image: str = IMAGE,
             model: str = MODEL_PATH, ready: bool = True, finished: bool = True) -> str:
        """A rollout of one role to a new pod template, as the Deployment controller makes it: a new ReplicaSet
        at ``revision``, the Deployment's revision annotation raised to it, a new pod; ``finished`` removes the old
        pods (else they keep serving beside the new one). Returns the new pod's name."""
        self.deployments[(NAMESPACE, f"{role}-{name}")]["metadata"]["annotations"][REVISION] = str(revision)
        self.replica_sets.append(replica_set(name, role, template_hash, revision=revision))
        if finished:
            self.pods = [p for p in self.pods if not _matches(p["metadata"].get("labels", {}),
                                                              ",".join(f"{k}={v}" for k, v in
                                                                       role_labels(name, role).items()))]
        new = role_pod(name, role, template_hash, "n3w0p", ready=ready, image=image, model=model)
        self.pods.append(new)
        return str(new["metadata"]["name"])

    def gpu_nodes(self) -> None:
        """One schedulable node per pool of config/default.yaml (HyperPod's ``hyperpod-i-<instance>`` names)."""
        self.nodes += [node("hyperpod-i-0prefill", "prefill"), node("hyperpod-i-0decode", "decode")]

    def alb(self, hostname: str, *, name: str = f"alb-{NAME}-{NAMESPACE}",
            namespace: str = "hyperpod-inference-system") -> None:
        """The operator's Ingress and its ALB hostname (name and namespace: ``endpoint_names`` docstring)."""
        self.ingresses.append({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"loadBalancer": {"ingress": [{"hostname": hostname}]}}})


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        key, equals, value = term.partition("=")
        if (labels.get(key) != value) if equals else (key not in labels):  # "key": the label exists
            return False
    return True


class _KubeHandler(QuietHandler):
    protocol_version = "HTTP/1.1"
    cluster: FakeCluster

    def _not_found(self) -> None:
        self.send_kube_status(404, "NotFound", "not found")

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        p = url.path.strip("/").split("/")
        c = self.cluster
        c.requests.append(self.path)
        if p == ["apis", "inference.sagemaker.aws.amazon.com", "v1", "inferenceendpointconfigs"]:  # all namespaces
            if c.endpoint_list_forbidden:
                return self.send_kube_status(403, "Forbidden", 'inferenceendpointconfigs.inference.sagemaker.aws.'
                                             'amazon.com is forbidden: User "alice" cannot list resource '
                                             '"inferenceendpointconfigs" at the cluster scope')
            return self.send_body(200, {"kind": "InferenceEndpointConfigList",
                                        "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "metadata": {},
                                        "items": list(c.endpoints.values())})
        if p[:3] == ["apis", "inference.sagemaker.aws.amazon.com", "v1"] and len(p) == 7:
            obj = c.endpoints.get((p[4], p[6]))
            return self.send_body(200, obj) if obj else self._not_found()
        if p[:3] == ["apis", "inference.sagemaker.aws.amazon.com", "v1"] and p[5:] == ["modelweightscacheconfigs"]:
            if not c.weights_cache_crd:
                return self._not_found()
            items = [x for x in c.weights_caches if x["metadata"]["namespace"] == p[4]]
            return self.send_body(200, {"kind": "ModelWeightsCacheConfigList",
                                        "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "metadata": {},
                                        "items": items})
        if p[:2] == ["api", "v1"] and len(p) == 5 and p[4] == "pods":
            items = [x for x in c.pods if x["metadata"]["namespace"] == p[3]
                     and _matches(x["metadata"].get("labels", {}), q.get("labelSelector", ""))]
            return self.send_body(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        if p == ["api", "v1", "nodes"]:
            items = [x for x in c.nodes if _matches(x["metadata"].get("labels", {}), q.get("labelSelector", ""))]
            return self.send_body(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
        if p[:2] == ["api", "v1"] and len(p) == 7 and p[6] == "log":
            return self._log(p[3], p[5], q)
        if p[:3] == ["apis", "apps", "v1"] and len(p) == 7:
            obj = c.deployments.get((p[4], p[6]))
            return self.send_body(200, obj) if obj else self._not_found()
        if p[:3] == ["apis", "apps", "v1"] and p[5:] == ["replicasets"]:
            items = [x for x in c.replica_sets if x["metadata"]["namespace"] == p[4]
                     and _matches(x["metadata"].get("labels", {}), q.get("labelSelector", ""))]
            return self.send_body(200, {"kind": "ReplicaSetList", "apiVersion": "apps/v1", "metadata": {},
                                        "items": items})
        if p[:3] == ["apis", "networking.k8s.io", "v1"] and len(p) == 6:
            items = [x for x in c.ingresses if x["metadata"]["namespace"] == p[4]]
            return self.send_body(200, {"kind": "IngressList", "apiVersion": "networking.k8s.io/v1", "metadata": {},
                                    "items": items})
        if p[:3] == ["apis", "networking.k8s.io", "v1"] and len(p) == 7:
            found = [x for x in c.ingresses if (x["metadata"]["namespace"], x["metadata"]["name"]) == (p[4], p[6])]
            return self.send_body(200, found[0]) if found else self._not_found()
        return self._not_found()

    def _log(self, namespace: str, pod_name: str, q: dict[str, str]) -> None:
        c = self.cluster
        if not any(x["metadata"]["name"] == pod_name for x in c.pods):
            return self._not_found()
        if pod_name in c.forbidden_logs:
            return self.send_kube_status(403, "Forbidden", f'pods "{pod_name}" is forbidden: User "alice" cannot get '
                                                           f'resource "pods/log" in API group "" in the namespace '
                                                           f'"{namespace}"')
        with c.lock:
            kept = c.previous_logs if q.get("previous", "").lower() == "true" else c.logs
            entries = list(kept.get((namespace, pod_name, q.get("container", "")), []))
        if "sinceSeconds" in q:
            entries = [e for e in entries if e[0] >= time.time() - int(q["sinceSeconds"])]
        if "tailLines" in q:
            entries = entries[-int(q["tailLines"]):] if int(q["tailLines"]) else []
        stamp = q.get("timestamps", "").lower() == "true"  # the client sends "True"; Go ParseBool takes both
        lines = [(f"{_rfc3339(ts)} {line}" if stamp else line) + "\n" for ts, line in entries]
        if "limitBytes" in q:  # the API server stops after the log's first limitBytes bytes
            head = "".join(lines).encode()[:int(q["limitBytes"])]
            lines = [head.decode(errors="ignore")] if head else []
        self.start_chunked("text/plain")
        for line in lines:  # one chunk per line, as a following log stream arrives
            self.chunk(line)
        self.end_chunks()


@contextmanager
def kube_server(cluster: FakeCluster, kubeconfig: Path) -> Iterator[str]:
    """Serve ``cluster`` on 127.0.0.1 and write a kubeconfig pointing at it; yields the server URL."""
    handler = type("Handler", (_KubeHandler,), {"cluster": cluster})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        write_kubeconfig(kubeconfig, local_url(server))
        yield local_url(server)


# --- OpenAI-compatible streaming server --------------------------------------------------------------------


@dataclass
class DecoderBehaviour:
    """How the fake decoder logs the KV transfer of a disaggregated request."""

    threshold_chars: int = 4096 * 4
    """Prompts at least this long are 'disaggregated' (the router's estimate, chars / 4)."""
    retrieved_fraction: float = 1.0
    gbps: float = 24.0
    alloc_failures: int = 0
    transfer_short: bool = False
    log_transfer: bool = True
    status: int = 200
    req_id_suffix: str = ""
    """Appended to the response id in LMCache's ``req_id`` (an engine-internal id that differs)."""
    clock_skew_seconds: float = 0.0
    """Added to the decode log's timestamps (the node's clock against the test's)."""
    router_logs: bool = True
    word_delay_seconds: float = 0.002
    """Between two streamed words (a slow decoder makes a long request)."""
    words: tuple[str, ...] = ("Disaggregated", " prefill", " splits", " prompt", " processing", " from",
                              " token", " generation", ".")


class _OpenAiHandler(QuietHandler):
    protocol_version = "HTTP/1.1"
    cluster: FakeCluster
    behaviour: DecoderBehaviour
    decode: tuple[str, str, str]
    router: str = f"{NAME}-{NAMESPACE}-router-6f7d8-klmno"

    def do_POST(self) -> None:
        body = self.read_json()
        b = self.behaviour
        if b.status != 200:
            self.send_body(b.status, {"error": "Service Unavailable"})
            return
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        req_id = f"chatcmpl-{abs(hash(prompt)) % 10**12:012d}"
        tokens = max(1, len(prompt) // 4)
        disaggregate = len(prompt) >= b.threshold_chars
        if b.router_logs:  # the DPD guide's router line (operator.md, "Router logs")
            self.cluster.log("hyperpod-inference-system", self.router, "router-container",
                             f"[INFO] Conditional routing: estimated_tokens={tokens}, "
                             f"threshold={b.threshold_chars // 4}, disaggregate={disaggregate}")
        if b.log_transfer and (disaggregate or b.transfer_short):
            when = time.time() + b.clock_skew_seconds
            for _ in range(b.alloc_failures):
                self.cluster.log(*self.decode, alloc_failed_line(when), when)
            retrieved = int(tokens * b.retrieved_fraction)
            self.cluster.log(*self.decode, retrieved_line(req_id + b.req_id_suffix, retrieved, tokens, tokens + 1,
                                                          b.gbps, when), when)
        self.start_chunked("text/event-stream")
        words = list(b.words)[: body.get("max_tokens", 16)]
        for i, word in enumerate(words):
            event = {"id": req_id, "object": "chat.completion.chunk", "model": body["model"],
                     "choices": [{"index": 0, "delta": {"content": word},
                                  "finish_reason": "stop" if i == len(words) - 1 else None}]}
            self.event(event)
            time.sleep(b.word_delay_seconds)
        usage = {"id": req_id, "object": "chat.completion.chunk", "model": body["model"], "choices": [],
                 "usage": {"prompt_tokens": tokens, "completion_tokens": len(words),
                           "total_tokens": tokens + len(words)}}
        self.event(usage)
        self.chunk("data: [DONE]\n\n")
        self.end_chunks()


@contextmanager
def openai_server(cluster: FakeCluster, behaviour: DecoderBehaviour, *, name: str = NAME) -> Iterator[str]:
    """A streaming chat-completions server of endpoint ``name``; yields its ``/v1/chat/completions`` URL."""
    decode = (NAMESPACE, f"decode-{name}-5c6b7-fghij", f"decode-{name}")
    handler = type("Handler", (_OpenAiHandler,), {"cluster": cluster, "behaviour": behaviour, "decode": decode,
                                                  "router": f"{name}-{NAMESPACE}-router-6f7d8-klmno"})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"{local_url(server)}/v1/chat/completions"


def deployed_at(config_file: Path, api_server: str) -> None:
    """Record ``api_server`` as the EKS cluster's API endpoint in the config's outputs file (``EksApiEndpoint``,
    as ``cdk deploy`` writes it): the Kubernetes commands talk to that server only."""
    outputs = config_file.with_suffix(".out") / "cdk-outputs.json"
    data = json.loads(outputs.read_text())
    data["hyperpod-dpd-cluster"]["EksApiEndpoint"] = api_server
    outputs.write_text(json.dumps(data))


def server_of(kubeconfig: Path) -> str:
    """The API server URL of a kubeconfig written by :func:`fake_http.write_kubeconfig`."""
    return str(json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def dead_kubeconfig(path: Path) -> Path:
    """A kubeconfig whose API server address has nothing listening."""
    return write_kubeconfig(path, f"http://127.0.0.1:{free_port()}", name="dead", token="x")


def one_line_error(result: Any) -> str:
    """The single stderr line of a failed command (and proof that there was no traceback)."""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: ") and "Traceback" not in result.err
    return lines[0]


def rolled_out(workdir: Path, *, endpoint: str = NAME, namespace: str = NAMESPACE, number: int = 1,
               operation: dict[str, Any] | None = None) -> str:
    """What ``hyperpod-dpd rollout`` leaves in the environment folder ``workdir`` after a blue/green to revision
    ``number``: its revision store (:mod:`hyperpod_dpd.rollout.store`) naming ``<endpoint>-r<number>`` as the
    revision that serves, the endpoint's own InferenceEndpointConfig as the previous one; ``operation``: the rollout
    still under way (the store's JSON shape). Returns the serving revision's name."""
    from hyperpod_dpd.rollout.store import Operation, Record, Revision, RevisionStore

    name = f"{endpoint}-r{number}"
    RevisionStore.of(workdir, endpoint).write(Record(
        endpoint=endpoint, namespace=namespace, last=number,
        current=Revision(number=number, name=name, manifest={}), previous=Revision(number=0, name=endpoint,
                                                                                   manifest={}),
        operation=Operation.from_json(operation)))
    return name
