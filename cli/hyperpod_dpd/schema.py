"""A JSON Schema of the config, generated from the pydantic model, so editors complete and check config files.

``config/schema.json`` is this output, committed and kept in sync by a test; config files point at it with a
first line ``# yaml-language-server: $schema=<path to schema.json>`` (the YAML language server of VS Code and
others reads it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hyperpod_core import paths
from hyperpod_core.config import Config

SCHEMA_ID = "https://github.com/hyperpod-dpd/hyperpod-dpd-iac/config/schema.json"
#: ``config/schema.json`` of the checkout; ``None`` when installed from a wheel (see :func:`committed`).
COMMITTED = paths.CHECKOUT / "config" / "schema.json" if paths.CHECKOUT else None

#: Models whose fields are merged with per-role defaults before validation (config.py ``_merge_defaults``):
#: a user's mapping may name any subset of their fields, so none is required in the file.
_MERGED_WITH_DEFAULTS = ("RoleConfig", "RoleAutoscalingConfig")
#: Fields a config may leave ``null`` (or out): config.py fills them from ``name`` before validation
#: (``Config._derive_defaults``), so the model types them as values but the file may leave them null.
_DERIVED_FROM_NAME = (("EksConfig", "cluster_name"), ("HyperPodConfig", "cluster_name"),
                      ("NetworkConfig", "control_plane_availability_zone_ids"))


def config_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a config file."""
    schema = Config.model_json_schema(mode="validation")
    for name in _MERGED_WITH_DEFAULTS:
        schema["$defs"][name].pop("required", None)
    for model, field in _DERIVED_FROM_NAME:
        definition = schema["$defs"][model]
        prop = definition["properties"][field]
        title = prop.pop("title", None)
        definition["properties"][field] = {"anyOf": [prop, {"type": "null"}], "default": None,
                                           **({"title": title} if title else {})}
        definition["required"] = [r for r in definition.get("required", []) if r != field]
        if not definition["required"]:
            definition.pop("required")
    # A section whose every field may now be left out may itself be left out (the validator builds it).
    optional = {f"#/$defs/{name}" for name, d in schema["$defs"].items() if not d.get("required")}
    schema["required"] = [r for r in schema.get("required", [])
                          if schema["properties"][r].get("$ref") not in optional]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def render() -> str:
    """The schema as committed: sorted keys, two-space indent, trailing newline."""
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"


def modeline(config_file: Path) -> str:
    """The ``yaml-language-server`` first line that points ``config_file`` at the committed schema."""
    import os

    rel = os.path.relpath(committed(), config_file.resolve().parent)
    return f"# yaml-language-server: $schema={rel}"


def config_files() -> list[Path]:
    """The config files kept in the repository (``config/**/*.yaml``)."""
    return sorted(committed().parent.rglob("*.yaml"))


def committed() -> Path:
    """:data:`COMMITTED`; a one-line usage error without a checkout (the schema file lives only there)."""
    if COMMITTED is None:
        raise paths.CheckoutRequired("the committed schema (config/schema.json)")
    return COMMITTED


def with_modeline(path: Path) -> str | None:
    """``path``'s text with the modeline as first line, or ``None`` when it has it already."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    want = modeline(path) + "\n"
    if lines and lines[0] == want:
        return None
    if lines and lines[0].startswith("# yaml-language-server:"):
        lines = lines[1:]
    return want + "".join(lines)
