"""A local fake Kubernetes API server for ``bench``: just the REST paths the official client calls.

Paths and verbs are those of the Kubernetes API (core/v1 configmaps, serviceaccounts, pods, pods/log;
batch/v1 jobs; the operator's ``inferenceendpointconfigs`` custom resource). Behaviour modelled:

* ``InferenceEndpointConfig``: create sets ``generation`` 1; replace (PUT) needs the current
  ``resourceVersion`` (409 otherwise) and bumps ``generation``; the next read reports ``DeploymentInProgress``
  for the new generation, the one after ``DeploymentComplete`` (or ``DeploymentFailed`` when told to); delete
  removes it, and with it the Deployments derived from it (below);
* ``Job``: created unsuspended, it "runs" for one read, then succeeds or fails as ``job_result(job)`` says,
  with that pod log; a suspended Job waits until a merge patch sets ``suspend: false``.
* the DPD endpoint's pods: prefill pods (label ``inference.sagemaker.aws.amazon.com/dpd-role=prefill``) whose
  vLLM ``/metrics`` the API server's pod proxy serves (``pods/<pod>:<port>/proxy/metrics``; 403 when
  ``proxy_forbidden``), counting ``vllm:request_success_total`` up by ``prefill_requests(job)`` while a Job runs;
  and the router pod in ``hyperpod-inference-system`` whose log holds one ``disaggregate=`` line per request.
  The prefill pods are those of the Deployment ``prefill-<endpoint>`` (apps/v1), selected by its selector (the
  role label and ``app=<endpoint>``: [I], as in ``day2_fakes``) and owned by its ReplicaSet (``ownerReferences``,
  apps/v1 ReplicaSets listed by selector); beside them run the prefill pods of endpoint ``<endpoint>-p5en``, whose
  name starts like ours and whose requests are not the benchmark's. The router pods are those of the router
  Deployment ``<endpoint>-<ns>-router``'s selector [I]; beside ours runs the router of endpoint ``<endpoint>-<ns>``
  in namespace ``router-x``, whose pod name starts like ours (``<iec>-<ns>-router-``: the operator's names are
  ambiguous across namespaces) and whose log holds other requests;
* the endpoint's Deployments (``apps/v1``), derived from the live ``InferenceEndpointConfig``: DPD ``prefill-<name>``
  and ``decode-<name>`` with each role's replicas and GPUs, colocated the Deployment its
  ``status.deploymentStatus.name`` names. With ``pdSpec.autoScalingSpec`` live, each role holds its
  ``minReplicaCount`` ready: KEDA scales down to it while the benchmark's queue stays under the target (the
  configured 600 s scale-down stabilization passes inside one 15-minute run). When the spec changes, a role keeps
  the replicas it had for ``settle_reads`` reads before it runs the new count: KEDA leaves a Deployment at the count
  it had when its ScaledObject went (``advanced.restoreToOriginalReplicaCount`` "Default: false", KEDA docs,
  ScaledObject specification), and when the operator sets the Deployment's replicas again is unpublished [I]. The
  other endpoint's prefill Deployment (``prefill-<State.other_endpoint>``, the ``-p5en`` one's) is served with its
  selector only; a Deployment of no live endpoint is not found (404). Several
  endpoints may be live (a fleet): each Deployment is derived from the live endpoint it belongs to (by name), the
  prefill pods and the router are those of ``State.endpoint`` (the benchmarked one), and the "other" prefill pods
  belong to ``State.other_endpoint``;
* KEDA: one ScaledObject (``keda.sh/v1alpha1``) per role while ``autoScalingSpec`` is live, each with the HPA KEDA
  makes for it (``autoscaling/v2``, ``keda-hpa-<ScaledObject>``). That the operator deletes them when
  ``autoScalingSpec`` goes is [I]: ``scalers_left_behind`` keeps them (and the role's scaled-down count) after it.
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
    (r"/apis/keda\.sh/v1alpha1/namespaces/([^/]+)/(scaledobjects)", "scaledobjects"),
    (r"/apis/autoscaling/v2/namespaces/([^/]+)/(horizontalpodautoscalers)", "hpas"),
    (r"/apis/apps/v1/namespaces/([^/]+)/(replicasets)", "replicasets"),
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
def other_router_pod(endpoint: str) -> str:
    """The router pod of endpoint ``<endpoint>-default`` in namespace ``router-x``: ``<iec>-<ns>-router-...`` starts
    like the benchmarked endpoint's (``<endpoint>-default-router-``), and its log holds requests that are not the
    benchmark's."""
    return f"{endpoint}-default-router-x-router-7c6b5a4d3-zz9yx"


