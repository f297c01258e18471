"""Merge a recommendation into a config file: validated with the config model first, then moved into place.

The values are replaced in the file's own text where they already exist (PyYAML's node positions), so comments,
order and formatting survive; only when a key is missing is the document re-serialized (comments then lost).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import yaml

from hyperpod_core.atomic import write_text_atomic
from hyperpod_core.config import parse_config
from hyperpod_core.config.cluster import InstanceGroupConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import UsageError
from hyperpod_core.names import ROLES, Role

Path_ = tuple[str | int, ...]


def _key_path(at: str) -> Path_:
    """The file's key path of an endpoint as :attr:`EndpointSpec.at` names it: ``endpoint``, ``endpoints[1]``."""
    found = re.fullmatch(r"endpoints\[(\d+)\]", at)
    return ("endpoints", int(found[1])) if found else (at,)


def _dedicated(spec: EndpointSpec, role: Role, others: Collection[str]) -> list[tuple[int, InstanceGroupConfig]]:
    """The instance groups (index, group) that hold ``role``'s workers of ``spec`` only: those the role may land on
    (:meth:`EndpointSpec.role_groups`) and the other role may not; none another endpoint may use (``others``: those
    groups' names)."""
    other: Role = "decode" if role == "prefill" else "prefill"
    theirs = {g.name for g in spec.role_groups(other)} | set(others)
    mine = {g.name for g in spec.role_groups(role)} - theirs
    return [(i, g) for i, g in enumerate(spec.instance_groups) if g.name in mine]


def role_groups_to_size(spec: EndpointSpec, others: Collection[str] = ()) -> dict[Role, int]:
    """Per role, the index in ``hyperpod.instance_groups`` of the one group that holds that role of ``spec`` only
    (:func:`_dedicated`): ``plan --write`` sets its ``instance_count``. A role without exactly one such group is left
    out (its nodes are shared)."""
    out: dict[Role, int] = {}
    for role in ROLES:
        mine = _dedicated(spec, role, others)
        if len(mine) == 1:
            out[role] = mine[0][0]
    return out


def merge_recommendation(path: Path, rec: dict[str, Any], *, at: str = "endpoint",
                         groups: Mapping[Role, int]) -> list[str]:
    """Set the DPD fields of ``rec`` in the YAML at ``path``, keeping every other key; return what changed.

    ``at``: the endpoint's key as the file names it (:attr:`EndpointSpec.at`: ``endpoint`` or ``endpoints[<i>]``);
    ``groups``: the instance group whose ``instance_count`` becomes each role's node count
    (:func:`role_groups_to_size`; a role left out keeps the counts as they are). The merged
    document must pass the config model (also the capacity of every group across endpoints) before anything is
    written; the file is replaced atomically (temp file in the same folder, then ``os.replace``).
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

    where = _key_path(at)
    if where[0] == "endpoints":
        entries = data.get("endpoints")
        if not isinstance(entries, list) or not isinstance(where[1], int) or where[1] >= len(entries) \
                or not isinstance(entries[where[1]], dict):
            raise UsageError(f"--write {str(path)!r} has no {at} (the config changed since it was read)")
        endpoint = entries[where[1]]
    else:
        endpoint = data.setdefault("endpoint", {})
    for role in ("prefill", "decode"):
        section = endpoint.setdefault(role, {})
        for key, value in (("replicas", rec[f"{role}_replicas"]), ("max_num_seqs", rec["max_num_seqs"][role])):
            put(section, key, value, (*where, role, key), f"{at}.{role}.{key}")
    for key in ("routing_threshold_tokens", "pd_buffer_size_bytes", "routing_strategy"):
        if key in rec:
            put(endpoint, key, rec[key], (*where, key), f"{at}.{key}")
    listed = (data.get("hyperpod") or {}).get("instance_groups") or []
    for role, i in groups.items():
        if i < len(listed) and isinstance(listed[i], dict):
            put(listed[i], "instance_count", rec[f"{role}_nodes"],
                ("hyperpod", "instance_groups", i, "instance_count"), f"hyperpod.instance_groups[{i}].instance_count")
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


def unused_nodes(spec: EndpointSpec, rec: dict[str, Any], *, others: Collection[str] = ()) -> list[str]:
    """The GPU nodes of ``spec``'s instance groups that no replica of the recommendation would run on (they are
    billed all the same). ``others``: the groups another endpoint's roles may use: their nodes are not this
    endpoint's to judge."""
    kind = rec["instance_type"]
    groups = [(i, g) for i, g in enumerate(spec.instance_groups) if g.name not in others]
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
    dedicated: set[int] = set()
    for role in ("prefill", "decode"):
        own = _dedicated(spec, role, others)
        dedicated |= {i for i, _ in own}
        have = sum(g.instance_count for _, g in own)
        need = rec[f"{role}_nodes"]
        if have > need:
            names = ", ".join(f"instance_groups[{i}]" for i, _ in own)
            warnings.append(f"hyperpod.{names} ({role} only) hold {have} node(s); the recommendation's {role} "
                            f"replicas use {need}: {have - need} idle")
        short += max(0, need - have)
    # Roles that share a group pack onto the same nodes: the layout never needs more than its nodes altogether.
    short = min(short, rec["nodes"])
    shared = sum(g.instance_count for i, g in mine if i not in dedicated)
    if shared > short:
        warnings.append(f"shared instance groups hold {shared} node(s); the recommendation needs {short} of them: "
                        f"{shared - short} idle")
    return warnings
