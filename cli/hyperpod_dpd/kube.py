"""The Kubernetes side of the command line, through the official ``kubernetes`` client.

Every command connects through :func:`hyperpod_dpd.kubeconfig.api_client`, which refuses a kubeconfig context that
does not talk to this deployment's EKS cluster.

One place turns client failures into one-line :class:`KubeFailure` messages with the fix their status calls for
(no kubeconfig, credential plugin failed, unreachable, 401, 403, 404, 5xx, an HTML page from a load balancer).
Object names come from :mod:`hyperpod_core.names`.

Pods are read through the ``spec.selector`` of the Deployment that runs them (a role's, the router's, the
operator's), never by a name prefix: ``prefill-llama-`` also starts the pods of endpoint ``llama-3-3-70b``. A role's
pods take two more guards, since a selector alone may overlap another Deployment's (the operator's selectors are
unpublished [I]): the published role label ``inference.sagemaker.aws.amazon.com/dpd-role=<role>`` (AWS DPD guide and
ML blog, ``shared/reference/operator.md`` section (e): the operator sets it on the prefill and decode pods) joins the
selector, and only pods owned (``ownerReferences``) by a ReplicaSet the role's Deployment owns count (Kubernetes
docs, "Deployments": a Deployment owns its ReplicaSets, a ReplicaSet its pods). Each role pod carries what the skew
guard (:mod:`hyperpod_dpd.skew`) compares: the image, ``--model`` and ``--served-model-name`` of its vLLM container
and its ``pod-template-hash``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException as ApiException  # re-exported: the one Kubernetes layer

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import (
    GROUP,
    OPERATOR_CONTAINER,
    OPERATOR_DEPLOYMENTS,
    OPERATOR_NAMESPACE,
    PLURAL,
    ROLE_LABEL,
    ROLES,
    ROUTER_CONTAINER,
    VERSION,
    EndpointNames,
    Role,
)
from hyperpod_dpd.aws import one_line
from hyperpod_dpd.vllm_args import model_arg, served_name_arg

#: The ModelWeightsCacheConfig CRD of operator v3.3 (shared/crds/v3.3/modelweightscacheconfigs.yaml; group and
#: version as the InferenceEndpointConfig's).
WEIGHTS_CACHE_PLURAL = "modelweightscacheconfigs"
#: Seconds to connect / read one API response; a dead API server fails fast instead of hanging.
REQUEST_TIMEOUT = (5, 30)
#: The label the Deployment controller adds to each ReplicaSet of a Deployment and to its pods: the hash of the pod
#: template they run (Kubernetes docs, "Deployments", section "Pod-template-hash label").
POD_TEMPLATE_HASH = "pod-template-hash"
#: The rollout sequence number the Deployment controller writes on a Deployment and on each of its ReplicaSets
#: (kubernetes/kubernetes ``pkg/controller/deployment/util/deployment_util.go``, ``RevisionAnnotation``: "the
#: revision annotation of a deployment's replica sets which records its rollout sequence"; Kubernetes docs,
#: "Deployments": ``kubectl describe deployments`` shows ``deployment.kubernetes.io/revision=2`` after an update).
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
#: The extended resource the NVIDIA device plugin advertises (what the role pods ask for and nodes report as
#: allocatable); a container asks for GPUs in its limits (Kubernetes docs, "Schedule GPUs": "GPUs are only supposed
#: to be specified in the limits section"; a request, if any, must equal the limit).
GPU_RESOURCE: Final = "nvidia.com/gpu"


@dataclass(frozen=True, kw_only=True)
class PodTarget:
    """A pod and the container to read the log of (for a role pod: what that container runs)."""

    namespace: str
    pod: str
    container: str
    ready: bool
    image: str = ""
    """The container's image in the pod spec ("" when the pod has no such container)."""
    model: str = ""
    """The model vLLM serves, from the container's command line: the model path (:func:`model_arg`); "" when it
    cannot be read (unknown, never a match)."""
    served_name: str = ""
    """vLLM's ``--served-model-name`` (its first value): the name clients send; "" when there is none."""
    template_hash: str = ""
    """The pod's ``pod-template-hash`` label: which pod template of its Deployment it runs."""
    terminating: bool = False
    """``metadata.deletionTimestamp`` is set: the pod is on its way out (a finished rollout's old pod)."""
    gpus: int = 0
    """GPUs the pod holds now (:func:`pod_gpus`)."""