#: :func:`other_router_pod` of the default endpoint.
OTHER_ROUTER_POD = other_router_pod(ENDPOINT)
OTHER_ROUTER_LOG = "".join("[INFO] Conditional routing: estimated_tokens=9000, threshold=4096, disaggregate=True\n"
                           for _ in range(40))


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def dpd_path_requests(job: dict[str, Any]) -> int:
    """What a real DPD endpoint would count: the run's requests (10 completed + 1 warm-up in the fake result
    files) reach the prefill pods when the scenario takes the DPD path, none when it is direct or colocated."""
    env = _env(job)
    return 11 if env["BENCH_MODE"] == "dpd" and env["BENCH_PATH"] != "direct" else 0


class State:
    def __init__(self, job_result: Callable[[dict[str, Any]], tuple[bool, str]],
                 prefill_requests: Callable[[dict[str, Any]], int] = dpd_path_requests, *,
                 endpoint: str = ENDPOINT, other_endpoint: str | None = None) -> None:
        self.lock = threading.Lock()
        self.endpoint = endpoint
        """The endpoint whose prefill pods (:attr:`prefill_pods`) and router (:attr:`router_pod`) run."""
        self.other_endpoint = other_endpoint or f"{endpoint}-p5en"
        """The endpoint of :attr:`other_prefill_pods`, whose name starts like ours by default."""
        self.prefill_requests = prefill_requests
        self.prefill_pods: dict[str, float] = {}
        """prefill pod name -> vllm:request_success_total of :attr:`endpoint` (set by the test)."""
        self.other_prefill_pods: dict[str, float] = {OTHER_PREFILL_POD: 500.0}
        """The same for :attr:`other_endpoint` (:data:`OTHER_PREFILL_POD`)."""
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
        self.applied: list[dict[str, Any]] = []
        """Every InferenceEndpointConfig body created (POST) or replaced (PUT), in order."""
        self.version = 0
        self.settle_reads = 2
        """Reads of a role Deployment after its replica count changed during which it still runs the old count."""
        self.shown: dict[str, int] = {}
        """Deployment name -> the replicas it runs now (:meth:`_Handler._replicas`)."""
        self.stale: dict[str, int] = {}
        self.scalers_left_behind = False
        """The operator leaves its ScaledObjects in place when ``autoScalingSpec`` goes (the [I] not holding)."""
        self.scaled: set[str] = set()
        """Deployments a ScaledObject targets (while autoscaling is live, or left behind)."""
        self.lost_during_run: dict[str, int] = {}
        """Deployment name -> ready replicas once a Job has started (a pod lost during a run)."""
        self.job_started = False

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
                if pod == other_router_pod(st.endpoint):
                    return self.send_body(200, OTHER_ROUTER_LOG, "text/plain")
                return self.send_body(200, st.logs.get(pod.removesuffix("-pod"), ""), "text/plain")
            if kind == "deployments":
                deployment = self._deployment(ns or "", name or "")
                if deployment is None:
                    return self.send_kube_status(404, "NotFound")
                return self.send_body(200, deployment)
            if kind == "replicasets":
                return self.send_body(200, {"kind": "ReplicaSetList", "apiVersion": "apps/v1",
                                            "items": self._replica_sets(ns or "")})
            if kind in ("scaledobjects", "hpas"):
                return self.send_body(200, {"kind": "List", "items": self._scalers(ns or "", kind)})
            obj = st.objects.get(kind or "", {}).get(name or "")
            if obj is None:
                return self.send_kube_status(404, "NotFound")
            if kind == "iec":
                self._reconcile_endpoint(obj)
            if kind == "jobs":
                self._advance_job(obj)
            return self.send_body(200, obj)

    @staticmethod
    def _roles(live: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
        """Role Deployment name -> (its pdSpec role, its KEDA scaling or None) of a DPD InferenceEndpointConfig."""
        pd, endpoint = live["spec"].get("pdSpec"), live["metadata"]["name"]
        if pd is None:
            return {}
        scaling = pd.get("autoScalingSpec") or {}
        return {f"prefill-{endpoint}": (pd["prefillSpec"], scaling.get("prefillAutoScaling")),
                f"decode-{endpoint}": (pd["decodingSpec"], scaling.get("decodingAutoScaling"))}

    def _replicas(self, name: str, target: int) -> int:
        """What the Deployment runs: ``target``, after ``settle_reads`` reads at the count it ran before (never, while
        a ScaledObject left behind still scales it)."""
        st = self.server.state
        shown = st.shown.setdefault(name, target)
        if shown != target:
            if name in st.scaled and st.scalers_left_behind:
                return shown
            st.stale[name] = st.stale.get(name, st.settle_reads) - 1
            if st.stale[name] >= 0:
                return shown
        st.stale.pop(name, None)
        st.shown[name] = target
        return target

    def _live_of(self, name: str) -> dict[str, Any] | None:
        """The live endpoint Deployment ``name`` belongs to: ``<role>-<iec>`` of a DPD one, else the colocated one
        whose ``status.deploymentStatus.name`` it is."""
        iecs = self.server.state.objects["iec"]
        role, _, owner = name.partition("-")
        live = iecs.get(owner) if role in ("prefill", "decode") else None
        if live is not None and "pdSpec" in live["spec"]:
            return live
        return next((x for x in iecs.values() if "pdSpec" not in x["spec"]
                     and ((x.get("status") or {}).get("deploymentStatus") or {}).get("name") == name), live)

    def _deployment(self, ns: str, name: str) -> dict[str, Any] | None:
        """The Deployment ``name`` of a live endpoint, its router's, or the selector-only prefill Deployment of
        another endpoint (module docstring), or ``None``."""
        st = self.server.state
        if ns == OPERATOR_NAMESPACE:
            return self._router(name, list(st.objects["iec"].values()))
        live = self._live_of(name)
        if live is None:
            return self._other_prefill(ns, name)
        spec, endpoint = live["spec"], live["metadata"]["name"]
        if "pdSpec" in spec:
            roles = self._roles(live)
            if name not in roles:
                return None
            role, keda = roles[name]
            if keda:
                st.scaled.add(name)
            gpus = role["resources"]["limits"]["nvidia.com/gpu"]
            replicas = self._replicas(name, keda["minReplicaCount"] if keda else role["replicas"])
        else:
            if name != (live.get("status", {}).get("deploymentStatus") or {}).get("name"):
                return None
            replicas, gpus = spec["replicas"], spec["worker"]["resources"]["limits"]["nvidia.com/gpu"]
        ready = st.lost_during_run.get(name, replicas) if st.job_started else replicas
        container = {"name": "worker", "image": "w", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        labels = ({"app": endpoint, ROLE_LABEL: name.partition("-")[0]} if "pdSpec" in spec else {"app": name})
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
                "status": {"replicas": replicas, "readyReplicas": ready}}

    @staticmethod
    def _router(name: str, live: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The router Deployment ``<iec>-<ns>-router`` of a live endpoint [I], selecting ``app=<its name>``."""
        if not any(name == f"{x['metadata']['name']}-{x['metadata']['namespace']}-router" for x in live):
            return None
        labels = {"app": name}
        return {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": OPERATOR_NAMESPACE, "uid": f"uid-{name}"},
                "spec": {"selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": {"containers": []}}}}

    def _replica_sets(self, ns: str) -> list[dict[str, Any]]:
        """One ReplicaSet ``<deployment>-rs`` per prefill Deployment (ours and the ``-p5en`` endpoint's), which
        owns it."""
        out = []
        st = self.server.state
        for endpoint in (st.endpoint, st.other_endpoint):
            deployment = f"prefill-{endpoint}"
            labels = {"app": endpoint, ROLE_LABEL: "prefill"}
            out.append({"metadata": {"name": f"{deployment}-rs", "namespace": ns, "uid": f"uid-{deployment}-rs",
                                     "labels": labels, "ownerReferences": [
                                         {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment,
                                          "uid": f"uid-{deployment}", "controller": True}]},
                        "spec": {"selector": {"matchLabels": labels}}})
        return out

    def _scalers(self, ns: str, kind: str) -> list[dict[str, Any]]:
        """KEDA's ScaledObjects (one per role Deployment a ScaledObject targets: live autoscaling, or left behind)
        and the HPA KEDA makes for each (module docstring); names [I]."""
        st = self.server.state
        targets = {name for live in st.objects["iec"].values() for name, (_, keda) in self._roles(live).items()
                   if keda}
        st.scaled |= targets
        if st.scalers_left_behind:
            targets |= st.scaled
        out = []
        for target in sorted(targets):
            scaled_object = f"{target}-scaler"
            if kind == "scaledobjects":
                out.append({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                            "metadata": {"name": scaled_object, "namespace": ns},
                            "spec": {"scaleTargetRef": {"name": target}, "minReplicaCount": 1}})
            else:
                out.append({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                            "metadata": {"name": f"keda-hpa-{scaled_object}", "namespace": ns},
                            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                                     "minReplicas": 1, "maxReplicas": 2}})
        return out

    def _other_prefill(self, ns: str, name: str) -> dict[str, Any] | None:
        """The operator's prefill Deployment of the other endpoint (``prefill-<State.other_endpoint>``), selecting
        its pods; ``None`` for any other name (a deleted endpoint's Deployments are gone)."""
        if name != f"prefill-{self.server.state.other_endpoint}":
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
        wanted = dict(term.partition("=")[::2] for term in selector.split(",") if term)
        if ROLE_LABEL in selector:
            pods = ([(p, st.endpoint) for p in st.prefill_pods]
                    + [(p, st.other_endpoint) for p in st.other_prefill_pods])
            return [{"metadata": {"name": p, "namespace": ns, "labels": labels, "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"prefill-{endpoint}-rs",
                         "uid": f"uid-prefill-{endpoint}-rs", "controller": True}]}}
                    for p, endpoint in sorted(pods)
                    if (labels := {"app": endpoint, ROLE_LABEL: "prefill"}).items() >= wanted.items()]
        if ns == OPERATOR_NAMESPACE and st.router_pod:
            routers = {st.router_pod: f"{st.endpoint}-default-router",
                       other_router_pod(st.endpoint): f"{st.endpoint}-default-router-x-router"}
            return [{"metadata": {"name": p, "namespace": ns, "labels": {"app": app}}}
                    for p, app in sorted(routers.items()) if {"app": app}.items() >= wanted.items()]
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
            if kind == "iec":
                st.applied.append(body)
            if kind == "jobs":
                st.router_mark = len(st.router_log)
                st.job_started = True
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
            if kind == "iec":  # what the replaced spec ran: its replicas, its ScaledObjects
                for deployment, (role, keda) in self._roles(live).items():
                    st.shown.setdefault(deployment, keda["minReplicaCount"] if keda else role["replicas"])
                    if keda:
                        st.scaled.add(deployment)
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
            gone = st.objects[kind or ""].pop(name or "", None)
            if gone is None:
                return self.send_kube_status(404, "NotFound")
            if kind == "iec":  # its Deployments go with it; the next ones of these names start at their own count
                for deployment, (_, keda) in self._roles(gone).items():
                    if keda:  # the ScaledObjects it had (kept by scalers_left_behind)
                        st.scaled.add(deployment)
                for deployment in (*self._roles(gone), name or ""):
                    st.shown.pop(deployment, None)
                    st.stale.pop(deployment, None)
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
                 prefill_requests: Callable[[dict[str, Any]], int] = dpd_path_requests, **state: Any) -> None:
        self.state = State(job_result, prefill_requests, **state)
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
