"""A local fake Kubernetes API server for ``bench``: just the REST paths the official client calls.

Paths and verbs are those of the Kubernetes API (core/v1 configmaps, serviceaccounts, pods, pods/log;
batch/v1 jobs; the operator's ``inferenceendpointconfigs`` custom resource). Behaviour modelled:

* ``InferenceEndpointConfig``: create sets ``generation`` 1; replace (PUT) needs the current
  ``resourceVersion`` (409 otherwise) and bumps ``generation``; the next read reports ``DeploymentInProgress``
  for the new generation, the one after ``DeploymentComplete`` (or ``DeploymentFailed`` when told to);
* ``Job``: created unsuspended, it "runs" for one read, then succeeds or fails as ``job_result(job)`` says,
  with that pod log; a suspended Job waits until a merge patch sets ``suspend: false``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from fake_http import QuietHandler, local_url, serving, write_kubeconfig

IEC = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/{ns}/inferenceendpointconfigs"
_ROUTES = (
    (r"/api/v1/namespaces/([^/]+)/(configmaps|serviceaccounts)(?:/([^/]+))?", None),
    (r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+/log))?", "pods"),
    (r"/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?", "jobs"),
    (r"/apis/inference\.sagemaker\.aws\.amazon\.com/v1/namespaces/([^/]+)/inferenceendpointconfigs(?:/([^/]+))?",
     "iec"),
)
KINDS = {"configmaps": "/api/v1/namespaces/{ns}/configmaps", "serviceaccounts":
         "/api/v1/namespaces/{ns}/serviceaccounts", "jobs": "/apis/batch/v1/namespaces/{ns}/jobs", "iec": IEC}


class State:
    def __init__(self, job_result: Callable[[dict[str, Any]], tuple[bool, str]]) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self.job_result = job_result
        self.job_reads: dict[str, int] = {}
        self.logs: dict[str, str] = {}
        self.events: list[tuple[str, str, str]] = []  # (verb, kind, name or detail)
        self.fail_endpoint = False
        self.version = 0

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)


class _Handler(QuietHandler):
    server: _Server

    def _route(self) -> tuple[str | None, str | None, str | None]:
        """(kind, namespace, name) of a request path; pods carry ``<pod>/log`` as the name."""
        path = urlparse(self.path).path
        for pattern, kind in _ROUTES:
            if m := re.fullmatch(pattern, path):
                groups = m.groups()
                return kind or groups[1], groups[0], groups[-1]
        return None, None, None

    def do_GET(self) -> None:
        kind, ns, name = self._route()
        st = self.server.state
        with st.lock:
            if kind == "pods":
                if name is None:
                    job = parse_qs(urlparse(self.path).query)["labelSelector"][0].removeprefix("job-name=")
                    items = [{"metadata": {"name": f"{job}-pod", "namespace": ns}}] if job in st.logs else []
                    return self.send_body(200, {"kind": "PodList", "apiVersion": "v1", "items": items})
                pod = name.split("/")[0].removesuffix("-pod")
                return self.send_body(200, st.logs.get(pod, ""), "text/plain")
            obj = st.objects.get(kind or "", {}).get(name or "")
            if obj is None:
                return self.send_kube_status(404, "NotFound")
            if kind == "iec":
                self._reconcile_endpoint(obj)
            if kind == "jobs":
                self._advance_job(obj)
            return self.send_body(200, obj)

    def _reconcile_endpoint(self, obj: dict[str, Any]) -> None:
        status = obj.setdefault("status", {})
        gen = obj["metadata"]["generation"]
        if status.get("observedGeneration") != gen:
            status.update(state="DeploymentInProgress", observedGeneration=gen)
        elif status["state"] == "DeploymentInProgress":
            failed = self.server.state.fail_endpoint
            status["state"] = "DeploymentFailed" if failed else "DeploymentComplete"
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

    def __init__(self, job_result: Callable[[dict[str, Any]], tuple[bool, str]]) -> None:
        self.state = State(job_result)
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
