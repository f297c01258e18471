"""Every dashboard, alert and autoscaling query returns data from a real Prometheus scraping the contract.

The exporter serves the series of ``shared/metrics`` as HyperPod stores them (``conftest.py``), so these tests
fail when a query names a series or label the worker image's exporters do not expose on HyperPod.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import promql_parser
import pytest
from tests.observability.conftest import every_query

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_core.telemetry.dashboards import dashboards
from hyperpod_core.telemetry.queries import Target, gauge

pytestmark = pytest.mark.slow


def _selectors(expr: str) -> list[str]:
    found: list[str] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(str(node))
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_exporter_is_scraped(prometheus) -> None:
    up = prometheus.query('up{job="synthetic"}')
    assert [s["value"][1] for s in up] == ["1"]


def test_every_panel_and_autoscaling_query_returns_finite_series(
        prometheus, default_config: Config, default_config_dict: dict,
        grafana_substitute: Callable[[str], str]) -> None:
    queries = [(w, e) for w, e in every_query(default_config, default_config_dict) if not w.startswith("alert")]
    assert len(queries) > 50
    empty, not_finite = [], []
    for where, expr in queries:
        result = prometheus.query(grafana_substitute(expr))
        if not result:
            empty.append(f"{where}: {expr}")
        elif not all(math.isfinite(float(s["value"][1])) for s in result):
            not_finite.append(f"{where}: {result}")
    assert not empty, "queries returned no series:\n" + "\n".join(empty)
    assert not not_finite, "queries returned NaN/Inf:\n" + "\n".join(not_finite)


def test_every_series_an_alert_reads_exists(prometheus, applied_config: Config, default_config_dict: dict) -> None:
    """An alert expression is empty while all is well, so each of its selectors must match series instead: for
    either endpoint ``endpoint.apply`` deploys (colocated: the worker pods the exporter serves, conftest.py).
    DPD: heartbeat, endpoint down, the two absence alerts, 8 performance and error alerts, restart loop; colocated:
    the same without the
    two that need a prefill leg (DpdPrefillLegSlow, DpdKvTransferIncomplete)."""
    alerts = [(w, e) for w, e in every_query(applied_config, default_config_dict) if w.startswith("alert")]
    expected = 14 if applied_config.spec().endpoint.apply == "dpd" else 12
    groups = alert_rule_groups(applied_config.specs())["groups"]  # the endpoint's, then the cluster's
    assert len(alerts) == sum(len(g["rules"]) for g in groups) == expected
    missing = [f"{where}: {sel}" for where, expr in alerts for sel in _selectors(expr)
               if not prometheus.query(f"count({sel})")]
    assert not missing, "alert selectors match nothing:\n" + "\n".join(missing)


def test_legends_name_labels_the_results_carry(prometheus, default_config: Config,
                                               grafana_substitute: Callable[[str], str]) -> None:
    import re

    bad = []
    for d in dashboards(default_config.spec()):
        for p in d.panels:
            for q in p.queries:
                labels = re.findall(r"\{\{(\w+)\}\}", q.legend)
                if labels:
                    result = prometheus.query(grafana_substitute(q.expr))
                    bad += [f"{p.title}: {x}" for x in labels for s in result if x not in s["metric"]]
    assert not bad, bad


@pytest.mark.parametrize(("kind", "role", "expected"), [
    ("dpd", "prefill", {"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill-{ep}-6d5f7c8b9-q7w8e"}),
    ("dpd", "decode", {"decode-{ep}-5b8c9d7f6-klm2n"}),
    ("dpd", "any", {"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill-{ep}-6d5f7c8b9-q7w8e", "decode-{ep}-5b8c9d7f6-klm2n"}),
    ("colocated", "decode", {"{ep}-7f6d5c4b3-pq9rs"}),
])
def test_role_selectors_pick_exactly_the_role_pods(prometheus, default_config: Config, kind, role,
                                                   expected) -> None:
    ep = default_config.spec().endpoint.name
    t = Target(namespace=default_config.spec().endpoint.namespace, endpoint=ep, kind=kind)
    result = prometheus.query(gauge("count", m.KV_CACHE_USAGE, t, role, by=("pod_name",)))
    assert {s["metric"]["pod_name"] for s in result} == {p.format(ep=ep) for p in expected}


def test_dpd_request_split_adds_up(prometheus, default_config: Config,
                                   grafana_substitute: Callable[[str], str]) -> None:
    """disaggregated + direct == total (while prefill is not busier than decode)."""
    overview = dashboards(default_config.spec())[0]
    (panel,) = [p for p in overview.panels if p.title == "Request rate"]
    total, disaggregated, direct = (float(prometheus.query(grafana_substitute(q.expr))[0]["value"][1])
                                    for q in panel.queries)
    assert total > 0 and disaggregated > 0
    assert disaggregated + direct == pytest.approx(total, rel=0.05)


def test_queries_for_an_unknown_endpoint_return_nothing(prometheus, default_config: Config,
                                                        grafana_substitute: Callable[[str], str]) -> None:
    """The selectors do not leak: nothing from our pods or the decoy endpoints matches another name."""
    leaking = []
    for d in dashboards(default_config.spec()):
        for p in d.panels:
            for q in p.queries:
                scoped = q.expr.replace("$endpoint", "absent-model").replace("$baseline", "absent-model")
                if prometheus.query(grafana_substitute(scoped)):
                    leaking.append(f"{d.uid}: {p.title}")
    assert not leaking, "queries match pods of other endpoints:\n" + "\n".join(leaking)


def test_a_query_by_pod_returns_nothing_on_hyperpod(prometheus, default_config: Config) -> None:
    """The check bites: the label the dashboards used before (`pod`) selects nothing from the contract."""
    ns, ep = default_config.spec().endpoint.namespace, default_config.spec().endpoint.name
    assert prometheus.query(f'sum(vllm:num_requests_waiting{{namespace="{ns}", pod=~"prefill-{ep}-.*"}})') == []
    assert prometheus.query(f'sum(vllm:num_requests_waiting{{namespace="{ns}", pod_name=~"prefill-{ep}-.*"}})')
