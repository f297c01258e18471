"""Every dashboard query returns data from a real Prometheus scraping catalogue-named metrics."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from hyperpod_infra.config import Config
from hyperpod_k8s.observability import catalogue as m
from hyperpod_k8s.observability.dashboards import dashboards
from hyperpod_k8s.observability.promql import Target, gauge

pytestmark = pytest.mark.slow


def _all_queries(config: Config) -> list[tuple[str, str, str]]:
    return [(d.uid, f"{p.title} / {q.legend}", q.expr)
            for d in dashboards(config) for p in d.panels for q in p.queries]


def test_exporter_is_scraped(prometheus) -> None:
    up = prometheus.query('up{job="synthetic"}')
    assert [s["value"][1] for s in up] == ["1"]


def test_every_panel_query_returns_series(prometheus, default_config: Config,
                                          grafana_substitute: Callable[[str], str]) -> None:
    queries = _all_queries(default_config)
    assert len(queries) > 40
    empty, not_finite = [], []
    for uid, title, expr in queries:
        result = prometheus.query(grafana_substitute(expr))
        if not result:
            empty.append(f"{uid}: {title}: {expr}")
        elif not all(math.isfinite(float(s["value"][1])) for s in result):
            not_finite.append(f"{uid}: {title}: {result}")
    assert not empty, "queries returned no series:\n" + "\n".join(empty)
    assert not not_finite, "queries returned NaN/Inf:\n" + "\n".join(not_finite)


@pytest.mark.parametrize(("kind", "endpoint_suffix", "role", "expected"), [
    ("dpd", "", "prefill", {"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill-{ep}-6d5f7c8b9-q7w8e"}),
    ("dpd", "", "decode", {"decode-{ep}-5b8c9d7f6-klm2n"}),
    ("dpd", "", "any", {"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill-{ep}-6d5f7c8b9-q7w8e",
                        "decode-{ep}-5b8c9d7f6-klm2n"}),
    ("colocated", "-colocated", "decode", {"{ep}-colocated-7f6d5c4b3-pq9rs"}),
])
def test_role_selectors_pick_exactly_the_role_pods(prometheus, default_config: Config, kind, endpoint_suffix,
                                                   role, expected) -> None:
    ep = default_config.endpoint.name
    t = Target(namespace=default_config.endpoint.namespace, endpoint=ep + endpoint_suffix, kind=kind)
    result = prometheus.query(gauge("count", m.KV_CACHE_USAGE, t, role, by=("pod",)))
    assert {s["metric"]["pod"] for s in result} == {p.format(ep=ep) for p in expected}


def test_dpd_request_split_adds_up(prometheus, default_config: Config,
                                   grafana_substitute: Callable[[str], str]) -> None:
    """disaggregated + direct == total (while prefill is not busier than decode)."""
    overview = dashboards(default_config)[0]
    (panel,) = [p for p in overview.panels if p.title == "Request rate"]
    total, disaggregated, direct = (float(prometheus.query(grafana_substitute(q.expr))[0]["value"][1])
                                    for q in panel.queries)
    assert total > 0 and disaggregated > 0
    assert disaggregated + direct == pytest.approx(total, rel=0.05)


def test_queries_for_an_unknown_endpoint_return_nothing(prometheus, default_config: Config,
                                                        grafana_substitute: Callable[[str], str]) -> None:
    """The selectors do not leak: nothing from our pods or the decoy endpoint matches another name."""
    leaking = []
    for uid, title, expr in _all_queries(default_config):
        scoped = expr.replace("$endpoint", "absent-model").replace("$baseline", "absent-model-colocated")
        if prometheus.query(grafana_substitute(scoped)):
            leaking.append(f"{uid}: {title}")
    assert not leaking, "queries match pods of other endpoints:\n" + "\n".join(leaking)
