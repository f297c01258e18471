"""The one typed configuration that drives both the CDK app and the cdk8s app (and the command line).

Loaded only at the edges (``app.py``, the cdk8s entry point, the command line) with :func:`load_config`.
``python -m hyperpod_core.config PATH`` validates a file: one line and exit 2 if it is bad.

* :mod:`.model`: the schema's root, :class:`Config`; its sections, each with its fields, defaults and docs, in
  :mod:`.cluster` (network, eks, hyperpod), :mod:`.endpoint` (model, endpoint), :mod:`.observability` and
  :mod:`.benchmark`, all on :class:`~.section.Section`;
* :mod:`.types`: field types that carry single-field rules (CIDRs, AZ IDs, ARNs, names, ...);
* :mod:`.rules`: the rules that compare fields;
* :mod:`.loader`: the hardened YAML loader and the one-line errors.
"""

from hyperpod_core.config.endpoint import EndpointConfig, RoleAutoscalingConfig, RoleConfig
from hyperpod_core.config.loader import load_config, parse_config
from hyperpod_core.config.model import Config
from hyperpod_core.config.observability import SloConfig
from hyperpod_core.config.types import (
    AWS_REGIONS,
    BENCHMARK_PATH_MARGIN,
    EKS_UNSUPPORTED_AZ_IDS,
    aws_partition,
    az_id_prefix,
    default_control_plane_az_ids,
    is_bucket_name,
    scenario_token_range,
)
from hyperpod_core.errors import ConfigError

__all__ = [
    "AWS_REGIONS",
    "BENCHMARK_PATH_MARGIN",
    "EKS_UNSUPPORTED_AZ_IDS",
    "Config",
    "ConfigError",
    "EndpointConfig",
    "RoleAutoscalingConfig",
    "RoleConfig",
    "SloConfig",
    "aws_partition",
    "az_id_prefix",
    "default_control_plane_az_ids",
    "is_bucket_name",
    "load_config",
    "parse_config",
    "scenario_token_range",
]
