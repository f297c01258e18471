"""``ClusterAlertsChart``: the deployment's cluster-wide alerts as one PrometheusRule, a pure function of
:class:`~hyperpod_k8s.observability.props.ClusterAlertsChartProps`.

Its own chart, built once per deployment (not with an endpoint's), so that its file and namespace never depend on
which endpoint the config lists first (:mod:`hyperpod_k8s.observability.props`).
"""

from __future__ import annotations

import cdk8s
from constructs import Construct

from hyperpod_k8s.observability.prometheus_rule import prometheus_rule
from hyperpod_k8s.observability.props import ClusterAlertsChartProps


class ClusterAlertsChart(cdk8s.Chart):
    """The PrometheusRule ``dpd-cluster-alerts``, in ``props.namespace``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ClusterAlertsChartProps) -> None:
        super().__init__(scope, construct_id, namespace=props.namespace, disable_resource_name_hashes=True)
        rules = props.alerts
        self.alerts = prometheus_rule(self, "alerts", metadata=cdk8s.ApiObjectMetadata(name=rules.name,
                                                                                         labels=rules.labels),
                                      spec=rules.spec)
