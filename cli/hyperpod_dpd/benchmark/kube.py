"""The Kubernetes side of ``bench``, through the official ``kubernetes`` client.

* the endpoint: the DPD and the colocated ``InferenceEndpointConfig`` carry the same name, so switching is a
  *replace* (PUT) of the object with the other manifest (a merge patch would keep ``pdSpec``); ready when
  ``status.state`` is ``DeploymentComplete`` for the current generation (CRD status enum);
* the benchmark Jobs: created one at a time, unsuspended, waited for, their pod log read, then deleted;
* what serves a run: the endpoint's Deployments with their desired and ready replicas and the GPUs one pod
  requests (:meth:`Kube.serving`), read before and after every run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import GROUP as IEC_GROUP
from hyperpod_core.names import OPERATOR_NAMESPACE, ROUTER_CONTAINER, EndpointNames
from hyperpod_core.names import PLURAL as IEC_PLURAL
from hyperpod_core.names import VERSION as IEC_VERSION
from hyperpod_dpd.kube import REQUEST_TIMEOUT, kube_errors
from hyperpod_dpd.kube import Kube as DayTwoKube

#: vLLM's finished-request counter (shared/metrics/vllm-0.19.0.json), one series per ``finished_reason``.
FINISHED_REQUESTS = "vllm:request_success_total"
_SAMPLE = re.compile(r"^" + re.escape(FINISHED_REQUESTS) + r"(\{[^}]*\})?\s+([0-9.eE+-]+|NaN|\+Inf)\s*$")
#: The router's per-request routing decision (HyperPod DPD guide: "Conditional routing: estimated_tokens=...,
#: threshold=..., disaggregate=True|False").
DISAGGREGATE = re.compile(r"disaggregate=(True|False)")


def finished_requests(metrics_text: str) -> float:
    """Sum of ``vllm:request_success_total`` over its series in a Prometheus text exposition."""
    total = 0.0
    for line in metrics_text.splitlines():
        if m := _SAMPLE.match(line.strip()):
            total += float(m[2])
    return total


#: The GPU resource a worker container requests (NVIDIA device plugin).
GPU_RESOURCE = "nvidia.com/gpu"

#: When the operator reports no ``status.observedGeneration``, a state older than the last apply cannot be told
#: from a new one; wait this long after an apply before trusting it.
UNOBSERVED_GRACE_SECONDS = 60.0


class Kube:
    """The few calls ``bench`` makes; every API error becomes one :class:`CommandFailed` line."""

    def __init__(self, api: Any, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.day2 = DayTwoKube(api)  # the day-2 commands' pod selection (by the role Deployment's selector)
        self.sleep, self.clock = sleep, clock

    def _call(self, action: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn`` with the day-2 commands' request timeout; failures become one line (:func:`kube_errors`)."""
        with kube_errors(action):
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)

    def _get_or_none(self, fn: Callable[..., Any], *args: Any) -> Any:
        """:meth:`_call` for a read, with ``None`` for a 404."""
        from kubernetes.client.exceptions import ApiException

        with kube_errors(f"reading {'/'.join(str(a) for a in args[-2:])}"):
            try:
                return fn(*args, _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

    # --- plain objects ----------------------------------------------------------------------------------

    def apply_core(self, doc: dict[str, Any]) -> None:
        """Create or replace a ConfigMap or ServiceAccount."""
        kind, ns, name = doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"]
        read, create, replace = {
            "ConfigMap": (self.core.read_namespaced_config_map, self.core.create_namespaced_config_map,
                          self.core.replace_namespaced_config_map),
            "ServiceAccount": (self.core.read_namespaced_service_account,
                               self.core.create_namespaced_service_account,
                               self.core.replace_namespaced_service_account),
        }[kind]
        if self._get_or_none(read, name, ns) is None:
            self._call(f"creating {kind} {ns}/{name}", create, ns, doc)
        else:
            self._call(f"replacing {kind} {ns}/{name}", replace, name, ns, doc)

    # --- the endpoint -----------------------------------------------------------------------------------

    def endpoint(self, ns: str, name: str) -> dict[str, Any] | None:
        return self._get_or_none(self.custom.get_namespaced_custom_object, IEC_GROUP, IEC_VERSION, ns, IEC_PLURAL,
                                 name)

    def live_mode(self, ns: str, name: str) -> str | None:
        obj = self.endpoint(ns, name)
        if obj is None:
            return None
        if "pdSpec" in (obj.get("spec") or {}):
            return "dpd"
        return "colocated"

    def apply_endpoint(self, doc: dict[str, Any]) -> None:
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        live = self.endpoint(ns, name)
        if live is None:
            self._call(f"creating endpoint {ns}/{name}", self.custom.create_namespaced_custom_object, IEC_GROUP,
                       IEC_VERSION, ns, IEC_PLURAL, doc)
            return
        body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}}
        self._call(f"replacing endpoint {ns}/{name}", self.custom.replace_namespaced_custom_object, IEC_GROUP,
                   IEC_VERSION, ns, IEC_PLURAL, name, body)

    def wait_endpoint_ready(self, ns: str, name: str, timeout_s: float, poll_s: float,
                            on_wait: Callable[[str], None]) -> None:
        start = self.clock()
        deadline = start + timeout_s
        while True:
            obj = self.endpoint(ns, name) or {}
            status = obj.get("status") or {}
            state = status.get("state", "unknown")
            if "observedGeneration" in status:
                current = status["observedGeneration"] >= (obj.get("metadata") or {}).get("generation", 0)
            else:  # no generation to compare: trust the state once the operator had time to react
                current = self.clock() - start >= UNOBSERVED_GRACE_SECONDS
            if state == "DeploymentComplete" and current:
                return
            if state == "DeploymentFailed" and current:
                msg = ((status.get("conditions") or [{}])[0]).get("message", "")
                raise CommandFailed(f"endpoint {ns}/{name} DeploymentFailed: {msg}".rstrip(": "))
            if self.clock() > deadline:
                raise CommandFailed(f"endpoint {ns}/{name} not ready after {timeout_s:.0f} s (state {state})")
            on_wait(state)
            self.sleep(poll_s)

    def serving(self, ns: str, name: str, mode: str) -> dict[str, dict[str, int]]:
        """Per Deployment serving endpoint ``name``: ``replicas`` (desired), ``ready`` (``status.readyReplicas``)
        and ``gpus_per_pod`` (the ``nvidia.com/gpu`` limits of its pod template's containers).

        DPD: the operator's ``prefill-<name>`` and ``decode-<name>`` (their pods are ``<role>-<name>-<ReplicaSet
        hash>-<suffix>``, hyperpod_core.names: the Deployment name is that prefix, Kubernetes' Deployment ->
        ReplicaSet -> Pod naming [I: no AWS page names the Deployments]); colocated: the Deployment the endpoint's
        ``status.deploymentStatus.name`` names (CRD v3.3)."""
        if mode == "dpd":
            deployments = [f"{role}-{name}" for role in ("prefill", "decode")]
        else:
            status = (self.endpoint(ns, name) or {}).get("status") or {}
            named = (status.get("deploymentStatus") or {}).get("name")
            if not named:
                raise CommandFailed(f"endpoint {ns}/{name} names no Deployment (status.deploymentStatus.name)")
            deployments = [str(named)]
        out: dict[str, dict[str, int]] = {}
        for deployment in deployments:
            d = self._get_or_none(self.apps.read_namespaced_deployment, deployment, ns)
            if d is None:
                raise CommandFailed(f"Deployment {ns}/{deployment} not found")
            gpus = sum(int((c.resources.limits or {}).get(GPU_RESOURCE, 0)) if c.resources else 0
                       for c in d.spec.template.spec.containers)
            out[deployment] = {"replicas": int(d.spec.replicas or 0), "ready": int(d.status.ready_replicas or 0),
                               "gpus_per_pod": gpus}
        return out

    # --- jobs -------------------------------------------------------------------------------------------

    def job(self, ns: str, name: str) -> Any:
        return self._get_or_none(self.batch.read_namespaced_job, name, ns)

    def start_job(self, doc: dict[str, Any]) -> None:
        """Create the Job unsuspended; a leftover failed or finished Job of the same name is replaced."""
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        live = self.job(ns, name)
        if live is not None:
            if live.spec.suspend:
                self._call(f"starting Job {name}", self.batch.patch_namespaced_job, name, ns,
                           {"spec": {"suspend": False}})
                return
            if not (live.status.succeeded or live.status.failed):
                return  # still running from an interrupted bench: wait for it
            self.delete_job(ns, name)
        body = {**doc, "spec": {**doc["spec"], "suspend": False}}
        self._call(f"creating Job {name}", self.batch.create_namespaced_job, ns, body)

    def wait_job(self, ns: str, name: str, timeout_s: float, poll_s: float,
                 on_wait: Callable[[float], None]) -> bool:
        """True when the Job succeeded, False when it failed."""
        start = self.clock()
        while True:
            job = self.job(ns, name)
            if job is None:
                raise CommandFailed(f"Job {ns}/{name} disappeared while running")
            if job.status.succeeded:
                return True
            if job.status.failed:
                return False
            if self.clock() - start > timeout_s:
                raise CommandFailed(f"Job {ns}/{name} still running after {timeout_s:.0f} s")
            on_wait(self.clock() - start)
            self.sleep(poll_s)

    def job_log(self, ns: str, name: str) -> str:
        pods = self._call(f"listing pods of Job {name}", self.core.list_namespaced_pod, ns,
                          label_selector=f"job-name={name}")
        if not pods.items:
            raise CommandFailed(f"Job {ns}/{name} has no pod to read the results from")
        pod = sorted(pods.items, key=lambda p: p.metadata.name)[-1]
        # Raw bytes: with preloading, the client turns a non-JSON body into str(bytes), i.e. "b'...'".
        resp = self._call(f"reading the log of {pod.metadata.name}", self.core.read_namespaced_pod_log,
                          pod.metadata.name, ns, container="genai-bench", _preload_content=False)
        return bytes(resp.data).decode("utf-8", "replace")

    # --- did the requests take the DPD path? -------------------------------------------------------------

    def prefill_requests(self, ns: str, name: str, port: int) -> dict[str, float]:
        """Finished requests per prefill pod of endpoint ``name``: ``vllm:request_success_total`` from each pod's
        vLLM ``/metrics`` (container port ``port``) through the API server's pod proxy (``pods/proxy``)."""
        names = EndpointNames(name=name, namespace=ns)
        with kube_errors("listing the prefill pods"):
            pods = self.day2.role_pods(names, "prefill")
        out: dict[str, float] = {}
        for pod in (p.pod for p in pods):
            resp = self._call(f"reading the metrics of {pod}", self.core.connect_get_namespaced_pod_proxy_with_path,
                              f"{pod}:{port}", ns, "metrics", _preload_content=False)
            out[pod] = finished_requests(bytes(resp.data).decode("utf-8", "replace"))
        return out

    def router_decisions(self, ns: str, name: str, since_seconds: int) -> dict[str, int]:
        """``disaggregate=True`` / ``False`` lines the endpoint's router logged in the last ``since_seconds``."""
        prefix = f"{name}-{ns}-router-"
        pods = self._call("listing the router pods", self.core.list_namespaced_pod, OPERATOR_NAMESPACE)
        counts = {"True": 0, "False": 0}
        for pod in sorted(p.metadata.name for p in pods.items if p.metadata.name.startswith(prefix)):
            resp = self._call(f"reading the log of {pod}", self.core.read_namespaced_pod_log, pod, OPERATOR_NAMESPACE,
                              container=ROUTER_CONTAINER, since_seconds=max(1, since_seconds), _preload_content=False)
            for m in DISAGGREGATE.finditer(bytes(resp.data).decode("utf-8", "replace")):
                counts[m[1]] += 1
        return counts

    def delete_job(self, ns: str, name: str) -> None:
        from kubernetes import client

        self._call(f"deleting Job {name}", self.batch.delete_namespaced_job, name, ns,
                   body=client.V1DeleteOptions(propagation_policy="Background"))
