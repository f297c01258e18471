"""The Kubernetes side of ``rollout``, on the command line's one Kubernetes layer (:mod:`hyperpod_dpd.kube`: the
official client's API groups, the request timeout, one-line errors).

* capacity (:meth:`Cluster.rooms`): every node's allocatable ``nvidia.com/gpu`` and the GPU requests of the pods bound
  to it (``spec.nodeName``; phase neither Succeeded nor Failed, the pods that hold resources), by owner: a pod of a
  ReplicaSet ``<deployment>-<pod-template-hash>`` belongs to that Deployment (Kubernetes docs, "Deployments": "The
  name of a ReplicaSet is [DEPLOYMENT-NAME]-[HASH]"). A pod's GPU request is what its containers request (the
  request, else the limit: Kubernetes sets an extended resource's request to its limit), or the largest init
  container's when that is more (:func:`hyperpod_dpd.kube.pod_gpus`);
* the operator's role Deployments' ``spec.strategy`` (:meth:`Cluster.strategies`);
* the InferenceEndpointConfig: created (POST), replaced in place (PUT with the live ``resourceVersion``), deleted;
  ready when ``status.state`` is ``DeploymentComplete`` for the current generation (CRD status enum); gone when a
  read answers 404 and its role Deployments are gone too (their pods hold the GPUs the next one needs);
* the stable Service ``<endpoint>`` (:mod:`hyperpod_dpd.rollout.address`): created, or patched when it is ours.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import (
    GROUP,
    NODE_HEALTH_TAINT_KEY,
    PLURAL,
    REVISION_LABEL,
    ROLES,
    VERSION,
    EndpointNames,
    Role,
)
from hyperpod_dpd.kube import (
    GPU_RESOURCE,
    REQUEST_TIMEOUT,
    ApiException,
    Kube,
    kube_errors,
    pod_gpus,
    quantity,
    read_or_none,
    request,
)
from hyperpod_dpd.rollout.capacity import NodeRoom, Strategy
from hyperpod_dpd.vllm_args import model_arg, model_of_argv

#: When the operator reports no ``status.observedGeneration``, a state older than the last apply cannot be told from
#: a new one; wait this long after an apply before trusting it (as ``bench`` does).
UNOBSERVED_GRACE_SECONDS: Final = 60.0
#: Taints no worker pod tolerates: HyperPod's deep health checks, and the node lifecycle controller's (Kubernetes docs,
#: "Taints and Tolerations", taint-based evictions).
BLOCKING_TAINTS: Final = frozenset({NODE_HEALTH_TAINT_KEY, "node.kubernetes.io/unschedulable",
                                    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


def endpoint_deployments(namespace: str, name: str, obj: dict[str, Any] | None) -> list[str]:
    """The Deployments that run InferenceEndpointConfig ``namespace/name``: each DPD role's
    (:meth:`EndpointNames.role_deployment`), and the one a colocated endpoint's ``status.deploymentStatus.name`` names
    (CRD v3.3) when ``obj`` (the live object) is given."""
    names = EndpointNames(name=name, namespace=namespace)
    out = [names.role_deployment(role) for role in ROLES]
    colocated = ((obj or {}).get("status") or {}).get("deploymentStatus") or {}
    if colocated.get("name") and str(colocated["name"]) not in out:
        out.append(str(colocated["name"]))
    return out


def pod_owner(pod: Any) -> str:
    """``<namespace>/<Deployment>`` for a Deployment's pod (module docstring), else ``<namespace>/<pod>``."""
    meta = pod.metadata
    template_hash = (meta.labels or {}).get("pod-template-hash", "")
    for ref in meta.owner_references or []:
        if ref.kind == "ReplicaSet" and template_hash and ref.name.endswith(f"-{template_hash}"):
            return f"{meta.namespace}/{ref.name[:-len(template_hash) - 1]}"
    return f"{meta.namespace}/{meta.name}"


