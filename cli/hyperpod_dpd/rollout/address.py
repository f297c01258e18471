"""One stable in-cluster address per endpoint: a Service we own, ``<endpoint>`` in the endpoint's namespace, of type
``ExternalName``, whose ``externalName`` is the live revision's routing service
(``<iec>-<namespace>-routing-service.hyperpod-inference-system.svc.cluster.local``,
:attr:`hyperpod_core.names.EndpointNames.router_service_host`). The cdk8s app writes it beside the endpoint
(``dist/<endpoint>/endpoint/<endpoint>-address.k8s.yaml``: :mod:`hyperpod_k8s.endpoint.address_chart`), pointing at
the endpoint's own InferenceEndpointConfig; ``rollout`` creates it when it is missing and repoints it when another
revision takes over, with the same labels and annotations (:func:`stable_service`). In-cluster clients call
``<endpoint>.<namespace>.svc.cluster.local:443`` and never learn a revision's name.

An ExternalName Service is a DNS CNAME, nothing more (Kubernetes docs, "Service", type ExternalName): the client
connects to the routing service itself, and what it sends is unchanged. So the HTTP ``Host`` header and the TLS
server name are the alias's, and the Kubernetes docs warn that a TLS server cannot present a certificate for a name
it does not know. Whether the router's port 443 speaks TLS, and which names its certificate carries, is unpublished
(AWS's DPD guide calls it with ``http://`` and ``curl -k``) [I]; the operator's certificate (``status.tlsCertificate``)
names the load balancer's domain, never this alias. docs/endpoint.md, "Changing an endpoint", says what clients do.
"""

from __future__ import annotations

from typing import Any

from hyperpod_core.names import (
    MANAGED_BY_LABEL,
    PART_OF_LABEL,
    REVISION_ANNOTATION,
    STABLE_SERVICE_MANAGER,
    TARGET_ANNOTATION,
    EndpointNames,
)


def stable_service(endpoint: str, namespace: str, target: EndpointNames, revision: int, part_of: str
                   ) -> dict[str, Any]:
    """The Service ``<endpoint>`` pointing at ``target``'s routing service: for ``target`` the endpoint itself and
    revision 0, the Service the cdk8s app writes (:func:`hyperpod_k8s.endpoint.props.address_props`)."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": endpoint, "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": endpoint, PART_OF_LABEL: part_of,
                                MANAGED_BY_LABEL: STABLE_SERVICE_MANAGER},
                     "annotations": {TARGET_ANNOTATION: target.name, REVISION_ANNOTATION: str(revision)}},
        "spec": {"type": "ExternalName", "externalName": target.router_service_host},
    }


def ours(service: Any) -> bool:
    """The Service carries ``app.kubernetes.io/managed-by: hyperpod-dpd`` (:data:`hyperpod_core.names.
    MANAGED_BY_LABEL`), as the cdk8s app and :func:`stable_service` write it (a Service of the client's model, or
    ``None``: nothing to own)."""
    labels = (service.metadata.labels or {}) if service is not None else {}
    return bool(labels.get(MANAGED_BY_LABEL) == STABLE_SERVICE_MANAGER)


def state(service: Any, endpoint: str, namespace: str, target: EndpointNames) -> tuple[str, bool]:
    """``(line, needs_change)``: where the Service points now, and whether the rollout must create or repoint it.
    A Service of that name that is not ours is refused by the caller (:func:`ours`)."""
    where = f"Service {namespace}/{endpoint}"
    if service is None:
        return (f"stable address: {where} is missing (rollout creates it: ExternalName -> "
                f"{target.router_service_host})"), True
    now = service.spec.external_name if service.spec else None
    if now == target.router_service_host:
        return f"stable address: {where} -> {now}", False
    return f"stable address: {where} -> {now} (rollout repoints it)", True


def pointed_at(service: Any) -> tuple[str, int] | None:
    """The InferenceEndpointConfig and revision number our Service names in its annotations (:func:`stable_service`),
    ``None`` when it is missing, not ours or carries no readable pair."""
    if not ours(service):
        return None
    annotations = service.metadata.annotations or {}
    target, revision = annotations.get(TARGET_ANNOTATION), str(annotations.get(REVISION_ANNOTATION, ""))
    return (str(target), int(revision)) if target and revision.isdigit() else None