@dataclass(frozen=True, kw_only=True)
class RoleWorkers:
    """One DPD role as its Deployment runs it: the revision and the pods."""

    role: Role
    deployment: str
    """``<role>-<iec>`` (:meth:`hyperpod_core.names.EndpointNames.role_deployment`)."""
    found: bool
    """The Deployment exists."""
    revision: str
    """The Deployment's :data:`REVISION_ANNOTATION` ("" when unset)."""
    revisions: dict[str, str]
    """``pod-template-hash`` -> revision, from the ReplicaSets the Deployment owns."""
    pods: list[PodTarget]


@dataclass(frozen=True, kw_only=True)
class NodeState:
    """A node as scheduling sees it."""

    name: str
    labels: dict[str, str]
    ready: bool
    """The ``Ready`` condition is ``True``."""
    taints: tuple[tuple[str, str, str], ...]
    """``(key, value, effect)`` of each taint."""
    cordoned: bool
    """``spec.unschedulable``."""


class KubeFailure(CommandFailed):
    """A Kubernetes failure as one line with its fix (exit 1)."""

    def __init__(self, message: str, *, fix: str = "", status: int | None = None) -> None:
        self.fix, self.status, self.summary = fix, status, message
        super().__init__(message + (f"; fix: {fix}" if fix else ""))


def api_message(exc: ApiException) -> tuple[str, bool]:
    """One line from an API error's body: the ``Status`` message of the API server, the title of an HTML page (a
    load balancer or proxy in front of it), else the HTTP reason."""
    body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("message"):
        return one_line(str(status["message"]))[0], False
    if body.strip():
        return one_line(body)
    return str(exc.reason or ""), False


@contextmanager
def kube_errors(action: str) -> Iterator[None]:
    """Turn Kubernetes client failures while doing ``action`` into one-line :class:`KubeFailure` with the fix that
    the HTTP status (or the connection error) calls for."""
    try:
        yield
    except ApiException as exc:
        message, is_html = api_message(exc)
        code = f"{exc.status} {exc.reason}".strip()
        if is_html:
            raise KubeFailure(f"{action}: Kubernetes API {code}: an HTML page answered: {message}", status=exc.status,
                              fix="a load balancer or proxy answered instead of the API server: check the context's "
                                  "server and the network path to it, then run it again") from None
        detail = f"{action}: Kubernetes API {code}" + (f": {message}" if message and message != exc.reason else "")
        if exc.status == 401:
            raise KubeFailure(detail, status=401, fix="the API server rejected the credentials: aws sso login (or "
                                                      "check that AWS_PROFILE is a principal the cluster admits)"
                              ) from None
        if exc.status == 403:
            raise KubeFailure(detail, status=403, fix="check the EKS access entry of your IAM principal "
                                                      "(eks.admin_principal_arn or the AdminPrincipalArn parameter)"
                              ) from None
        if exc.status == 404:
            raise KubeFailure(detail, status=404, fix="is the amazon-sagemaker-hyperpod-inference add-on installed? "
                                                      "('hyperpod-dpd status')") from None
        if exc.status == 429 or (exc.status or 0) >= 500:
            raise KubeFailure(detail, status=exc.status, fix="the API server is overloaded or unavailable: run it "
                                                             "again in a minute") from None
        raise KubeFailure(detail, status=exc.status) from None
    except urllib3.exceptions.SSLError:
        raise KubeFailure(f"{action}: TLS verification of the Kubernetes API server failed",
                          fix="the kubeconfig's certificate-authority-data is not this cluster's: run aws eks "
                              "update-kubeconfig again") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeFailure(f"{action}: Kubernetes API unreachable ({type(exc).__name__})",
                          fix="check network access to the context's server (a private endpoint needs a VPN or "
                              "bastion in the VPC)") from None


