"""``AddressChart``: the endpoint's one stable in-cluster address, a Service of type ``ExternalName`` named after the
endpoint, in a chart of its own (``<endpoint>-address.k8s.yaml`` in ``dist/<endpoint>/endpoint/``, beside the
InferenceEndpointConfig, so ``kubectl apply -f`` that folder creates both).

An ExternalName Service is a DNS CNAME to ``externalName`` (Kubernetes docs, "Service", type ExternalName): the
cluster's DNS answers ``<endpoint>.<namespace>.svc.cluster.local`` with the routing service of the revision that
serves, and ``hyperpod-dpd rollout`` repoints it when a blue/green revision ``<endpoint>-r<N>`` takes over. No ports
and no selector: nothing is proxied, and cdk8s-plus writes none for this type.
"""

from __future__ import annotations

import cdk8s
import cdk8s_plus_33 as kplus
from constructs import Construct

from hyperpod_k8s.endpoint.props import AddressProps


class AddressChart(cdk8s.Chart):
    """The Service ``props.name`` in ``props.namespace`` (names never hashed)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: AddressProps) -> None:
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        self.service = kplus.Service(
            self, "Service", type=kplus.ServiceType.EXTERNAL_NAME, external_name=props.external_name,
            metadata=cdk8s.ApiObjectMetadata(name=props.name, labels=props.labels, annotations=props.annotations))
