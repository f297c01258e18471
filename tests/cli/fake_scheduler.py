"""A fake Kubernetes API with a GPU scheduler, for ``rollout``: the config's instance groups as nodes, the operator
making each InferenceEndpointConfig's Deployments, the Deployment controller following their strategy, and a
scheduler binding pods to nodes with free GPUs.

It composes the day-2 fake (:class:`day2_fakes.FakeCluster` and its request handler, which serve the reads ``status``
and ``smoke`` make: the endpoint, Deployments, ReplicaSets, pods and their logs, Ingresses, nodes) and adds what a
rollout writes and reads: InferenceEndpointConfigs created (POST), replaced (PUT, ``resourceVersion`` checked) and
deleted, every namespace's pods (``/api/v1/pods``), and Services (GET, POST, PATCH).

Modelled behaviour, each from its source:

* nodes: one per instance of each instance group of the config, labelled as the platform stack labels them
  (``hyperpod-dpd/pool``, ``hyperpod-dpd/instance-group`` on a group that a role names, and the well-known
  ``node.kubernetes.io/instance-type``), with the instance type's GPUs allocatable (8 on a p5: EC2's p5 page);
* the operator (its behaviour beyond the published is [I]): per DPD InferenceEndpointConfig the Deployments
  ``prefill-<iec>`` and ``decode-<iec>`` (AWS DPD guide: "separate prefill and decode Deployments"; names [I]) with
  the strategy the test gives (``strategy``: the operator's is unpublished), one pod template per role (image,
  ``worker.args`` then the role's ``args``: CRD "appended after worker.args", resources, nodeSelector); a change of
  spec (PUT) changes both templates in one go; the router Deployment in ``hyperpod-inference-system`` and the
  Ingress ``alb-<iec>-<ns>`` with an ALB hostname; ``status.state`` ``DeploymentComplete`` once every role runs its
  replicas of the current template and nothing else, ``DeploymentInProgress`` before (CRD status enum); a deleted
  endpoint is ``DeletionInProgress`` for one read, then gone with its Deployments and pods;
* the Deployment controller (Kubernetes docs, "Deployments", "Strategy"): ``Recreate`` kills every old pod before
  it creates new ones; ``RollingUpdate`` creates new pods while the total stays within replicas + maxSurge and stops
  old pods while the available ones stay at replicas - maxUnavailable or more (percentages: surge rounded up,
  unavailable down; both 0 makes maxUnavailable 1: ``ResolveFenceposts``); a new replica count is a scaling event
  first (the current ReplicaSet grows or shrinks to it, then any rollout: ``syncDeployment``); a ReplicaSet
  ``<deployment>-<pod-template-hash>`` per template, owned by the Deployment;
* the scheduler (Kubernetes docs, "Resource Management for Pods and Containers": a pod is scheduled only on a node
  with enough allocatable resources left): a pending pod binds to the first node (by name) that its nodeSelector
  selects and whose allocatable GPUs minus those of the pods bound there cover its request; else it stays
  ``Pending`` with ``PodScheduled`` False, reason ``Unschedulable``, "0/N nodes are available: ... Insufficient
  nvidia.com/gpu" (the scheduler's message). A bound pod is Ready at once (its cold start is not modelled).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from day2_fakes import FIRST_POD, DecoderBehaviour, FakeCluster, _KubeHandler, _OpenAiHandler, role_labels, role_pod

from fake_http import local_url, write_kubeconfig
from hyperpod_core.config import Config
from hyperpod_core.instances import DPD_INSTANCE_GPUS
from hyperpod_core.names import INSTANCE_GROUP_NODE_LABEL, OPERATOR_NAMESPACE, POOL_NODE_LABEL

GPU = "nvidia.com/gpu"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
IEC_PATH = ("apis", "inference.sagemaker.aws.amazon.com", "v1")
ROLE_SPEC = {"prefill": "prefillSpec", "decode": "decodingSpec"}
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
RECREATE = {"type": "Recreate"}


def nodes_of(config: Config) -> list[dict[str, Any]]:
    """One Ready node per instance of every instance group (module docstring)."""
    named = {getattr(s.endpoint, role).instance_group for s in config.specs() for role in ("prefill", "decode")}
    out = []
    for g in config.hyperpod.instance_groups:
        labels = {POOL_NODE_LABEL: g.pool, INSTANCE_TYPE_LABEL: g.instance_type}
        if g.name in named:
            labels[INSTANCE_GROUP_NODE_LABEL] = g.name
        for i in range(g.instance_count):
            gpus = str(DPD_INSTANCE_GPUS[g.instance_type])
            out.append({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": f"hyperpod-i-{g.name}-{i}", "labels": labels},
                        "spec": {},
                        "status": {"allocatable": {GPU: gpus, "cpu": "192", "memory": "2000Gi"},
                                   "capacity": {GPU: gpus},
                                   "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


def _scaled(value: Any, replicas: int, *, up: bool) -> int:
    if isinstance(value, int):
        return value
    share = float(str(value).rstrip("%")) * replicas / 100
    return math.ceil(share) if up else math.floor(share)


@dataclass
class Operator:
    """The operator, the Deployment controller and the scheduler over a :class:`FakeCluster` (module docstring)."""

    cluster: FakeCluster
    strategy: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(ROLLING))
    services: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    deleting: set[tuple[str, str]] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    """``create|replace|delete <kind> <name>`` of every write, in order."""
    lock: threading.RLock = field(default_factory=threading.RLock)
    _version: int = 0
    _pods_made: int = 0
    _templates: dict[str, str] = field(default_factory=dict)
    """Deployment -> the pod-template-hash of its current template."""
    _specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Deployment -> its current pod template (what a scaling event makes more pods of)."""

    # --- the API's writes ----------------------------------------------------------------------------------

    def version(self) -> str:
        self._version += 1
        return str(self._version)

    def create(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """POST: ``None`` when it exists (409)."""
        meta = doc["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.cluster.endpoints:
            return None
        obj = copy.deepcopy(doc)
        obj["metadata"].update(generation=1, resourceVersion=self.version(), uid=f"uid-iec-{meta['name']}")
        obj["status"] = {}
        self.cluster.endpoints[key] = obj
        self.events.append(f"create InferenceEndpointConfig {meta['name']}")
        self.reconcile()
        return obj

    def replace(self, key: tuple[str, str], doc: dict[str, Any]) -> dict[str, Any] | int:
        """PUT: the object, or the HTTP status of the refusal (404, 409)."""
        live = self.cluster.endpoints.get(key)
        if live is None or key in self.deleting:
            return 404
        if doc["metadata"].get("resourceVersion") != live["metadata"]["resourceVersion"]:
            return 409
        obj = copy.deepcopy(doc)
        obj["metadata"].update(generation=live["metadata"]["generation"] + 1, resourceVersion=self.version(),
                               uid=live["metadata"]["uid"])
        obj["status"] = live.get("status", {})
        self.cluster.endpoints[key] = obj
        self.events.append(f"replace InferenceEndpointConfig {key[1]}")
        self.reconcile()
        return obj

    def delete(self, key: tuple[str, str]) -> bool:
        if key not in self.cluster.endpoints:
            return False
        if key not in self.deleting:
            self.deleting.add(key)
            self.events.append(f"delete InferenceEndpointConfig {key[1]}")
        return True

    # --- the controllers -----------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """One pass of the operator, the Deployment controller and the scheduler."""
        c = self.cluster
        for key in list(c.endpoints):
            if key in self.deleting:
                self._tear_down(key)
                continue
            iec = c.endpoints[key]
            pd = iec["spec"].get("pdSpec")
            if pd is None:
                continue
            for role in ("prefill", "decode"):
                self._deployment(iec, role, pd[ROLE_SPEC[role]])
            self._router(iec)
        self._schedule()
        for key, iec in c.endpoints.items():
            if key not in self.deleting and iec["spec"].get("pdSpec") is not None:
                self._status(iec)

    def _tear_down(self, key: tuple[str, str]) -> None:
        """The first pass shows ``DeletionInProgress`` and removes what the endpoint owns; the next removes it."""
        c = self.cluster
        ns, name = key
        iec = c.endpoints[key]
        owned = {f"prefill-{name}", f"decode-{name}"}
        if iec.get("status", {}).get("state") == "DeletionInProgress":
            del c.endpoints[key]
            self.deleting.discard(key)
            return
        iec["status"] = {**iec.get("status", {}), "state": "DeletionInProgress"}
        for deployment in owned:
            c.deployments.pop((ns, deployment), None)
            self._templates.pop(deployment, None)
        c.replica_sets = [rs for rs in c.replica_sets if not (
            rs["metadata"]["namespace"] == ns and _owner(rs) in owned)]
        c.pods = [p for p in c.pods if not (p["metadata"]["namespace"] == ns and self._deployment_of(p) in owned)]
        router = f"{name}-{ns}-router"
        c.deployments.pop((OPERATOR_NAMESPACE, router), None)
        c.pods = [p for p in c.pods if (p["metadata"].get("labels") or {}).get("app") != router]
        c.ingresses = [i for i in c.ingresses if i["metadata"]["name"] != f"alb-{name}-{ns}"]

    @staticmethod
    def _deployment_of(pod: dict[str, Any]) -> str:
        refs = pod["metadata"].get("ownerReferences") or []
        template_hash = (pod["metadata"].get("labels") or {}).get("pod-template-hash", "")
        return refs[0]["name"].removesuffix(f"-{template_hash}") if refs and template_hash else ""

    def _deployment(self, iec: dict[str, Any], role: str, role_spec: dict[str, Any]) -> None:
        c = self.cluster
        ns, name = iec["metadata"]["namespace"], iec["metadata"]["name"]
        deployment = f"{role}-{name}"
        worker = iec["spec"]["worker"]
        template = {"image": worker["image"], "args": [*worker.get("args", []), *role_spec.get("args", [])],
                    "gpus": int((role_spec.get("resources") or {}).get("requests", {}).get(GPU, 0)),
                    "nodeSelector": role_spec.get("nodeSelector") or {}}
        replicas = int(role_spec.get("replicas", 1))
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        d = c.deployments.get((ns, deployment))
        if d is None:
            template_hash = FIRST_POD[role][0]
            d = {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": deployment, "namespace": ns, "uid": f"uid-{ns}-{deployment}", "generation": 0,
                              "annotations": {}},
                 "spec": {"replicas": replicas, "selector": {"matchLabels": role_labels(name, role)},
                          "strategy": copy.deepcopy(self.strategy)}}
            c.deployments[(ns, deployment)] = d
        elif d["metadata"].get("digest") != digest:
            template_hash = digest[:5]
        else:
            template_hash = self._templates[deployment]
        if d["metadata"].get("digest") != digest and deployment in self._specs \
                and 0 < d["spec"]["replicas"] != replicas:
            # a new replica count is a scaling event first: the old ReplicaSet grows or shrinks to it with pods of
            # the old template, before any rollout (deployment_controller.go syncDeployment: isScalingEvent -> sync);
            # a ReplicaSet at 0 is not active (FilterActiveReplicaSets), so from 0 there is none
            self._scale(d, role, name, replicas)
        if d["metadata"].get("digest") != digest:
            d["metadata"]["digest"] = digest
            d["metadata"]["generation"] += 1
            revision = int(d["metadata"]["annotations"].get("deployment.kubernetes.io/revision", "0")) + 1
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = str(revision)
            d["spec"]["template"] = {"metadata": {"labels": role_labels(name, role)}, "spec": {
                "nodeSelector": template["nodeSelector"],
                "containers": [{"name": f"{role}-{name}", "image": template["image"], "args": template["args"],
                                "resources": {"requests": {GPU: str(template["gpus"])},
                                              "limits": {GPU: str(template["gpus"])}}}]}}
            self._templates[deployment] = template_hash
            self._specs[deployment] = template
            labels = role_labels(name, role) | {"pod-template-hash": template_hash}
            c.replica_sets.append({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{deployment}-{template_hash}", "namespace": ns, "labels": labels,
                             "uid": f"uid-{ns}-{deployment}-{template_hash}",
                             "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment,
                                                  "uid": d["metadata"]["uid"], "controller": True}]},
                "spec": {"selector": {"matchLabels": labels}}})
        d["spec"]["replicas"] = replicas  # a replicas-only change scales the Deployment, no new ReplicaSet
        self._roll(d, role, name, template, replicas)

    def _scale(self, d: dict[str, Any], role: str, name: str, replicas: int) -> None:
        """The current ReplicaSet to ``replicas`` pods of its template (unscheduled pods go first on a scale-down)."""
        c = self.cluster
        ns, deployment = d["metadata"]["namespace"], d["metadata"]["name"]
        mine = [p for p in c.pods if p["metadata"]["namespace"] == ns and self._deployment_of(p) == deployment]
        for pod in sorted(mine, key=_bound)[:max(len(mine) - replicas, 0)]:
            c.pods.remove(pod)
        for _ in range(replicas - len(mine)):
            self._new_pod(ns, role, name, self._templates[deployment], self._specs[deployment])
        self._schedule()
        d["spec"]["replicas"] = replicas

    def _roll(self, d: dict[str, Any], role: str, name: str, template: dict[str, Any], replicas: int) -> None:
        """The Deployment controller (module docstring), until nothing more may change in this pass."""
        c = self.cluster
        ns, deployment = d["metadata"]["namespace"], d["metadata"]["name"]
        current = self._templates[deployment]
        strategy = d["spec"]["strategy"]
        while True:
            mine = [p for p in c.pods if p["metadata"]["namespace"] == ns and self._deployment_of(p) == deployment]
            new = [p for p in mine if p["metadata"]["labels"]["pod-template-hash"] == current]
            old = [p for p in mine if p not in new]
            if strategy["type"] == "Recreate":
                if old:
                    c.pods = [p for p in c.pods if p not in old]
                    continue
                if len(new) < replicas:
                    self._new_pod(ns, role, name, current, template)
                    continue
                return
            rolling = strategy.get("rollingUpdate") or {}
            surge = _scaled(rolling.get("maxSurge", "25%"), replicas, up=True)
            unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, up=False)
            unavailable = 1 if surge == 0 and unavailable == 0 else unavailable  # ResolveFenceposts
            self._schedule()
            ready = sum(1 for p in mine if _bound(p))
            if len(new) < replicas and len(mine) < replicas + surge:
                self._new_pod(ns, role, name, current, template)
                continue
            victim = sorted(old, key=_bound)[0] if old else None
            if victim is not None and ready - (1 if _bound(victim) else 0) >= replicas - unavailable:
                c.pods.remove(victim)
                continue
            return

    def _new_pod(self, ns: str, role: str, name: str, template_hash: str, template: dict[str, Any]) -> None:
        c = self.cluster
        first = FIRST_POD[role]
        taken = {p["metadata"]["name"] for p in c.pods}
        suffix = first[1] if template_hash == first[0] and f"{role}-{name}-{first[0]}-{first[1]}" not in taken \
            else f"p{self._pods_made:04d}"
        self._pods_made += 1
        model = next((template["args"][i + 1] for i, a in enumerate(template["args"][:-1]) if a == "--model"), "")
        pod = role_pod(name, role, template_hash, suffix, image=template["image"], model=model, namespace=ns,
                       scheduled=False)  # this fake scheduler binds it (day2_fakes would put it on its own node)
        pod["spec"]["nodeSelector"] = template["nodeSelector"]
        vllm = pod["spec"]["containers"][1]
        vllm["resources"] = {"requests": {GPU: str(template["gpus"])}, "limits": {GPU: str(template["gpus"])}}
        pod["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
        c.pods.append(pod)

    def _schedule(self) -> None:
        """Bind every pending pod that fits (module docstring)."""
        c = self.cluster
        for pod in c.pods:
            if _bound(pod) or _gpus(pod) == 0:
                continue
            selector = pod["spec"].get("nodeSelector") or {}
            nodes = sorted(c.nodes, key=lambda n: n["metadata"]["name"])
            node = next((n for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())
                         and self.free(n["metadata"]["name"]) >= _gpus(pod)), None)
            if node is None:
                pod["status"] = {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": f"0/{len(nodes)} nodes are available: {self._why(selector, _gpus(pod))}"},
                    {"type": "Ready", "status": "False"}]}
                continue
            pod["spec"]["nodeName"] = node["metadata"]["name"]
            pod["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                                {"type": "Ready", "status": "True"}]}

    def _why(self, selector: dict[str, str], gpus: int) -> str:
        nodes = self.cluster.nodes
        matching = [n for n in nodes if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())]
        parts = []
        if matching:
            parts.append(f"{len(matching)} Insufficient {GPU}")
        if len(nodes) > len(matching):
            parts.append(f"{len(nodes) - len(matching)} node(s) didn't match Pod's node affinity/selector")
        return ", ".join(parts) + "."

    def free(self, node: str) -> int:
        n = next(n for n in self.cluster.nodes if n["metadata"]["name"] == node)
        used = sum(_gpus(p) for p in self.cluster.pods if p.get("spec", {}).get("nodeName") == node)
        return int(n["status"]["allocatable"][GPU]) - used

    def _router(self, iec: dict[str, Any]) -> None:
        c = self.cluster
        ns, name = iec["metadata"]["namespace"], iec["metadata"]["name"]
        router = f"{name}-{ns}-router"
        if (OPERATOR_NAMESPACE, router) in c.deployments:
            return
        c.deployments[(OPERATOR_NAMESPACE, router)] = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": router, "namespace": OPERATOR_NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": router}},
                     "template": {"metadata": {"labels": {"app": router}}, "spec": {"containers": []}}}}
        c.ingresses.append({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                            "metadata": {"name": f"alb-{name}-{ns}", "namespace": OPERATOR_NAMESPACE},
                            "status": {"loadBalancer": {"ingress": [
                                {"hostname": f"k8s-hyperpod-alb{name[:12]}-{len(c.ingresses)}.us-west-2.elb."
                                             "amazonaws.com"}]}}})

    def _status(self, iec: dict[str, Any]) -> None:
        c = self.cluster
        ns, name = iec["metadata"]["namespace"], iec["metadata"]["name"]
        waiting = []
        for role in ("prefill", "decode"):
            deployment = f"{role}-{name}"
            d = c.deployments[(ns, deployment)]
            mine = [p for p in c.pods if p["metadata"]["namespace"] == ns and self._deployment_of(p) == deployment]
            new = [p for p in mine if p["metadata"]["labels"]["pod-template-hash"] == self._templates[deployment]]
            ready = [p for p in mine if _bound(p)]
            d["status"] = {"observedGeneration": d["metadata"]["generation"], "replicas": len(mine),
                           "updatedReplicas": len(new), "readyReplicas": len(ready),
                           "availableReplicas": len(ready)}
            pending = [p for p in mine if not _bound(p)]
            if pending:
                cond = next(x for x in pending[0]["status"]["conditions"] if x["type"] in ("PodScheduled", "Ready"))
                waiting.append(f"pod {pending[0]['metadata']['name']} Pending: {cond.get('message', '')}".strip())
            elif len(new) != d["spec"]["replicas"] or len(mine) != len(new):
                waiting.append(f"{deployment} rolling out")
        iec["status"] = {
            "state": "DeploymentInProgress" if waiting else "DeploymentComplete",
            "observedGeneration": iec["metadata"]["generation"],
            "conditions": [{"type": "DeploymentReady", "status": "False" if waiting else "True",
                            "reason": "InProgress" if waiting else "Ready",
                            "message": "; ".join(waiting) or "DPD prefill and decode deployments are ready",
                            "lastTransitionTime": "2026-12-01T00:00:00Z"}]}

    # --- reads ------------------------------------------------------------------------------------------------

    def role_pods(self, name: str, role: str) -> list[dict[str, Any]]:
        return [p for p in self.cluster.pods if self._deployment_of(p) == f"{role}-{name}"]


