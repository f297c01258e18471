"""Which charts the cdk8s app builds. Each component owns its module; this only composes them."""

from __future__ import annotations

import cdk8s

from hyperpod_infra.config import Config


def build_charts(app: cdk8s.App, config: Config) -> None:
    """Add every chart for ``config`` to ``app``. Chart IDs become file names: ``<id>.k8s.yaml``."""
    chart = cdk8s.Chart(app, f"{config.endpoint.name}-info", namespace=config.endpoint.namespace)
    # Placeholder until the endpoint component lands: a ConfigMap describing the planned endpoint,
    # so that the cdk8s app is exercised end to end against the same config as the CDK app.
    cdk8s.ApiObject(
        chart, "info", api_version="v1", kind="ConfigMap",
        metadata=cdk8s.ApiObjectMetadata(name=f"{config.endpoint.name}-plan"),
    ).add_json_patch(cdk8s.JsonPatch.add("/data", {
        "model": config.model.name,
        "instanceType": config.endpoint.instance_type,
        "routingThreshold": str(config.endpoint.routing_threshold_tokens),
    }))
