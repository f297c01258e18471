"""Catalogue and queries: every expression parses, uses only catalogue metrics, and is scoped to pods."""

from __future__ import annotations

import re
from collections.abc import Callable

import promql_parser
import pytest

from hyperpod_infra.config import Config
from hyperpod_k8s.observability import catalogue as m
from hyperpod_k8s.observability.alerts import alert_rule_groups
from hyperpod_k8s.observability.dashboards import dashboards
from hyperpod_k8s.observability.promql import Target, gauge, quantile, rate_sum, series

_BY_SERIES = {
    metric.series(suffix): metric
    for metric in m.CATALOGUE
    for suffix in (("", "_bucket", "_sum", "_count") if metric.type == "histogram" else ("",))
}


def _expressions(config: Config, substitute: Callable[[str], str]) -> list[tuple[str, str]]:
    out = [(f"{d.uid}: {p.title}", substitute(q.expr)) for d in dashboards(config) for p in d.panels
           for q in p.queries]
    out += [(f"alert {r['alert']}", r["expr"]) for g in alert_rule_groups(config)["groups"] for r in g["rules"]]
    return out


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_catalogue_names_are_unique_and_follow_prometheus_conventions() -> None:
    names = [metric.name for metric in m.CATALOGUE]
    assert len(names) == len(set(names))
    for metric in m.CATALOGUE:
        assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", metric.name), metric.name
        assert metric.name.endswith("_total") == (metric.type == "counter") or metric.source is m.ROUTER, \
            f"{metric.name}: counters and only counters end in _total"
        assert metric.source.version and metric.help


def test_catalogue_pins_names_to_the_worker_image_versions() -> None:
    assert "0.19.0" in m.VLLM.version and "0.4.3" in m.LMCACHE.version
    # The renames we know of are recorded where the name changed.
    assert "gpu_cache_usage_perc" in (m.KV_CACHE_USAGE.renamed_from or "")
    assert "time_per_output_token_seconds" in (m.INTER_TOKEN_LATENCY.renamed_from or "")


def test_every_expression_parses_and_uses_only_scoped_catalogue_metrics(
        default_config: Config, grafana_substitute: Callable[[str], str]) -> None:
    used: set[str] = set()
    for where, expr in _expressions(default_config, grafana_substitute):
        selectors = _selectors(expr)  # raises ValueError if the expression does not parse
        assert selectors, where
        for sel in selectors:
            metric = _BY_SERIES.get(sel.name)
            assert metric is not None, f"{where}: {sel.name} is not in the catalogue"
            used.add(metric.name)
            matchers = {mt.name: mt for mt in sel.matchers.matchers}
            assert "namespace" in matchers and metric.pod_label in matchers, \
                f"{where}: {sel.name} must select namespace and {metric.pod_label}"
    assert used == {metric.name for metric in m.CATALOGUE}, "catalogue entries no query uses"


def test_deprecated_names_are_not_queried(default_config: Config,
                                          grafana_substitute: Callable[[str], str]) -> None:
    old = {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds", "vllm:gpu_prefix_cache_hits"}
    for where, expr in _expressions(default_config, grafana_substitute):
        assert not {sel.name.removesuffix("_bucket") for sel in _selectors(expr)} & old, where


def test_an_invalid_expression_is_rejected_by_the_parser() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(vllm:num_preemptions_total[5m])")


DPD = Target(namespace="default", endpoint="llama", kind="dpd")
COLOCATED = Target(namespace="default", endpoint="llama-colocated", kind="colocated")


@pytest.mark.parametrize(("target", "role", "pod", "matches"), [
    (DPD, "prefill", "prefill-llama-6d5f7c8b9-x2k4p", True),
    (DPD, "prefill", "decode-llama-6d5f7c8b9-x2k4p", False),
    (DPD, "decode", "decode-llama-5b8c9d7f6-klm2n", True),
    (DPD, "decode", "decode-llama-colocated-5b8c9d7f6-klm2n", False),
    (DPD, "any", "prefill-llama-6d5f7c8b9-x2k4p", True),
    (DPD, "any", "llama-colocated-7f6d5c4b3-pq9rs", False),
    (COLOCATED, "decode", "llama-colocated-7f6d5c4b3-pq9rs", True),
    (COLOCATED, "prefill", "decode-llama-5b8c9d7f6-klm2n", False),
    (Target(namespace="default", endpoint="llama", kind="colocated"), "any",
     "llama-colocated-7f6d5c4b3-pq9rs", False),
    (DPD, "router", "llama-default-router-5c4b3a2d1-uv8xy", True),
])
def test_pod_regex(target: Target, role, pod: str, matches: bool) -> None:
    # Prometheus anchors regex matchers, like fullmatch.
    assert bool(re.fullmatch(target.pod_regex(role), pod)) is matches


def test_fails_when_role_does_not_exist_on_the_endpoint() -> None:
    with pytest.raises(ValueError, match="role 'worker' does not exist on a dpd endpoint"):
        DPD.pod_regex("worker")


def test_fails_when_router_metric_is_read_from_worker_pods() -> None:
    with pytest.raises(ValueError, match="vllm:healthy_pods_total is not exposed by the decode pods"):
        series(m.ROUTER_HEALTHY_PODS, DPD, "decode")
    with pytest.raises(ValueError, match="is not exposed by the router pods"):
        series(m.KV_CACHE_USAGE, DPD, "router")


def test_fails_when_the_function_does_not_fit_the_metric_type() -> None:
    with pytest.raises(ValueError, match="is a gauge; rate"):
        rate_sum(m.KV_CACHE_USAGE, DPD, "decode")
    with pytest.raises(ValueError, match="quantiles need a histogram"):
        quantile(0.9, m.GENERATION_TOKENS, DPD, "decode")
    with pytest.raises(ValueError, match="use rate_sum"):
        gauge("sum", m.GENERATION_TOKENS, DPD, "decode")
    with pytest.raises(ValueError, match="only histograms have '_bucket'"):
        m.KV_CACHE_USAGE.series("_bucket")
