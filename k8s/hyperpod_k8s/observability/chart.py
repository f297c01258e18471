"""The observability cdk8s chart: dashboard ConfigMaps and the PrometheusRule.

The only module of this package that imports cdk8s. The manifests themselves are defined in
``delivery.py``; here they are only placed in a chart.
"""

from __future__ import annotations

from typing import Any

import cdk8s

from hyperpod_core.config import Config
from hyperpod_k8s.observability.delivery import dashboard_config_maps, prometheus_rule


def _add(chart: cdk8s.Chart, construct_id: str, manifest: dict[str, Any]) -> None:
    meta = manifest["metadata"]
    obj = cdk8s.ApiObject(
        chart, construct_id, api_version=manifest["apiVersion"], kind=manifest["kind"],
        metadata=cdk8s.ApiObjectMetadata(
            name=meta["name"], namespace=meta["namespace"], labels=meta.get("labels"),
            annotations=meta.get("annotations")),
    )
    for key in ("data", "spec"):
        if key in manifest:
            obj.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", manifest[key]))


def build_observability_charts(app: cdk8s.App, config: Config) -> None:
    """Add the ``<endpoint>-observability`` chart (dashboard ConfigMaps and the PrometheusRule), only with
    ``observability.in_cluster_manifests``: HyperPod's add-on installs neither the prometheus-operator CRDs nor a
    Grafana sidecar, so on a plain HyperPod cluster ``kubectl apply`` of a PrometheusRule fails and the ConfigMaps
    are read by nothing (lifecycle-facts.md). The alerts reach AMP through the CDK app instead.

    PrometheusRule has no pinned CRD in ``shared/crds`` to generate bindings from, so it is a plain
    ApiObject; ``promtool check rules`` validates its ``spec`` in the tests.
    """
    if not (config.observability.enabled and config.observability.in_cluster_manifests):
        return
    chart = cdk8s.Chart(app, f"{config.endpoint.name}-observability", namespace=config.endpoint.namespace)
    for i, cm in enumerate(dashboard_config_maps(config)):
        _add(chart, f"dashboard-{i}", cm)
    _add(chart, "alerts", prometheus_rule(config))
