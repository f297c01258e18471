"""The cdk8s app follows STYLE rule 11: each chart is a ``Chart`` subclass taking one frozen props dataclass (never
the ``Config``), every object is a typed one (cdk8s-plus, the typed ``k8s`` imports, the classes ``cdk8s import``
generated from the operator CRD, or a typed ``ApiObject`` subclass), and generated classes are reached by their real
names."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from hyperpod_core.config import Config, load_config
from hyperpod_infra.bundle import parse_source

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s" / "hyperpod_k8s"
#: private-cluster writes every kind the app has: both endpoints and the stable Service, the reference layouts, the
#: benchmark Jobs, its ConfigMap and ServiceAccount, and the in-cluster observability (sidecar ConfigMaps,
#: PrometheusRule).
EVERY_KIND = REPO / "config" / "examples" / "private-cluster.yaml"


@pytest.fixture(scope="module")
def charts() -> list:
    import cdk8s

    from hyperpod_core.inputs import resolve_inputs
    from hyperpod_k8s.main import build_charts

    config = load_config(EVERY_KIND)
    app = cdk8s.App()
    build_charts(app, config, resolve_inputs(config, None))
    return list(app.charts)


def test_every_object_is_typed_never_a_bare_api_object(charts) -> None:
    import cdk8s

    objects = [c for chart in charts for c in chart.node.find_all() if isinstance(c, cdk8s.ApiObject)]
    kinds = {obj.kind for obj in objects}
    assert kinds == {"InferenceEndpointConfig", "Service", "Job", "ConfigMap", "ServiceAccount", "PrometheusRule"}
    bare = sorted(f"{obj.kind} {obj.name}" for obj in objects if type(obj) is cdk8s.ApiObject)
    assert bare == [], "built from a dict patched into cdk8s.ApiObject"


def test_built_in_kinds_come_from_cdk8s_plus(charts) -> None:
    import cdk8s
    import cdk8s_plus_33 as kplus

    builtin = {"Job": kplus.Job, "ConfigMap": kplus.ConfigMap, "ServiceAccount": kplus.ServiceAccount,
               "Service": kplus.Service}
    for chart in charts:
        for c in chart.node.find_all():
            if isinstance(c, cdk8s.ApiObject) and c.kind in builtin:
                assert isinstance(c.node.scope, builtin[c.kind]), f"{c.kind} {c.name} is not a cdk8s-plus {c.kind}"


def _dataclass_types(cls: type, seen: set[type]) -> set[type]:
    """``cls`` and every type its fields mention, through nested dataclasses, tuples and unions."""
    found: set[type] = set()
    pending: list[object] = [cls]
    while pending:
        tp = pending.pop()
        if isinstance(tp, type):
            if tp in seen:
                continue
            seen.add(tp)
            found.add(tp)
            if dataclasses.is_dataclass(tp):
                pending.extend(typing.get_type_hints(tp).values())
        pending.extend(typing.get_args(tp))
    return found


def test_each_chart_takes_one_frozen_props_dataclass_and_never_the_config(charts) -> None:
    import cdk8s

    classes = {type(chart) for chart in charts}
    assert cdk8s.Chart not in classes, "a plain cdk8s.Chart filled from outside"
    for cls in classes:
        params = list(inspect.signature(cls.__init__).parameters.values())
        assert [(p.name, p.kind) for p in params] == [
            ("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), ("scope", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            ("construct_id", inspect.Parameter.POSITIONAL_OR_KEYWORD), ("props", inspect.Parameter.KEYWORD_ONLY)], cls
        props = typing.get_type_hints(cls.__init__)["props"]
        assert dataclasses.is_dataclass(props) and props.__dataclass_params__.frozen, (cls, props)  # type: ignore[attr-defined]
        assert Config not in _dataclass_types(props, set()), f"{cls.__name__} props carry the whole Config"


def test_generated_classes_are_reached_by_their_real_names() -> None:
    """No ``getattr(<generated module>, ...)``: a CRD update that renames a class must fail at import, where mypy
    and the reader see it, not at synth time through a string built at run time."""
    found = []
    for path in sorted(K8S.rglob("*.py")):
        if path.is_relative_to(K8S / "imports"):
            continue
        tree = parse_source(path)
        generated = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and (node.module or "").startswith("hyperpod_k8s.imports") for alias in node.names}
        found += [f"{path.relative_to(REPO)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in generated]
    assert found == []