def _owner(obj: dict[str, Any]) -> str:
    refs = obj["metadata"].get("ownerReferences") or []
    return str(refs[0]["name"]) if refs else ""


def _bound(pod: dict[str, Any]) -> bool:
    return bool(pod.get("spec", {}).get("nodeName"))


def _gpus(pod: dict[str, Any]) -> int:
    return sum(int((ct.get("resources") or {}).get("requests", {}).get(GPU, 0))
               for ct in pod.get("spec", {}).get("containers", []))


class _Handler(_KubeHandler):
    """The day-2 handler's reads, after a reconcile pass, plus a rollout's writes (module docstring)."""

    operator: Operator
    #: TCP_NODELAY: the handler writes the headers and the body separately, and with Nagle's algorithm the body waits
    #: for the client's delayed ACK (about 40 ms per request on Linux).
    disable_nagle_algorithm = True

    def _path(self) -> tuple[list[str], dict[str, str]]:
        url = urllib.parse.urlsplit(self.path)
        return url.path.strip("/").split("/"), {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}

    def do_GET(self) -> None:
        op = self.operator
        p, _ = self._path()
        with op.lock:
            op.reconcile()
            if p == ["api", "v1", "pods"]:
                return self.send_body(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                            "items": copy.deepcopy(self.cluster.pods)})
            if p[:2] == ["api", "v1"] and len(p) == 6 and p[4] == "services":
                svc = op.services.get((p[3], p[5]))
                return self.send_body(200, svc) if svc else self._not_found()
            return super().do_GET()

    def do_POST(self) -> None:
        op = self.operator
        p, _ = self._path()
        body = self.read_json()
        with op.lock:
            if tuple(p[:3]) == IEC_PATH and len(p) == 6:
                body["metadata"]["namespace"] = p[4]
                made = op.create(body)
                return self.send_body(201, made) if made else self.send_kube_status(409, "AlreadyExists")
            if p[:2] == ["api", "v1"] and len(p) == 5 and p[4] == "services":
                key = (p[3], body["metadata"]["name"])
                if key in op.services:
                    return self.send_kube_status(409, "AlreadyExists")
                body["metadata"].update(namespace=p[3], resourceVersion=op.version())
                op.services[key] = body
                op.events.append(f"create Service {key[1]} -> {body['spec'].get('externalName')}")
                return self.send_body(201, body)
            return self._not_found()

    def do_PUT(self) -> None:
        op = self.operator
        p, _ = self._path()
        body = self.read_json()
        with op.lock:
            if tuple(p[:3]) == IEC_PATH and len(p) == 7:
                result = op.replace((p[4], p[6]), body)
                if isinstance(result, int):
                    return self.send_kube_status(result, "Conflict" if result == 409 else "NotFound")
                return self.send_body(200, result)
            return self._not_found()

    def do_PATCH(self) -> None:
        op = self.operator
        p, _ = self._path()
        body = self.read_json()
        with op.lock:
            if p[:2] == ["api", "v1"] and len(p) == 6 and p[4] == "services":
                svc = op.services.get((p[3], p[5]))
                if svc is None:
                    return self._not_found()
                for part in ("metadata", "spec"):
                    for key, value in (body.get(part) or {}).items():
                        if isinstance(value, dict):
                            svc[part].setdefault(key, {}).update(value)
                        else:
                            svc[part][key] = value
                op.events.append(f"patch Service {p[5]} -> {svc['spec'].get('externalName')}")
                return self.send_body(200, svc)
            return self._not_found()

    def do_DELETE(self) -> None:
        op = self.operator
        p, _ = self._path()
        self.read_json()
        with op.lock:
            if tuple(p[:3]) == IEC_PATH and len(p) == 7:
                if not op.delete((p[4], p[6])):
                    return self._not_found()
                return self.send_body(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
            return self._not_found()


@contextmanager
def _serving(server: ThreadingHTTPServer) -> Iterator[str]:
    """:func:`fake_http.serving` with a 20 ms shutdown poll (``serve_forever``'s default, 0.5 s, would be each test's
    wait at the end)."""
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield local_url(server)
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def scheduler_server(operator: Operator, kubeconfig: Path) -> Iterator[str]:
    """Serve ``operator``'s cluster on 127.0.0.1 and write a kubeconfig pointing at it; yields the server URL."""
    handler = type("Handler", (_Handler,), {"cluster": operator.cluster, "operator": operator})
    with _serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        write_kubeconfig(kubeconfig, url)
        yield url


@contextmanager
def revision_server(operator: Operator, name: str, ns: str, behaviour: DecoderBehaviour) -> Iterator[str]:
    """:func:`day2_fakes.openai_server` for revision ``name`` of the endpoint in ``ns`` (its decoder: the first decode
    pod the operator makes for it), served by :func:`_serving`; yields its
    ``/v1/chat/completions`` URL. ``behaviour``: how its decoder logs the transfer."""
    decode = (ns, f"decode-{name}-{FIRST_POD['decode'][0]}-{FIRST_POD['decode'][1]}", f"decode-{name}")
    handler = type("Handler", (_OpenAiHandler,), {"cluster": operator.cluster, "behaviour": behaviour,
                                                  "decode": decode, "router": f"{name}-{ns}-router-6f7d8-klmno",
                                                  "disable_nagle_algorithm": True})
    with _serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield f"{url}/v1/chat/completions"
