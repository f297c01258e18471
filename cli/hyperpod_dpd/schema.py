"""The config's JSON Schema and its reference page, both generated from the pydantic model.

``config/schema.json`` lets editors complete and check config files: they point at it with a first line
``# yaml-language-server: $schema=<path to schema.json>`` (the YAML language server of VS Code and others reads
it). ``docs/config.md`` is the same schema as a table, one row per key. ``hyperpod-dpd schema --write`` writes
both; tests keep them in sync with the model.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hyperpod_core import paths
from hyperpod_core.config import Config

SCHEMA_ID = "https://github.com/hyperpod-dpd/hyperpod-dpd-iac/config/schema.json"
#: ``config/schema.json`` of the checkout; ``None`` when installed from a wheel (see :func:`committed`).
COMMITTED = paths.CHECKOUT / "config" / "schema.json" if paths.CHECKOUT else None
#: ``docs/config.md``, the reference page generated with it (:func:`render_docs`).
DOCS = paths.CHECKOUT / "docs" / "config.md" if paths.CHECKOUT else None

#: Models whose fields are merged with per-role defaults before validation (config/section.py ``merge_defaults``):
#: a user's mapping may name any subset of their fields, so none is required in the file.
_MERGED_WITH_DEFAULTS = ("RoleConfig", "RoleAutoscalingConfig")
#: Fields a config may leave ``null`` (or out): the model fills them from ``name`` and ``region`` before
#: validation (``Config._derive_defaults``), so it types them as values but the file may leave them null.
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
        kept = {k: prop.pop(k) for k in ("title", "description") if k in prop}
        definition["properties"][field] = {"anyOf": [prop, {"type": "null"}], "default": None, **kept}
        definition["required"] = [r for r in definition.get("required", []) if r != field]
        if not definition["required"]:
            definition.pop("required")
    # One endpoint with every key at its default, as a file would write it (not the model's full dump).
    schema["properties"]["endpoints"]["default"] = [{}]
    # The one-endpoint shape (Config._one_endpoint_file): a top-level model and endpoint instead of endpoints; the
    # model folds the two into endpoints[0] before validation, so they are keys of the file but not of the model.
    schema["properties"]["model"] = {
        "$ref": "#/$defs/ModelConfig",
        "description": "One-endpoint shape: the model of the only endpoint (the same as endpoints[0].model). Only "
                       "without endpoints. Default: every key at its default."}
    schema["properties"]["endpoint"] = {
        "$ref": "#/$defs/EndpointConfig",
        "description": "One-endpoint shape: the only endpoint (the same as endpoints: [<this, with model>]). Only "
                       "without endpoints; its model is the top-level model. Default: every key at its default."}
    # A section whose every field may now be left out may itself be left out (the validator builds it).
    optional = {f"#/$defs/{name}" for name, d in schema["$defs"].items() if not d.get("required")}
    schema["required"] = [r for r in schema.get("required", [])
                          if schema["properties"][r].get("$ref") not in optional]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            **_one_line_descriptions(schema)}


def _one_line_descriptions(node: Any) -> Any:
    """Docstrings wrap at the source's line length; a description is one paragraph."""
    if isinstance(node, dict):
        return {k: re.sub(r"\s*\n\s*", " ", v) if k == "description" and isinstance(v, str)
                else _one_line_descriptions(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_one_line_descriptions(v) for v in node]
    return node


def render() -> str:
    """The schema as committed: sorted keys, two-space indent, trailing newline."""
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"


def modeline(config_file: Path) -> str:
    """The ``yaml-language-server`` first line that points ``config_file`` at the committed schema."""
    rel = os.path.relpath(committed()[0], config_file.resolve().parent)
    return f"# yaml-language-server: $schema={rel}"


#: What a synth writes and no config is: a Kubernetes manifest (``*.k8s.yaml``, the cdk8s app's only YAML), or anything
#: in a folder of synthesized files (``cdk.out``, ``dist``, ``<name>.out``), wherever a synth was pointed.
_GENERATED_SUFFIX = ".k8s.yaml"
_GENERATED_FOLDERS = ("cdk.out", "dist")


def _generated(path: Path, root: Path) -> bool:
    folders = path.relative_to(root).parts[:-1]
    return path.name.endswith(_GENERATED_SUFFIX) or any(
        part in _GENERATED_FOLDERS or part.endswith(".out") for part in folders)


def config_files() -> list[Path]:
    """The config files kept in the repository (``config/**/*.yaml``), never a generated file that sits there."""
    root = committed()[0].parent
    return sorted(p for p in root.rglob("*.yaml") if not _generated(p, root))


def committed() -> tuple[Path, Path]:
    """:data:`COMMITTED` and :data:`DOCS`; a one-line usage error without a checkout (they live only there)."""
    if COMMITTED is None or DOCS is None:
        raise paths.CheckoutRequired("the committed schema (config/schema.json) and docs/config.md")
    return COMMITTED, DOCS


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


# --- docs/config.md ---------------------------------------------------------------------------------------

#: Longest enum written out in the reference; longer ones (the regions) are named by their rule and count.
_MAX_LISTED = 16


@dataclass(frozen=True, kw_only=True)
class ConfigKey:
    """One row of the reference: a key of a config file."""

    path: str
    """Dotted key path; ``[]`` stands for every item of a list."""
    allowed: str
    default: str
    description: str


#: Top-level keys of the one-endpoint shape: the same sections as ``endpoints[]`` and ``endpoints[].model``.
ONE_ENDPOINT_SHAPE = ("model", "endpoint")


def config_keys(schema: dict[str, Any] | None = None) -> list[ConfigKey]:
    """Every key a config file may hold, in the model's order, with the effective default: a role's fields take
    the defaults of the role (``endpoint.prefill.max_num_seqs`` is 16, ``endpoint.decode.max_num_seqs`` 32)."""
    schema = schema or config_schema()
    return list(_keys(schema, schema, "", None))


def _definition(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """The object definition ``node`` refers to (directly or as the non-null side of ``anyOf``), if any."""
    for candidate in (node, *node.get("anyOf", ())):
        if "$ref" in candidate:
            definition: dict[str, Any] = schema["$defs"][candidate["$ref"].rsplit("/", 1)[1]]
            return definition
    return None


def _list_items(node: dict[str, Any]) -> dict[str, Any] | None:
    for candidate in (node, *node.get("anyOf", ())):
        if candidate.get("type") == "array" and isinstance(candidate.get("items"), dict):
            items: dict[str, Any] = candidate["items"]
            return items
    return None


def _keys(schema: dict[str, Any], obj: dict[str, Any], prefix: str,
          inherited: dict[str, Any] | None) -> Iterator[ConfigKey]:
    required = set(obj.get("required", ()))
    for key, prop in obj["properties"].items():
        path = f"{prefix}.{key}" if prefix else key
        from_parent = inherited is not None and key in inherited
        has_default = from_parent or "default" in prop
        default = inherited[key] if inherited is not None and from_parent else prop.get("default")
        section = _definition(schema, prop)
        items = _list_items(prop)
        item_section = _definition(schema, items) if items is not None else None
        yield ConfigKey(path=path, allowed=_allowed(schema, prop),
                        default=("" if section is not None and isinstance(default, dict)
                                 else "(required)" if key in required and not has_default
                                 else _yaml(default) if has_default else ""),
                        description=prop.get("description", ""))
        if not prefix and key in ONE_ENDPOINT_SHAPE:
            continue  # its keys are those of endpoints[] (endpoints[].model), listed once there
        if section is not None:
            yield from _keys(schema, section, path, default if isinstance(default, dict) else None)
        elif item_section is not None:
            yield from _keys(schema, item_section, f"{path}[]", None)


def _yaml(value: Any) -> str:
    """A default as it would be written in the config file (YAML flow style)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    return f"`{text.removesuffix('...').strip()}`"


def _allowed(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """What a value of ``node`` may be, in words."""
    if "anyOf" in node:
        return " or ".join(_allowed(schema, n) for n in node["anyOf"])
    if "$ref" in node:
        return "mapping (keys below)"
    kind = node.get("type")
    if "enum" in node:
        values = node["enum"]
        if len(values) <= _MAX_LISTED:
            return ", ".join(f"`{v}`" for v in values)
        return f"{node.get('errorMessage', 'one of')} ({len(values)} values, listed in config/schema.json)"
    if kind == "null":
        return "`null`"
    if kind == "boolean":
        return "`true` or `false`"
    if kind in ("integer", "number"):
        return kind + _range(node)
    if kind == "string":
        if "errorMessage" in node:  # a field type's rule, in the words the model's error uses
            return str(node["errorMessage"])
        if "pattern" in node:
            return f"string matching `{node['pattern']}`"
        return "string" + _length(node, "minLength", "maxLength", "characters")
    if kind == "array":
        if "prefixItems" in node:  # a fixed-length tuple of one item type
            return f"list of {len(node['prefixItems'])} items, each {_allowed(schema, node['prefixItems'][0])}"
        items = node.get("items", {})
        item = "mappings (keys below)" if _definition(schema, items) is not None else _allowed(schema, items)
        unique = ", no repeats" if node.get("uniqueItems") else ""
        size = _length(node, "minItems", "maxItems", "items")
        return (f"list{size}, each item {item}{unique}" if item.startswith("must ")
                else f"list{size} of {item}{unique}")
    return "any"


def _range(node: dict[str, Any]) -> str:
    if "minimum" in node and "maximum" in node:
        return f" {node['minimum']} to {node['maximum']}"
    words = (("minimum", "at least"), ("exclusiveMinimum", "above"), ("maximum", "at most"),
             ("exclusiveMaximum", "below"))
    bounds = [f"{word} {node[key]}" for key, word in words if key in node]
    return f" {', '.join(bounds)}" if bounds else ""


def _length(node: dict[str, Any], low_key: str, high_key: str, unit: str) -> str:
    low, high = node.get(low_key), node.get(high_key)
    if low is not None and high is not None:
        return f" of {low} to {high} {unit}"
    if high is not None:
        return f" of at most {high} {unit}"
    if low is not None:
        return f" of at least {low} {unit}"
    return ""


def _cell(text: str, *, plain: bool = False) -> str:
    """``text`` in a table cell: pipes escaped; outside code spans, ``<...>`` shown (not read as HTML) and, for
    ``plain`` text (rule wording, not Markdown), ``*`` shown as is."""
    parts = text.replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
        if plain:
            parts[i] = parts[i].replace("*", "\\*")
    return "`".join(parts)


def _default_sentence(description: str) -> str:
    """The part of a field's description from ``Default`` (or ``Required``) on."""
    at = min((i for i in (description.find("Default"), description.find("Required")) if i >= 0), default=-1)
    return description[at:] if at >= 0 else ""


def render_docs() -> str:
    """``docs/config.md``: every key, what it may be, its default and what it does; one table per section."""
    schema = config_schema()
    out = ["# Configuration reference", "",
           "Generated from the typed model (`core/hyperpod_core/config/model.py`) by `hyperpod-dpd schema --write`,",
           "together with `config/schema.json`; a test fails when this page is stale. Do not edit it by hand:",
           "change the field's docstring. How to choose the file and what happens on bad input: README.md",
           "\"Configuration\". `[]` in a key stands for every item of the list.", ""]
    sections: list[tuple[str, str, list[ConfigKey]]] = [("Top level", schema.get("description", ""), [])]
    for key in config_keys(schema):
        definition = _definition(schema, schema["properties"][key.path]) if "." not in key.path else None
        if definition is not None:  # a section: its own table, introduced by the section's docstring
            about = f"{definition.get('description', '')} {_default_sentence(key.description)}".strip()
            sections.append((f"`{key.path}`", about, []))
        else:
            sections[-1 if "." in key.path else 0][2].append(key)
    for title, about, keys in sections:
        out += [f"## {title}", "", _cell(about), "", "| key | allowed | default | description |", "|---|---|---|---|"]
        out += [f"| `{k.path}` | {_cell(k.allowed, plain=True)} | {_cell(k.default)} | {_cell(k.description)} |"
                for k in keys]
        out.append("")
    return "\n".join(out)
