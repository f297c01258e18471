"""A local fake Kubernetes API server for ``bench``: just the REST paths the official client calls.

Paths and verbs are those of the Kubernetes API (core/v1 configmaps, serviceaccounts, pods, pods/log;
batch/v1 jobs; the operator's ``inferenceendpointconfigs`` custom resource). Behaviour modelled:

* ``InferenceEndpointConfig``: create sets ``generation`` 1; replace (PUT) needs the current
  ``resourceVersion`` (409 otherwise) and bumps ``generation``; the next read reports ``DeploymentInProgress``
  for the new generation, the one after ``DeploymentComplete`` (or ``DeploymentFailed`` when told to);
* ``Job``: created unsuspended, it "runs" for one read, then succeeds or fails as ``job_result(job)`` says,
  with that pod log; a suspended Job waits until a merge patch sets ``suspend: false``.
* the DPD endpoint's pods: prefill pods (label ``inference.sagemaker.aws.amazon.com/dpd-role=prefill``) whose
  vLLM ``/metrics`` the API server's pod proxy serves (``pods/<pod>:<port>/proxy/metrics``; 403 when
  ``proxy_forbidden``), counting ``vllm:request_success_total`` up by ``prefill_requests(job)`` while a Job runs;
  and the router pod in ``hyperpod-inference-system`` whose log holds one ``disaggregate=`` line per request.
  The prefill pods are those of the Deployment ``prefill-<endpoint>`` (apps/v1), selected by its selector (the
  role label and ``app=<endpoint>``: [I], as in ``day2_fakes``); beside them run the prefill pods of endpoint
  ``<endpoint>-p5en``, whose name starts like ours and whose requests are not the benchmark's;
* the endpoint's Deployments (``apps/v1``), derived from the live ``InferenceEndpointConfig``: DPD ``prefill-<name>``
  and ``decode-<name>`` with each role's replicas and GPUs, colocated the Deployment its
  ``status.deploymentStatus.name`` names. With ``pdSpec.autoScalingSpec`` live, each role holds its
  ``minReplicaCount`` ready: KEDA scales down to it while the benchmark's queue stays under the target (the
  configured 600 s scale-down stabilization passes inside one 15-minute run). Any other ``prefill-<endpoint>``
  Deployment (the ``-p5en`` endpoint's) is served with its selector only.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from fake_http import QuietHandler, local_url, serving, write_kubeconfig

IEC = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/{ns}/inferenceendpointconfigs"
_ROUTES = (
    (r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/proxy/metrics", "proxy"),
    (r"/api/v1/namespaces/([^/]+)/(configmaps|serviceaccounts)(?:/([^/]+))?", None),
    (r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+/log))?", "pods"),
    (r"/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?", "jobs"),
    (r"/apis/apps/v1/namespaces/([^/]+)/deployments/([^/]+)", "deployments"),
    (r"/apis/inference\.sagemaker\.aws\.amazon\.com/v1/namespaces/([^/]+)/inferenceendpointconfigs(?:/([^/]+))?",
     "iec"),
)
KINDS = {"configmaps": "/api/v1/namespaces/{ns}/configmaps", "serviceaccounts":
         "/api/v1/namespaces/{ns}/serviceaccounts", "jobs": "/apis/batch/v1/namespaces/{ns}/jobs", "iec": IEC}


ROLE_LABEL = "inference.sagemaker.aws.amazon.com/dpd-role"
OPERATOR_NAMESPACE = "hyperpod-inference-system"
ENDPOINT = "llama-3-3-70b"
#: A prefill pod of another endpoint, ``llama-3-3-70b-p5en`` (config/examples/p5en-two-prefill.yaml), in the same
#: namespace: its name starts with ``prefill-llama-3-3-70b-``, and it served requests that are not the benchmark's.
OTHER_PREFILL_POD = f"prefill-{ENDPOINT}-p5en-6d5f7c8b9-d3c0y"


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def dpd_path_requests(job: dict[str, Any]) -> int:
    """What a real DPD endpoint would count: the run's requests (10 completed + 1 warm-up in the fake result
    files) reach the prefill pods when the scenario takes the DPD path, none when it is direct or colocated."""
    env = _env(job)
    return 11 if env["BENCH_MODE"] == "dpd" and env["BENCH_PATH"] != "direct" else 0


class State:
    def __init__(self, job_result: Callable[[dict[str, Any]], tuple[bool, str]],
                 prefill_requests: Callable[[dict[str, Any]], int] = dpd_path_requests) -> None:
        self.lock = threading.Lock()
        self.prefill_requests = prefill_requests
        self.prefill_pods: dict[str, float] = {}
        """prefill pod name -> vllm:request_success_total of endpoint :data:`ENDPOINT` (set by the test)."""
        self.other_prefill_pods: dict[str, float] = {OTHER_PREFILL_POD: 500.0}
        """The same for endpoint ``<ENDPOINT>-p5en`` (:data:`OTHER_PREFILL_POD`)."""
        self.router_pod: str | None = None
        self.router_log = ""
        self.router_mark = 0
        """Where the log of the current run starts (``since_seconds`` of the real API)."""
        self.proxy_forbidden = False
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self.job_result = job_result
        self.job_reads: dict[str, int] = {}
        self.logs: dict[str, str] = {}
        self.events: list[tuple[str, str, str]] = []  # (verb, kind, name or detail)
        self.fail_endpoint = False
        self.ready_override: dict[str, int] = {}
        """Deployment name -> ready replicas, whatever the endpoint asks for (a pod lost during a run)."""
        self.applied: list[dict[str, Any]] = []
        """Every InferenceEndpointConfig body replaced (PUT), in order."""
        self.version = 0

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)


class _Handler(QuietHandler):
    server: _Server

    def _route(self) -> tuple[str | None, str | None, str | None]:
        """(kind, namespace, name) of a request path; pods carry ``<pod>/log`` as the name."""
        path = unquote(urlparse(self.path).path)  # the client escapes the ':' of "<pod>:<port>"
        for pattern, kind in _ROUTES:
            if m := re.fullmatch(pattern, path):
                groups = m.groups()
                return kind or groups[1], groups[0], groups[-1]
        return None, None, None

    def do_GET(self) -> None:
        kind, ns, name = self._route()
        st = self.server.state
        with st.lock:
            if kind == "proxy":
                pod = (name or "").split(":")[0]
                if st.proxy_forbidden:
                    return self.send_kube_status(403, "Forbidden", f"pods \"{pod}\" is forbidden: pods/proxy")
                served = st.prefill_pods | st.other_prefill_pods
                if pod not in served:
                    return self.send_kube_status(404, "NotFound")
                count = served[pod]
                text = "".join(f'vllm:request_success_total{{engine="0",finished_reason="{r}",model_name="m"}} '
                               f'{count if r == "stop" else 0.0}\n' for r in ("stop", "length", "abort", "error"))
                return self.send_body(200, "# TYPE vllm:request_success_total counter\n" + text, "text/plain")
            if kind == "pods":
                if name is None:
                    return self.send_body(200, {"kind": "PodList", "apiVersion": "v1", "items": self._pods(ns)})
                pod = name.split("/")[0]
                if pod == st.router_pod:
                    return self.send_body(200, st.router_log[st.router_mark:], "text/plain")
                return self.send_body(200, st.logs.get(pod.removesuffix("-pod"), ""), "text/plain")
            if kind == "deployments":
                deployment = self._deployment(ns or "", name or "")
                if deployment is None:
                    return self.send_kube_status(404, "NotFound")
                return self.send_body(200, deployment)
            obj = st.objects.get(kind or "", {}).get(name or "")
            if obj is None:
                return self.send_kube_status(404, "NotFound")
            if kind == "iec":
                self._reconcile_endpoint(obj)
            if kind == "jobs":
                self._advance_job(obj)
            return self.send_body(200, obj)

    def _deployment(self, ns: str, name: str) -> dict[str, Any] | None:
        """The Deployment ``name`` of the live endpoint, or the selector-only prefill Deployment of another
        endpoint (module docstring), or ``None``."""
        live = next(iter(self.server.state.objects["iec"].values()), None)
        if live is None or (name.startswith("prefill-") and name != f"prefill-{live['metadata']['name']}"):
            return self._other_prefill(ns, name)
        spec, endpoint = live["spec"], live["metadata"]["name"]
        if "pdSpec" in spec:
            pd = spec["pdSpec"]
            scaling = pd.get("autoScalingSpec") or {}
            roles = {f"prefill-{endpoint}": (pd["prefillSpec"], scaling.get("prefillAutoScaling")),
                     f"decode-{endpoint}": (pd["decodingSpec"], scaling.get("decodingAutoScaling"))}
            if name not in roles:
                return None
            role, keda = roles[name]
            replicas, gpus = role["replicas"], role["resources"]["limits"]["nvidia.com/gpu"]
            ready = keda["minReplicaCount"] if keda else replicas
        else:
            if name != (live.get("status", {}).get("deploymentStatus") or {}).get("name"):
                return None
            replicas, gpus = spec["replicas"], spec["worker"]["resources"]["limits"]["nvidia.com/gpu"]
            ready = replicas
        ready = self.server.state.ready_override.get(name, ready)
        container = {"name": "worker", "image": "w", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        labels = ({"app": endpoint, ROLE_LABEL: name.partition("-")[0]} if "pdSpec" in spec else {"app": name})
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"replicas": ready, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
                "status": {"replicas": ready, "readyReplicas": ready}}

    @staticmethod
    def _other_prefill(ns: str, name: str) -> dict[str, Any] | None:
        """The operator's prefill Deployment of another endpoint (``prefill-<endpoint>``), selecting its pods."""
        if not name.startswith("prefill-"):
            return None
        labels = {"app": name.removeprefix("prefill-"), ROLE_LABEL: "prefill"}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": []}}}}

    def _pods(self, ns: str | None) -> list[dict[str, Any]]:
        st = self.server.state
        selector = (parse_qs(urlparse(self.path).query).get("labelSelector") or [""])[0]
        if selector.startswith("job-name="):
            job = selector.removeprefix("job-name=")
            return [{"metadata": {"name": f"{job}-pod", "namespace": ns}}] if job in st.logs else []
        if ROLE_LABEL in selector:
            pods = [(p, ENDPOINT) for p in st.prefill_pods] + [(p, f"{ENDPOINT}-p5en") for p in st.other_prefill_pods]
            wanted = dict(term.partition("=")[::2] for term in selector.split(","))
            return [{"metadata": {"name": p, "namespace": ns, "labels": labels}}
                    for p, endpoint in sorted(pods)
                    if (labels := {"app": endpoint, ROLE_LABEL: "prefill"}).items() >= wanted.items()]
        if ns == OPERATOR_NAMESPACE and st.router_pod:
            return [{"metadata": {"name": st.router_pod, "namespace": ns}}]
        return []

    def _reconcile_endpoint(self, obj: dict[str, Any]) -> None:
        status = obj.setdefault("status", {})
        gen = obj["metadata"]["generation"]
        if status.get("observedGeneration") != gen:
            status.update(state="DeploymentInProgress", observedGeneration=gen)
        elif status["state"] == "DeploymentInProgress":
            failed = self.server.state.fail_endpoint
            status["state"] = "DeploymentFailed" if failed else "DeploymentComplete"
            if "pdSpec" not in obj["spec"]:
                status["deploymentStatus"] = {"name": obj["metadata"]["name"]}
            status["conditions"] = [{"type": "Failed" if failed else "Ready", "status": "True", "reason": "x",
                                     "lastTransitionTime": "2026-12-01T00:00:00Z",
                                     "message": "pods CrashLoopBackOff" if failed else "ready"}]

    def _advance_job(self, job: dict[str, Any]) -> None:
        st = self.server.state
        name = job["metadata"]["name"]
        if job["spec"].get("suspend"):
            return
        st.job_reads[name] = st.job_reads.get(name, 0) + 1
        if st.job_reads[name] >= 2 and not job["status"].get("succeeded") and not job["status"].get("failed"):
            ok, log = st.job_result(job)
            st.logs[name] = log
            job["status"]["succeeded" if ok else "failed"] = 1
            n = st.prefill_requests(job)
            for pod in st.prefill_pods:  # the router spreads the disaggregated requests over the prefillers
                st.prefill_pods[pod] += n / len(st.prefill_pods)
            decisions = [True] * n + [False] * (11 - n if n < 11 else 0)
            st.router_log += "".join(f"[INFO] Conditional routing: estimated_tokens=1, threshold=1, "
                                     f"disaggregate={d}\n" for d in decisions)

    def do_POST(self) -> None:
        kind, ns, _ = self._route()
        body = self.read_json()
        st = self.server.state
        with st.lock:
            objects = st.objects[kind or ""]
            new = body["metadata"]["name"]
            if new in objects:
                return self.send_kube_status(409, "AlreadyExists")
            body["metadata"].update(resourceVersion=st.next_version(), generation=1, namespace=ns)
            body.setdefault("status", {})
            objects[new] = body
            if kind == "jobs":
                st.router_mark = len(st.router_log)
                running = [j for j in st.objects["jobs"].values() if not j["spec"].get("suspend")
                           and not j["status"].get("succeeded") and not j["status"].get("failed")]
                st.events.append(("create", kind, f"{new} running={len(running)}"))
            else:
                st.events.append(("create", kind or "", new))
            return self.send_body(201, body)

    def do_PUT(self) -> None:
        kind, _, name = self._route()
        body = self.read_json()
        st = self.server.state
        with st.lock:
            live = st.objects[kind or ""].get(name or "")
            if live is None:
                return self.send_kube_status(404, "NotFound")
            if kind == "iec" and body["metadata"].get("resourceVersion") != live["metadata"]["resourceVersion"]:
                return self.send_kube_status(409, "Conflict")
            body["metadata"].update(resourceVersion=st.next_version(),
                                    generation=live["metadata"].get("generation", 1) + 1)
            body["status"] = live.get("status", {})
            st.objects[kind or ""][name or ""] = body
            if kind == "iec":
                st.applied.append(body)
            mode = "dpd" if "pdSpec" in (body.get("spec") or {}) else "colocated"
            st.events.append(("replace", kind or "", mode if kind == "iec" else name or ""))
            return self.send_body(200, body)

    def do_PATCH(self) -> None:
        kind, _, name = self._route()
        body = self.read_json()
        st = self.server.state
        with st.lock:
            live = st.objects[kind or ""].get(name or "")
            if live is None:
                return self.send_kube_status(404, "NotFound")
            live["spec"].update(body.get("spec", {}))
            st.events.append(("patch", kind or "", name or ""))
            return self.send_body(200, live)

    def do_DELETE(self) -> None:
        kind, _, name = self._route()
        st = self.server.state
        with st.lock:
            if st.objects[kind or ""].pop(name or "", None) is None:
                return self.send_kube_status(404, "NotFound")
            st.events.append(("delete", kind or "", name or ""))
            return self.send_body(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class FakeKube:
    """``with FakeKube(job_result) as k: k.kubeconfig(path)``"""

    def __init__(self, job_result: Callable[[dict[str, Any]], tuple[bool, str]],
                 prefill_requests: Callable[[dict[str, Any]], int] = dpd_path_requests) -> None:
        self.state = State(job_result, prefill_requests)
        self._server = _Server(self.state)
        self._stack = ExitStack()

    @property
    def url(self) -> str:
        return local_url(self._server)

    def kubeconfig(self, path: Path) -> str:
        return str(write_kubeconfig(path, self.url, token="t"))

    def __enter__(self) -> FakeKube:
        self._stack.enter_context(serving(self._server))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
