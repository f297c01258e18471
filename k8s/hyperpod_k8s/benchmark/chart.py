"""The ``<endpoint>-benchmark`` cdk8s chart: places :func:`benchmark_manifests` in a chart."""

from __future__ import annotations

from typing import Any

import cdk8s

from hyperpod_core.config import Config
from hyperpod_core.inputs import EndpointInputs
from hyperpod_k8s.benchmark.manifests import benchmark_manifests

_TOP_LEVEL = ("data", "spec", "automountServiceAccountToken")


def _add(chart: cdk8s.Chart, construct_id: str, manifest: dict[str, Any]) -> None:
    meta = manifest["metadata"]
    obj = cdk8s.ApiObject(
        chart, construct_id, api_version=manifest["apiVersion"], kind=manifest["kind"],
        metadata=cdk8s.ApiObjectMetadata(name=meta["name"], namespace=meta["namespace"],
                                         labels=meta.get("labels"), annotations=meta.get("annotations")))
    for key in _TOP_LEVEL:
        if key in manifest:
            obj.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", manifest[key]))


def build_benchmark_chart(app: cdk8s.App, config: Config, inputs: EndpointInputs) -> cdk8s.Chart:
    chart = cdk8s.Chart(app, f"{config.endpoint.name}-benchmark", namespace=config.endpoint.namespace,
                        disable_resource_name_hashes=True)
    for i, manifest in enumerate(benchmark_manifests(config, inputs)):
        _add(chart, f"{manifest['kind'].lower()}-{i}", manifest)
    return chart
