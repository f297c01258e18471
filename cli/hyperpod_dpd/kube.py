"""The Kubernetes side of the command line, through the official ``kubernetes`` client.

One place turns client failures into one-line :class:`CommandFailed` messages (no kubeconfig, API server
unreachable, forbidden), with what to do next. Object names come from :mod:`hyperpod_core.names`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException, kube_config

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import (
    GROUP,
    OPERATOR_CONTAINER,
    OPERATOR_DEPLOYMENTS,
    OPERATOR_NAMESPACE,
    PLURAL,
    ROUTER_CONTAINER,
    VERSION,
    EndpointNames,
    Role,
)

#: The ModelWeightsCacheConfig CRD of operator v3.3 (shared/crds/v3.3/modelweightscacheconfigs.yaml; group and
#: version as the InferenceEndpointConfig's).
WEIGHTS_CACHE_PLURAL = "modelweightscacheconfigs"
#: Seconds to connect / read one API response; a dead API server fails fast instead of hanging.
REQUEST_TIMEOUT = (5, 30)


@dataclass(frozen=True, kw_only=True)
class PodTarget:
    """A pod and the container to read the log of."""

    namespace: str
    pod: str
    container: str
    ready: bool


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


def connect(kubeconfig: str | None, context: str | None, *, eks_cluster: str, region: str) -> Kube:
    """A client for the cluster of ``kubeconfig`` (default ``$KUBECONFIG`` or ``~/.kube/config``)."""
    try:
        api = kube_config.new_client_from_config(config_file=kubeconfig, context=context, persist_config=False)
    except (ConfigException, OSError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CommandFailed(f"no usable kubeconfig ({detail}); run 'aws eks update-kubeconfig --name "
                            f"{eks_cluster} --region {region}' or pass --kubeconfig") from None
    api.configuration.retries = 1
    return Kube(api)


@contextmanager
def kube_errors(action: str) -> Iterator[None]:
    """Turn Kubernetes client failures while doing ``action`` into one-line :class:`CommandFailed`."""
    try:
        yield
    except ApiException as exc:
        if exc.status in (401, 403):
            raise CommandFailed(f"{action}: Kubernetes API refused ({exc.status} {exc.reason}); check the EKS "
                                "access entry of your IAM principal") from None
        raise CommandFailed(f"{action}: Kubernetes API error {exc.status} {exc.reason}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise CommandFailed(f"{action}: Kubernetes API unreachable ({type(exc).__name__}); check the kubeconfig "
                            "context and network access to the cluster endpoint") from None


def pod_ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


class Kube:
    """The few reads the day-2 commands need."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.core = k8s.CoreV1Api(api)
        self.apps = k8s.AppsV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.networking = k8s.NetworkingV1Api(api)

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

    def weights_caches(self, names: EndpointNames) -> list[dict[str, Any]] | None:
        """The operator's ModelWeightsCacheConfig objects for the endpoint (operator v3.3; the operator creates them
        for ``modelCacheConfig.weightsCache``), or ``None`` when the cluster has no such CRD (an older operator).

        Which objects are the endpoint's is not published [I]: those owned by the InferenceEndpointConfig
        (``ownerReferences``), else those named after it, in its namespace.
        """
        try:
            listed: dict[str, Any] = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, names.namespace, WEIGHTS_CACHE_PLURAL, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        items = listed.get("items") or []
        owned = [o for o in items if any(r.get("kind") == "InferenceEndpointConfig" and r.get("name") == names.name
                                         for r in (o.get("metadata") or {}).get("ownerReferences") or [])]
        named = [o for o in items if str((o.get("metadata") or {}).get("name", "")).startswith(names.name)]
        return owned or named

    def role_pods(self, names: EndpointNames, role: Role) -> list[PodTarget]:
        pods = self.core.list_namespaced_pod(names.namespace, label_selector=names.role_selector(role),
                                             _request_timeout=REQUEST_TIMEOUT).items
        return sorted((PodTarget(namespace=names.namespace, pod=p.metadata.name, container=names.container(role),
                                 ready=pod_ready(p))
                       for p in pods if names.is_role_pod(role, p.metadata.name)), key=lambda t: t.pod)

    def app_pods(self, names: EndpointNames) -> list[PodTarget]:
        """Pods labelled ``app=<iec>`` (a colocated endpoint's); the container is the endpoint's name (I)."""
        pods = self.core.list_namespaced_pod(names.namespace, label_selector=f"app={names.name}",
                                             _request_timeout=REQUEST_TIMEOUT).items
        return sorted((PodTarget(namespace=names.namespace, pod=p.metadata.name, container=names.name,
                                 ready=pod_ready(p)) for p in pods), key=lambda t: t.pod)

    def router_pods(self, names: EndpointNames) -> list[PodTarget]:
        pods = self.core.list_namespaced_pod(OPERATOR_NAMESPACE, _request_timeout=REQUEST_TIMEOUT).items
        return sorted((PodTarget(namespace=OPERATOR_NAMESPACE, pod=p.metadata.name, container=ROUTER_CONTAINER,
                                 ready=pod_ready(p))
                       for p in pods if p.metadata.name.startswith(names.router_pod_prefix)), key=lambda t: t.pod)

    def operator_pods(self) -> list[PodTarget]:
        """Pods of the operator Deployment (add-on name, else the Helm name), selected by its own selector."""
        for deployment in OPERATOR_DEPLOYMENTS:
            try:
                d = self.apps.read_namespaced_deployment(deployment, OPERATOR_NAMESPACE,
                                                         _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            labels = (d.spec.selector.match_labels or {}) if d.spec and d.spec.selector else {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
            pods = self.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=selector,
                                                 _request_timeout=REQUEST_TIMEOUT).items
            return sorted((PodTarget(namespace=OPERATOR_NAMESPACE, pod=p.metadata.name,
                                     container=OPERATOR_CONTAINER, ready=pod_ready(p)) for p in pods),
                          key=lambda t: t.pod)
        raise CommandFailed(f"no operator Deployment ({' or '.join(OPERATOR_DEPLOYMENTS)}) in {OPERATOR_NAMESPACE}; "
                            "is the amazon-sagemaker-hyperpod-inference add-on installed?")

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
