"""Merge a recommendation into a config file: validated with the config model first, then moved into place.

The values are replaced in the file's own text where they already exist (PyYAML's node positions), so comments,
order and formatting survive; only when a key is missing is the document re-serialized (comments then lost).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hyperpod_core.atomic import write_text_atomic
from hyperpod_core.config import Config, parse_config
from hyperpod_core.errors import UsageError

Path_ = tuple[str | int, ...]


def merge_recommendation(path: Path, rec: dict[str, Any]) -> list[str]:
    """Set the DPD fields of ``rec`` in the YAML at ``path``, keeping every other key; return what changed.

    The merged document must pass the config model before anything is written; the file is replaced atomically
    (temp file in the same folder, then ``os.replace``).
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--write {str(path)!r} must be a readable YAML config ({exc})") from None
    edits: list[tuple[Path_, Any]] = []
    changes: list[str] = []

    def put(where: dict[str, Any], key: str, value: Any, at: Path_, name: str) -> None:
        if where.get(key) != value:
            changes.append(f"{name}: {where.get(key)!r} -> {value!r}")
            where[key] = value
            edits.append((at, value))

    endpoint = data.setdefault("endpoint", {})
    for role in ("prefill", "decode"):
        section = endpoint.setdefault(role, {})
        for key, value in (("replicas", rec[f"{role}_replicas"]), ("max_num_seqs", rec["max_num_seqs"][role])):
            put(section, key, value, ("endpoint", role, key), f"endpoint.{role}.{key}")
    for key in ("routing_threshold_tokens", "pd_buffer_size_bytes", "routing_strategy"):
        if key in rec:
            put(endpoint, key, rec[key], ("endpoint", key), f"endpoint.{key}")
    groups = (data.get("hyperpod") or {}).get("instance_groups") or []
    for role in ("prefill", "decode"):
        mine = [(i, g) for i, g in enumerate(groups) if isinstance(g, dict) and g.get("pool") == role]
        if len(mine) == 1:
            i, g = mine[0]
            put(g, "instance_count", rec[f"{role}_nodes"], ("hyperpod", "instance_groups", i, "instance_count"),
                f"hyperpod.instance_groups[{i}].instance_count")
    parse_config(data)  # raises ConfigError (one line, exit 2) and nothing is written
    write_text_atomic(path, _edited_text(text, edits, data))
    return changes


def _edited_text(text: str, edits: list[tuple[Path_, Any]], data: dict[str, Any]) -> str:
    spans = _scalar_spans(text)
    if all(at in spans for at, _ in edits):
        out = text
        for (start, end), value in sorted(((spans[at], v) for at, v in edits), reverse=True):
            out = out[:start] + _scalar(value) + out[end:]
        if yaml.safe_load(out) == data:
            return out
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def _scalar(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _scalar_spans(text: str) -> dict[Path_, tuple[int, int]]:
    """Character span of every scalar value in a YAML document, by its key path."""
    spans: dict[Path_, tuple[int, int]] = {}

    def walk(node: yaml.Node, at: Path_) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                walk(v, (*at, k.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, (*at, i))
        elif isinstance(node, yaml.ScalarNode):
            spans[at] = (node.start_mark.index, node.end_mark.index)

    root = yaml.compose(text)
    if root is not None:
        walk(root, ())
    return spans


def unused_nodes(config: Config, rec: dict[str, Any]) -> list[str]:
    """The config's GPU nodes that no replica of the recommendation would run on (they are billed all the same)."""
    kind = rec["instance_type"]
    groups = list(enumerate(config.hyperpod.instance_groups))
    warnings = [f"hyperpod.instance_groups[{i}] ({g.name}) holds {g.instance_count} {g.instance_type} node(s) that "
                f"no replica uses (the endpoint runs on {kind})"
                for i, g in groups if g.instance_type != kind and g.instance_count]
    mine = [(i, g) for i, g in groups if g.instance_type == kind]
    if not rec["split"]:
        have = sum(g.instance_count for _, g in mine)
        if have > rec["nodes"]:
            warnings.append(f"the config holds {have} {kind} node(s); the colocated recommendation uses "
                            f"{rec['nodes']}: {have - rec['nodes']} idle")
        return warnings
    short = 0
    for role in ("prefill", "decode"):
        have = sum(g.instance_count for _, g in mine if g.pool == role)
        need = rec[f"{role}_nodes"]
        if have > need:
            names = ", ".join(f"instance_groups[{i}]" for i, g in mine if g.pool == role)
            warnings.append(f"hyperpod.{names} (pool {role}) hold {have} node(s); the recommendation's {role} "
                            f"replicas use {need}: {have - need} idle")
        short += max(0, need - have)
    shared = sum(g.instance_count for _, g in mine if g.pool == "shared")
    if shared > short:
        warnings.append(f"shared instance groups hold {shared} node(s); the recommendation needs {short} of them: "
                        f"{shared - short} idle")
    return warnings
