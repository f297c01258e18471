"""Merge a recommendation into a config file: validated with the config model first, then moved into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd.errors import UsageError
from hyperpod_infra.config import parse_config


def merge_recommendation(path: Path, rec: dict[str, Any]) -> list[str]:
    """Set the DPD fields of ``rec`` in the YAML at ``path``, keeping every other key; return what changed.

    The merged document must pass the config model before anything is written; the file is replaced atomically
    (temp file in the same folder, then ``os.replace``). YAML comments are not kept (PyYAML drops them).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--write {str(path)!r} must be a readable YAML config ({exc})") from None
    changes: list[str] = []

    def put(where: dict[str, Any], key: str, value: Any, name: str) -> None:
        if where.get(key) != value:
            changes.append(f"{name}: {where.get(key)!r} -> {value!r}")
            where[key] = value

    endpoint = data.setdefault("endpoint", {})
    for role in ("prefill", "decode"):
        section = endpoint.setdefault(role, {})
        put(section, "replicas", rec[f"{role}_replicas"], f"endpoint.{role}.replicas")
        put(section, "max_num_seqs", rec["max_num_seqs"][role], f"endpoint.{role}.max_num_seqs")
    put(endpoint, "routing_threshold_tokens", rec["routing_threshold_tokens"], "endpoint.routing_threshold_tokens")
    put(endpoint, "pd_buffer_size_bytes", rec["pd_buffer_size_bytes"], "endpoint.pd_buffer_size_bytes")
    if "routing_strategy" in rec:
        put(endpoint, "routing_strategy", rec["routing_strategy"], "endpoint.routing_strategy")
    groups = (data.get("hyperpod") or {}).get("instance_groups") or []
    for role in ("prefill", "decode"):
        mine = [g for g in groups if isinstance(g, dict) and g.get("pool") == role]
        if len(mine) == 1:
            put(mine[0], "instance_count", rec[f"{role}_nodes"], f"hyperpod.instance_groups[{mine[0].get('name')}]"
                ".instance_count")
    parse_config(data)  # raises ConfigError (one line, exit 2) and nothing is written
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return changes