def request(action: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a call of one of :class:`Kube`'s API clients, with :data:`REQUEST_TIMEOUT`; a failure
    becomes one line (:func:`kube_errors`)."""
    with kube_errors(action):
        return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)


def read_or_none(action: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """:func:`request` for a read; ``None`` when the object, or its kind, does not exist (404)."""
    with kube_errors(action):
        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


def pod_ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def quantity(value: Any) -> int:
    """A whole count from a resource quantity as the client returns it (``"8"``, ``8``); 0 for anything else."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def container_gpus(container: Any) -> int:
    """GPUs a container asks for: its :data:`GPU_RESOURCE` request, else its limit (for an extended resource
    Kubernetes sets a pod's request to the limit when only the limit is given; a pod template is not defaulted so)."""
    resources = container.resources
    if resources is None:
        return 0
    for side in (resources.requests, resources.limits):
        if side and GPU_RESOURCE in side:
            return quantity(side[GPU_RESOURCE])
    return 0


def pod_spec_gpus(spec: Any) -> int:
    """GPUs a pod of ``spec`` (a pod's, or a pod template's) asks for: the sum of its containers'
    (:func:`container_gpus`), or its largest init container's when that is more (Kubernetes docs, "Init
    Containers", "Resource sharing within containers": the pod's effective request is the higher of the two)."""
    return max(sum(container_gpus(c) for c in spec.containers or []),
               max((container_gpus(c) for c in spec.init_containers or []), default=0))


def pod_gpus(pod: Any) -> int:
    """GPUs ``pod`` holds: none until the scheduler binds it to a node (``spec.nodeName``) and none once it finished
    (phase ``Succeeded``/``Failed``); else what its spec asks for (:func:`pod_spec_gpus`)."""
    spec = pod.spec
    if spec is None or not spec.node_name or (pod.status and pod.status.phase in ("Succeeded", "Failed")):
        return 0
    return pod_spec_gpus(spec)


def label_selector(selector: Any) -> str:
    """A Deployment's ``spec.selector`` (``matchLabels`` and ``matchExpressions``) in the ``labelSelector`` syntax
    of the list calls (Kubernetes docs, "Labels and Selectors": equality-based and set-based requirements)."""
    if selector is None:
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.match_labels or {}).items())]
    for e in selector.match_expressions or []:
        values = ",".join(e.values or [])
        terms.append({"In": f"{e.key} in ({values})", "NotIn": f"{e.key} notin ({values})", "Exists": e.key,
                      "DoesNotExist": f"!{e.key}"}[e.operator])
    return ",".join(terms)


def model_source_key(source: Any) -> tuple[str, ...] | None:
    """What identifies a ``modelSourceConfig`` (CRD: ``modelSourceType`` and the location inside the bucket, file
    system or Hugging Face repository), ``None`` for none; a trailing ``/`` of ``modelLocation`` does not count."""
    if not isinstance(source, dict) or not source.get("modelSourceType"):
        return None
    s3, fsx, hf = (source.get(k) or {} for k in ("s3Storage", "fsxStorage", "huggingFaceModel"))
    return (str(source["modelSourceType"]), str(source.get("modelLocation") or "").strip("/"),
            str(s3.get("bucketName") or ""), str(fsx.get("fileSystemId") or ""), str(hf.get("modelId") or ""),
            str(hf.get("commitSHA") or ""))


def _vllm_container(pod: Any, name: str) -> Any:
    """The container ``name`` of the pod; else the one whose command line has ``--model`` (the container name is
    [I]: :mod:`hyperpod_core.names`); ``None`` when neither exists."""
    containers = (pod.spec.containers if pod.spec else None) or []
    return (next((c for c in containers if c.name == name), None)
            or next((c for c in containers if model_arg(c)), None))


def _target(pod: Any, namespace: str, container: str) -> PodTarget:
    spec = _vllm_container(pod, container)
    return PodTarget(namespace=namespace, pod=pod.metadata.name, container=container, ready=pod_ready(pod),
                     image=(spec.image or "") if spec is not None else "",
                     model=model_arg(spec) if spec is not None else "",
                     served_name=served_name_arg(spec) if spec is not None else "",
                     template_hash=(pod.metadata.labels or {}).get(POD_TEMPLATE_HASH, ""),
                     terminating=pod.metadata.deletion_timestamp is not None, gpus=pod_gpus(pod))