class Cluster:
    """The reads and writes of a rollout; every API error becomes one :class:`CommandFailed` line."""

    def __init__(self, kube: Kube, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, poll_seconds: float = 10.0) -> None:
        self.kube = kube
        self.sleep, self.clock, self.poll_seconds = sleep, clock, poll_seconds

    # --- capacity ----------------------------------------------------------------------------------------------

    def rooms(self) -> list[NodeRoom]:
        """Every node with GPUs, with the GPUs its bound pods hold (module docstring)."""
        nodes = request("listing the nodes", self.kube.core.list_node).items
        pods = request("listing the pods of every namespace", self.kube.core.list_pod_for_all_namespaces,
                       field_selector="status.phase!=Succeeded,status.phase!=Failed").items
        held: dict[str, dict[str, int]] = {}
        for pod in pods:
            gpus = pod_gpus(pod)  # none for a pod not bound, or finished
            if gpus:
                owners = held.setdefault(pod.spec.node_name, {})
                owners[pod_owner(pod)] = owners.get(pod_owner(pod), 0) + gpus
        rooms = []
        for n in nodes:
            allocatable = quantity(((n.status.allocatable if n.status else None) or {}).get(GPU_RESOURCE, 0))
            if not allocatable:
                continue
            conditions = (n.status.conditions if n.status else None) or []
            ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
            taints = (n.spec.taints if n.spec else None) or []
            blocked = any(t.key in BLOCKING_TAINTS and t.effect in ("NoSchedule", "NoExecute") for t in taints)
            rooms.append(NodeRoom(name=n.metadata.name, labels=dict(n.metadata.labels or {}), allocatable=allocatable,
                                  held=held.get(n.metadata.name, {}),
                                  schedulable=ready and not blocked and not (n.spec and n.spec.unschedulable)))
        return sorted(rooms, key=lambda r: r.name)

    def strategies(self, names: EndpointNames) -> dict[Role, Strategy | None]:
        """Each role Deployment's ``spec.strategy`` (``None`` where the Deployment does not exist)."""
        out: dict[Role, Strategy | None] = {}
        for role in ROLES:
            name = names.role_deployment(role)
            d = read_or_none(f"reading Deployment {names.namespace}/{name}", self.kube.apps.read_namespaced_deployment,
                             name, names.namespace)
            if d is None:
                out[role] = None
                continue
            strategy = d.spec.strategy
            rolling = strategy.rolling_update if strategy is not None else None
            out[role] = Strategy(deployment=name, type=(strategy.type if strategy and strategy.type else
                                                        "RollingUpdate"),
                                 replicas=int(d.spec.replicas if d.spec.replicas is not None else 1),
                                 max_surge=rolling.max_surge if rolling else None,
                                 max_unavailable=rolling.max_unavailable if rolling else None)
        return out

    # --- the endpoint ------------------------------------------------------------------------------------------

    def endpoint(self, namespace: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = read_or_none(
            f"reading InferenceEndpointConfig {namespace}/{name}", self.kube.custom.get_namespaced_custom_object,
            GROUP, VERSION, namespace, PLURAL, name)
        return found

    def create(self, doc: dict[str, Any]) -> None:
        """Create the InferenceEndpointConfig; one that exists already with this spec (a resumed step) is kept."""
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        with kube_errors(f"creating InferenceEndpointConfig {ns}/{name}"):
            try:
                self.kube.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, doc,
                                                                  _request_timeout=REQUEST_TIMEOUT)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        live = self.endpoint(ns, name) or {}
        if ((live.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL) != \
                doc["metadata"]["labels"].get(REVISION_LABEL):
            raise CommandFailed(f"InferenceEndpointConfig {ns}/{name} exists already and is not this revision; delete "
                                f"it (kubectl delete inferenceendpointconfig -n {ns} {name}) or run rollout --undo")

    def update(self, doc: dict[str, Any]) -> None:
        """Replace the live InferenceEndpointConfig's spec in place (PUT with its ``resourceVersion``)."""
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        live = self.endpoint(ns, name)
        if live is None:
            raise CommandFailed(f"InferenceEndpointConfig {ns}/{name} is gone; run rollout --undo, or rollout again")
        body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}}
        request(f"replacing InferenceEndpointConfig {ns}/{name}", self.kube.custom.replace_namespaced_custom_object,
                GROUP, VERSION, ns, PLURAL, name, body)

    def delete(self, namespace: str, name: str) -> None:
        """Delete the InferenceEndpointConfig (gone already is fine)."""
        read_or_none(f"deleting InferenceEndpointConfig {namespace}/{name}",
                     self.kube.custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name)

    def wait_ready(self, namespace: str, name: str, timeout_s: float, on_wait: Callable[[str], None], *,
                   rolled: dict[str, Any] | None = None) -> None:
        """Until the InferenceEndpointConfig is ``DeploymentComplete`` for its current generation; ``rolled`` (the
        target spec of an in-place change): also until both role Deployments run its image and ``--model`` on every
        replica, with no pod of another template left (their rollouts finished)."""
        start = self.clock()
        last = ""
        while True:
            obj = self.endpoint(namespace, name) or {}
            status = obj.get("status") or {}
            state = str(status.get("state") or "unset")
            if "observedGeneration" in status:
                current = status["observedGeneration"] >= (obj.get("metadata") or {}).get("generation", 0)
            else:
                current = self.clock() - start >= UNOBSERVED_GRACE_SECONDS
            if not obj:
                raise CommandFailed(f"InferenceEndpointConfig {namespace}/{name} is gone")
            pending = self._unrolled(EndpointNames(name=name, namespace=namespace), rolled) if rolled else []
            if state == "DeploymentComplete" and current and not pending:
                return
            if state == "DeploymentFailed" and current:
                message = ((status.get("conditions") or [{}])[0]).get("message", "")
                raise CommandFailed(f"InferenceEndpointConfig {namespace}/{name} DeploymentFailed: {message}"
                                    .rstrip(": "))
            now = f"{state}" + (f"; {'; '.join(pending)}" if pending else "")
            if self.clock() - start > timeout_s:
                raise CommandFailed(f"InferenceEndpointConfig {namespace}/{name} not ready after {timeout_s:.0f} s "
                                    f"({now}); 'hyperpod-dpd status' shows why")
            if now != last:
                on_wait(now)
                last = now
            self.sleep(self.poll_seconds)

    def _unrolled(self, names: EndpointNames, target: dict[str, Any]) -> list[str]:
        """What keeps an in-place change from being finished, per role (empty: both roles run the target)."""
        image = str((target.get("worker") or {}).get("image") or "")
        model = model_of_argv([str(a) for a in (target.get("worker") or {}).get("args") or []])
        out = []
        for role in ROLES:
            name = names.role_deployment(role)
            d = read_or_none(f"reading Deployment {names.namespace}/{name}", self.kube.apps.read_namespaced_deployment,
                             name, names.namespace)
            if d is None:
                out.append(f"{name} not found")
                continue
            containers = d.spec.template.spec.containers or []
            vllm = next((c for c in containers if c.name == names.container(role)), None) or next(
                (c for c in containers if model_arg(c)), None)
            st, want = d.status, int(d.spec.replicas if d.spec.replicas is not None else 1)
            if vllm is None or (image and vllm.image != image) or (model and model_arg(vllm) != model):
                out.append(f"{name} does not run the new template yet")
            elif (st is None or (st.observed_generation or 0) < (d.metadata.generation or 0)
                  or (st.updated_replicas or 0) < want or (st.ready_replicas or 0) < want or (st.replicas or 0) > want):
                out.append(f"{name} {st.updated_replicas or 0 if st else 0}/{want} updated, "
                           f"{st.ready_replicas or 0 if st else 0} ready, {st.replicas or 0 if st else 0} pods")
        return out

    def wait_gone(self, namespace: str, name: str, timeout_s: float, on_wait: Callable[[str], None]) -> None:
        """Until the InferenceEndpointConfig and its Deployments are gone (their pods release the GPUs): the role
        Deployments of a DPD endpoint, the Deployment a colocated one's ``status.deploymentStatus.name`` names (CRD
        v3.3), as long as the object could be read."""
        start = self.clock()
        deployments = endpoint_deployments(namespace, name, None)
        last = ""
        while True:
            obj = self.endpoint(namespace, name)
            deployments += [d for d in endpoint_deployments(namespace, name, obj) if d not in deployments]
            left = [d for d in deployments if read_or_none(
                f"reading Deployment {namespace}/{d}", self.kube.apps.read_namespaced_deployment, d, namespace)]
            if obj is None and not left:
                return
            now = (f"{(obj.get('status') or {}).get('state') or 'deleting'}" if obj else "deleted") + (
                f"; {', '.join(left)} still there" if left else "")
            if self.clock() - start > timeout_s:
                raise CommandFailed(f"InferenceEndpointConfig {namespace}/{name} not gone after {timeout_s:.0f} s "
                                    f"({now})")
            if now != last:
                on_wait(now)
                last = now
            self.sleep(self.poll_seconds)

    def replace(self, doc: dict[str, Any], timeout_s: float, on_wait: Callable[[str], None]) -> None:
        """Replace the InferenceEndpointConfig of ``doc``'s name by ``doc``: delete it, wait until it and its
        Deployments are gone, apply ``doc``, wait until it is ready. The rollout's replace (its steps ``remove``,
        ``apply``, ``ready``), and ``bench``'s switch between its layouts: never both specs' pods at once, so no pod
        waits for GPUs the old one holds (an in-place change does, on a pool without a free node: the fourth review's
        k8s defect 1)."""
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        self.delete(ns, name)
        self.wait_gone(ns, name, timeout_s, on_wait)
        self.create(doc)
        self.wait_ready(ns, name, timeout_s, on_wait)

    # --- the stable Service ------------------------------------------------------------------------------------

    def service(self, namespace: str, name: str) -> Any:
        return read_or_none(f"reading Service {namespace}/{name}", self.kube.core.read_namespaced_service, name,
                            namespace)

    def put_service(self, body: dict[str, Any]) -> None:
        """Create the Service, or patch it (ours: :func:`hyperpod_dpd.rollout.address.ours` was checked)."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if self.service(ns, name) is None:
            request(f"creating Service {ns}/{name}", self.kube.core.create_namespaced_service, ns, body)
        else:
            request(f"patching Service {ns}/{name}", self.kube.core.patch_namespaced_service, name, ns,
                    {"metadata": {"labels": body["metadata"]["labels"],
                                  "annotations": body["metadata"]["annotations"]},
                     "spec": {"externalName": body["spec"]["externalName"]}})
