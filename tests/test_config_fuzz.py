"""Property: any single mutation of the default config either synthesizes both apps or fails with the
one-line ConfigError, never with any other exception."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_infra.config import ConfigError, parse_config


def _leaf_paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaf_paths(v, (*prefix, k))] or [prefix]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaf_paths(v, (*prefix, i))] or [prefix]
    return [prefix]


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

    from hyperpod_infra.app_builder import build
    from hyperpod_k8s.inputs import resolve_inputs
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
        outdir = tmp_path_factory.mktemp("fuzz")
        app = cdk.App(outdir=str(outdir / "cdk.out"), context={"aws:cdk:disable-asset-staging": True})
        build(app, config)
        app.synth()
        assert synth(config, outdir / "dist", resolve_inputs(config, None))

    check()
    assert outcomes["rejected"] > 0 and outcomes["valid"] > 0, outcomes