def role_selector(selector: str, role: Role) -> str:
    """The role Deployment's ``selector`` with the published role label added (module docstring), unless the selector
    names that label already."""
    return selector if ROLE_LABEL in selector else f"{selector},{ROLE_LABEL}={role}"


def _owned_by(meta: Any, kind: str, names: dict[str, str]) -> bool:
    """``meta``'s ``ownerReferences`` name an object of ``kind`` among ``names`` (name -> uid; a uid is compared when
    both sides have one)."""
    return any(r.kind == kind and r.name in names and (not r.uid or not names[r.name] or r.uid == names[r.name])
               for r in meta.owner_references or [])


class Kube:
    """The command line's one access to Kubernetes: the official client's API groups it uses, and the few reads the
    day-2 commands need (``bench`` adds its own calls on the same clients: :mod:`hyperpod_dpd.benchmark.kube`)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.apps = k8s.AppsV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.networking = k8s.NetworkingV1Api(api)
        self.batch = k8s.BatchV1Api(api)
        self.autoscaling = k8s.AutoscalingV2Api(api)

    def nodes(self, label_key: str) -> list[NodeState]:
        """Every node carrying ``label_key`` (any value), sorted by name."""
        items = self.core.list_node(label_selector=label_key, _request_timeout=REQUEST_TIMEOUT).items
        out = []
        for n in items:
            conditions = (n.status.conditions if n.status else None) or []
            taints = (n.spec.taints if n.spec else None) or []
            out.append(NodeState(
                name=n.metadata.name, labels=dict(n.metadata.labels or {}),
                ready=any(c.type == "Ready" and c.status == "True" for c in conditions),
                taints=tuple((t.key or "", t.value or "", t.effect or "") for t in taints),
                cordoned=bool(n.spec and n.spec.unschedulable)))
        return sorted(out, key=lambda node: node.name)

    def endpoint(self, names: EndpointNames) -> dict[str, Any] | None:
        """The InferenceEndpointConfig, or ``None`` when it does not exist."""
        try:
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, names.namespace, PLURAL, names.name, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    def endpoints(self) -> list[dict[str, Any]] | None:
        """Every InferenceEndpointConfig of the cluster, all namespaces, sorted by namespace and name; ``None`` when
        the cluster has no such CRD (no operator)."""
        try:
            listed: dict[str, Any] = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL,
                                                                            _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        items: list[dict[str, Any]] = listed.get("items") or []
        return sorted(items, key=lambda o: ((o.get("metadata") or {}).get("namespace") or "",
                                            (o.get("metadata") or {}).get("name") or ""))

    def gpus_held(self, names: EndpointNames, *, dpd: bool) -> int:
        """GPUs the endpoint's pods hold now (:attr:`PodTarget.gpus`): those of its role Deployments (``dpd``: the
        InferenceEndpointConfig has ``pdSpec``), else those labelled ``app=<iec>`` (a colocated endpoint's)."""
        pods = [p for role in ROLES for p in self.role_pods(names, role)] if dpd else self.app_pods(names)
        return sum(p.gpus for p in pods)

    def weights_caches(self, names: EndpointNames, model_source: dict[str, Any] | None = None
                       ) -> list[dict[str, Any]] | None:
        """The operator's ModelWeightsCacheConfig objects for the endpoint (operator v3.3; the operator creates them
        for ``modelCacheConfig.weightsCache``), or ``None`` when the cluster has no such CRD (an older operator).

        Which objects are the endpoint's is not published [I]: those owned by the InferenceEndpointConfig
        (``ownerReferences``); else, among those no InferenceEndpointConfig owns, the ones caching the endpoint's
        ``model_source`` (its ``spec.modelSourceConfig``; the CRD's ``spec.modelSourceConfig`` is "the model source
        to cache"). Never by name: a name starting with ``llama`` may be endpoint ``llama-3-3-70b``'s.
        """
        try:
            listed: dict[str, Any] = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, names.namespace, WEIGHTS_CACHE_PLURAL, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        items = listed.get("items") or []

        def owners(o: dict[str, Any]) -> list[str]:
            return [str(r.get("name")) for r in (o.get("metadata") or {}).get("ownerReferences") or []
                    if r.get("kind") == "InferenceEndpointConfig"]

        owned = [o for o in items if names.name in owners(o)]
        want = model_source_key(model_source)
        same_model = [o for o in items if not owners(o) and want is not None
                      and model_source_key((o.get("spec") or {}).get("modelSourceConfig")) == want]
        return owned or same_model

    def role_workers(self, names: EndpointNames, role: Role) -> RoleWorkers:
        """The role's Deployment (``<role>-<iec>``), its revision, the revision of each of its pod templates (the
        ReplicaSets it owns) and its pods (:meth:`_role`)."""
        deployment = names.role_deployment(role)
        found = self._role(names, role)
        if found is None:
            return RoleWorkers(role=role, deployment=deployment, found=False, revision="", revisions={}, pods=[])
        d, sets, pods = found
        revisions = {(rs.metadata.labels or {}).get(POD_TEMPLATE_HASH, ""):
                     (rs.metadata.annotations or {}).get(REVISION_ANNOTATION, "") for rs in sets}
        return RoleWorkers(role=role, deployment=deployment, found=True,
                           revision=((d.metadata.annotations or {}).get(REVISION_ANNOTATION, "")),
                           revisions=revisions, pods=pods)

    def role_pods(self, names: EndpointNames, role: Role) -> list[PodTarget]:
        """The pods of the role's Deployment ``<role>-<iec>`` (:meth:`_role`); none while it does not exist."""
        found = self._role(names, role)
        return found[2] if found is not None else []

    def _role(self, names: EndpointNames, role: Role) -> tuple[Any, list[Any], list[PodTarget]] | None:
        """Deployment ``<role>-<iec>``, the ReplicaSets it owns, and their pods that its selector and the role label
        select (module docstring), sorted by name; ``None`` when the Deployment does not exist."""
        deployment = names.role_deployment(role)
        found = self._deployment(names.namespace, deployment)
        if found is None:
            return None
        d, selector = found
        if not selector:
            return d, [], []
        sets = [rs for rs in self.apps.list_namespaced_replica_set(names.namespace, label_selector=selector,
                                                                    _request_timeout=REQUEST_TIMEOUT).items
                if _owned_by(rs.metadata, "Deployment", {deployment: d.metadata.uid or ""})]
        owned = {rs.metadata.name: rs.metadata.uid or "" for rs in sets}
        pods = [_target(p, names.namespace, names.container(role))
                for p in self._selected_pods(names.namespace, role_selector(selector, role))
                if _owned_by(p.metadata, "ReplicaSet", owned)]
        return d, sets, sorted(pods, key=lambda t: t.pod)

    def app_pods(self, names: EndpointNames) -> list[PodTarget]:
        """Pods labelled ``app=<iec>`` (a colocated endpoint's); the container is the endpoint's name (I)."""
        pods = self.core.list_namespaced_pod(names.namespace, label_selector=f"app={names.name}",
                                             _request_timeout=REQUEST_TIMEOUT).items
        return sorted((PodTarget(namespace=names.namespace, pod=p.metadata.name, container=names.name,
                                 ready=pod_ready(p), gpus=pod_gpus(p)) for p in pods), key=lambda t: t.pod)

    def router_pods(self, names: EndpointNames) -> list[PodTarget]:
        """The pods of the router Deployment ``<iec>-<ns>-router`` in ``hyperpod-inference-system``, by its own
        selector; none while it does not exist."""
        found = self._deployment(OPERATOR_NAMESPACE, names.router_deployment)
        if found is None:
            return []
        return sorted((PodTarget(namespace=OPERATOR_NAMESPACE, pod=p.metadata.name, container=ROUTER_CONTAINER,
                                 ready=pod_ready(p)) for p in self._selected_pods(OPERATOR_NAMESPACE, found[1])),
                      key=lambda t: t.pod)

    def operator_pods(self) -> list[PodTarget]:
        """Pods of the operator Deployment (add-on name, else the Helm name), selected by its own selector."""
        for deployment in OPERATOR_DEPLOYMENTS:
            found = self._deployment(OPERATOR_NAMESPACE, deployment)
            if found is None:
                continue
            return sorted((PodTarget(namespace=OPERATOR_NAMESPACE, pod=p.metadata.name,
                                     container=OPERATOR_CONTAINER, ready=pod_ready(p))
                           for p in self._selected_pods(OPERATOR_NAMESPACE, found[1])), key=lambda t: t.pod)
        raise CommandFailed(f"no operator Deployment ({' or '.join(OPERATOR_DEPLOYMENTS)}) in {OPERATOR_NAMESPACE}; "
                            "is the amazon-sagemaker-hyperpod-inference add-on installed?")

    def _deployment(self, namespace: str, name: str) -> tuple[Any, str] | None:
        """Deployment ``name`` and its selector (:func:`label_selector`), or ``None`` when it does not exist."""
        try:
            d = self.apps.read_namespaced_deployment(name, namespace, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return d, label_selector(d.spec.selector if d.spec else None)

    def _selected_pods(self, namespace: str, selector: str) -> list[Any]:
        """The pods ``selector`` selects; none for an empty selector, which would select every pod (apps/v1 rejects
        a Deployment without one: this is a guard, not a case)."""
        if not selector:
            return []
        items: list[Any] = self.core.list_namespaced_pod(namespace, label_selector=selector,
                                                         _request_timeout=REQUEST_TIMEOUT).items
        return items

    def load_balancer_hosts(self, names: EndpointNames) -> list[str]:
        """Hostnames of the ALB on the operator's Ingress for the endpoint (``names.ingress`` in
        ``hyperpod-inference-system``: :mod:`hyperpod_core.names`); none while it does not exist."""
        try:
            ing = self.networking.read_namespaced_ingress(names.ingress, OPERATOR_NAMESPACE,
                                                          _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise
        lb = ing.status.load_balancer if ing.status else None
        return [entry.hostname for entry in (lb.ingress if lb and lb.ingress else []) if entry.hostname]

    def read_log(self, target: PodTarget, *, since_seconds: int | None = None, tail_lines: int | None = None,
                 timestamps: bool = False, limit_bytes: int | None = None, previous: bool = False) -> list[str]:
        """The container's log lines. ``limit_bytes`` reads the log's first bytes only (Kubernetes ``limitBytes``
        counts from the start): the start-up lines of a long-running worker. ``previous``: the log of the
        container's previous instance (before its last restart)."""
        kwargs: dict[str, Any] = {"container": target.container, "timestamps": timestamps,
                                  "_request_timeout": REQUEST_TIMEOUT}
        if previous:
            kwargs["previous"] = True
        if since_seconds is not None:
            kwargs["since_seconds"] = since_seconds
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        if limit_bytes is not None:
            kwargs["limit_bytes"] = limit_bytes
        # Raw bytes, decoded here: with preloading, client 36.x returns ``str(bytes)`` ("b'...'") for a
        # text/plain log (the generated deserializer has no bytes -> str step for it).
        response = self.core.read_namespaced_pod_log(target.pod, target.namespace, _preload_content=False, **kwargs)
        try:
            data: bytes = response.data
        finally:
            response.release_conn()
        return data.decode("utf-8", errors="replace").splitlines()

    def follow_log(self, target: PodTarget, *, tail_lines: int | None = None, since_seconds: int | None = None,
                   previous: bool = False) -> Iterator[str]:
        """Lines of the log as they arrive (``follow=true``), until the server closes the stream."""
        kwargs: dict[str, Any] = {"container": target.container, "follow": True, "_preload_content": False,
                                  "_request_timeout": (REQUEST_TIMEOUT[0], None)}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        if since_seconds is not None:
            kwargs["since_seconds"] = since_seconds
        if previous:
            kwargs["previous"] = True
        response = self.core.read_namespaced_pod_log(target.pod, target.namespace, **kwargs)
        buffer = b""
        try:
            for chunk in response.stream(4096, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", errors="replace")
            if buffer:
                yield buffer.decode("utf-8", errors="replace")
        finally:
            response.release_conn()
