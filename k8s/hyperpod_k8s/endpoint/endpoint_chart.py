"""``EndpointChart``: one InferenceEndpointConfig, DPD or colocated, in a chart of its own (one file per layout)."""

from __future__ import annotations

import cdk8s
from constructs import Construct

from hyperpod_k8s.endpoint.colocated_endpoint import ColocatedEndpoint
from hyperpod_k8s.endpoint.dpd_endpoint import DpdEndpoint
from hyperpod_k8s.endpoint.props import EndpointChartProps


class EndpointChart(cdk8s.Chart):
    """The endpoint in ``props.mode``, in the endpoint's namespace. Object names are the endpoint's, never hashed."""

    def __init__(self, scope: Construct, construct_id: str, *, props: EndpointChartProps) -> None:
        super().__init__(scope, construct_id, namespace=props.endpoint.namespace, disable_resource_name_hashes=True)
        component = DpdEndpoint if props.mode == "dpd" else ColocatedEndpoint
        self.endpoint = component(self, "Endpoint", props=props.endpoint)
