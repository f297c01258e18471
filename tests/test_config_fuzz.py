"""Property: any single mutation of the default config either synthesizes both apps or fails with the
one-line ConfigError, never with any other exception.

Cost: a mutation the config accepts is synthesized through both apps (~1.5 s); the first :data:`SYNTHESIZED`
accepted ones are, the rest are validated only (the config matrix, tests/matrix.py, synthesizes every documented
option). ``FUZZ_SYNTH_ALL=1`` synthesizes every accepted mutation."""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_core.config import ConfigError, parse_config


def _leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaf_paths(v, (*prefix, k))] or [prefix]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaf_paths(v, (*prefix, i))] or [prefix]
    return [prefix]


#: Accepted mutations synthesized per run (each ~1.5 s of the suite's five minutes).
SYNTHESIZED = 1000 if os.environ.get("FUZZ_SYNTH_ALL") == "1" else 6

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10, max_value=70000), st.floats(allow_nan=False),
    st.text(max_size=12), st.sampled_from(["ml.p5en.48xlarge", "ml.g5.xlarge", "usw2-az1", "10.2.0.0/16",
                                           "kvaware", "shared", "", "1.34", "v1/completions"]),
    st.lists(st.text(max_size=5), max_size=2),
)


@st.composite
def mutations(draw, base: dict) -> dict:
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=2))):
        path = draw(st.sampled_from(_leaf_paths(data)))
        node: Any = data
        for key in path[:-1]:
            node = node[key]
        if draw(st.booleans()) and isinstance(node, dict):
            node.pop(path[-1], None)
        else:
            node[path[-1]] = draw(VALUES)
    return data


def test_mutated_configs_synthesize_or_fail_cleanly(default_config_dict: dict, tmp_path_factory) -> None:
    import aws_cdk as cdk

    from hyperpod_core.inputs import resolve_inputs
    from hyperpod_infra.app_builder import build
    from hyperpod_k8s.main import synth

    outcomes = {"valid": 0, "rejected": 0}

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(mutations(default_config_dict))
    def check(data: dict) -> None:
        try:
            config = parse_config(data)
        except ConfigError as exc:
            assert str(exc) and "\n" not in str(exc)
            outcomes["rejected"] += 1
            return
        outcomes["valid"] += 1
        if outcomes["valid"] > SYNTHESIZED:
            return
        outdir = tmp_path_factory.mktemp("fuzz")
        app = cdk.App(outdir=str(outdir / "cdk.out"), context={"aws:cdk:disable-asset-staging": True})
        build(app, config)
        app.synth()
        assert synth(config, outdir / "dist", resolve_inputs(config, None))

    check()
    assert outcomes["rejected"] > 0 and outcomes["valid"] > 0, outcomes


# Bytes that stress the reader: YAML syntax characters, anchors/aliases/tags, non-ASCII and invalid UTF-8.
_YAML_BITS = st.sampled_from([b"\n", b": ", b"- ", b"[", b"]", b"{", b"}", b"&a ", b"*a", b"!!", b"<<: ", b"'", b'"',
                              b"#", b"\t", b"yes", b".inf", b"0x1F", b"\xc3\xa9", b"\xff", b"\x00", b"name", b"  "])


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.one_of(_YAML_BITS, st.binary(max_size=4)), max_size=40))
def test_any_bytes_load_or_fail_with_one_line(tmp_path_factory, chunks: list[bytes]) -> None:
    """Property: whatever the file holds, the loader returns a config or raises the one-line ConfigError."""
    from hyperpod_core.config import load_config

    path = tmp_path_factory.mktemp("fuzz") / "c.yaml"
    path.write_bytes(b"".join(chunks))
    try:
        load_config(path)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc) and len(str(exc)) <= 500


@settings(max_examples=60, deadline=None, database=None)
@given(st.integers(min_value=0, max_value=3000), st.sampled_from([b"[", b"{a: ", b"- "]))
def test_nesting_depth_never_crashes(tmp_path_factory, depth: int, opener: bytes) -> None:
    from hyperpod_core.config import load_config

    path = tmp_path_factory.mktemp("deep") / "c.yaml"
    path.write_bytes(b"name: " + opener * depth + b"x\n")
    try:
        load_config(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
