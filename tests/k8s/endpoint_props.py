"""One endpoint's props the way the cdk8s app builds them (``hyperpod_k8s.main.build_charts``), for the tests that
check a prop without synthesizing: the config's inputs resolved, then the named endpoint (the only one by default)."""

from __future__ import annotations

from pathlib import Path

from hyperpod_core.config import Config
from hyperpod_core.inputs import EndpointInputs, resolve_inputs
from hyperpod_k8s.endpoint.props import EndpointProps, endpoint_props


def inputs_of(config: Config, outputs_file: Path | None = None, staged_model_file: Path | None = None,
              name: str | None = None) -> EndpointInputs:
    """Endpoint ``name``'s inputs (the only endpoint's by default)."""
    return resolve_inputs(config, outputs_file, staged_model_file).endpoint(config.spec(name).name)


def props_of(config: Config, outputs_file: Path | None = None, staged_model_file: Path | None = None,
             name: str | None = None) -> EndpointProps:
    """Endpoint ``name``'s props (the only endpoint's by default)."""
    return endpoint_props(config.spec(name), inputs_of(config, outputs_file, staged_model_file, name),
                          availability_zone_id=config.network.gpu_availability_zone_id)
