"""Endpoint rules beyond the failing cases: what the rules accept, and the operator limits that are only
reported. The failing case of every rule is in tests/infra/test_config.py (one table, one case per rule)."""

from __future__ import annotations

import copy

from hyperpod_core.config import parse_config


def _groups(d: dict, **counts: int) -> None:
    for g in d["hyperpod"]["instance_groups"]:
        g["instance_count"] = counts.get(g["pool"], g["instance_count"])


def test_kvaware_routing_passes_with_the_completions_path(default_config_dict):
    data = copy.deepcopy(default_config_dict)
    data["endpoint"].update(routing_strategy="kvaware", invocation_path="v1/completions")
    assert parse_config(data).spec().endpoint.routing_strategy == "kvaware"


def test_operator_limits_that_are_only_reported_cite_their_source(default_config_dict):
    from hyperpod_k8s.endpoint.props import limit_notes

    data = copy.deepcopy(default_config_dict)
    _groups(data, prefill=2)
    data["endpoint"]["prefill"]["replicas"] = 2
    data["endpoint"]["image"] = "example.com/vllm:1.0"
    notes = limit_notes(parse_config(data).spec())
    assert any("'roundrobin' for several prefillers (DPD guide" in n for n in notes), notes
    assert any("not one of the DPD images AWS supports" in n for n in notes), notes
    assert limit_notes(parse_config(default_config_dict).spec()) == []
