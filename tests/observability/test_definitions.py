"""Every dashboard, alert and autoscaling query reads only series and labels the exporters' contract has.

The contract is ``shared/metrics`` (vLLM 0.19.0 and LMCache 0.4.3 as read from their wheels, plus the labels
the HyperPod metrics path adds), loaded by ``contract.py``; nothing here is derived from our catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import promql_parser
import pytest
from tests.observability import contract
from tests.observability.conftest import every_query

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry.labels import CollectorLabels
from hyperpod_core.telemetry.queries import Target, gauge, quantile, rate_sum, series


def test_the_contract_is_read_from_the_shared_files(contract_series: dict[str, frozenset[str]]) -> None:
    # vllm-0.19.0.json / lmcache-0.4.3.json (families with literal names) and the SOURCES.md sidecar names.
    assert "vllm:request_success_total" in contract_series
    assert "lmcache:num_hit_tokens_total" in contract_series
    assert "model_invocations_total" in contract_series
    assert {"pod_name", "namespace", "metric_source"} <= contract_series["vllm:num_requests_waiting"]
    assert "pod" not in contract_series["vllm:num_requests_waiting"]
    assert len(contract_series) > 150


def test_every_catalogue_metric_is_in_the_contract_with_its_labels(
        contract_families: list[contract.Family]) -> None:
    by_name = {f.name: f for f in contract_families}
    for metric in m.CATALOGUE:
        family = by_name.get(metric.family)
        assert family is not None, f"{metric.name} is not a family of the contract"
        assert family.kind == metric.type, f"{metric.name}: contract kind {family.kind}, catalogue {metric.type}"
        assert metric.series() in family.exposed_as or metric.type == "histogram"
        missing = set(metric.labels) - set(family.labels)
        assert not missing, f"{metric.name}: labels {missing} are not in the contract"


def test_every_query_reads_only_contract_series_and_labels(
        default_config: Config, default_config_dict: dict, contract_series: dict[str, frozenset[str]],
        contract_families: list[contract.Family], grafana_substitute: Callable[[str], str]) -> None:
    queries = every_query(default_config, default_config_dict)
    assert len(queries) > 60
    buckets = contract.series_buckets(contract_families)
    bad = [f"{where}: {v}" for where, expr in queries
           for v in contract.violations(grafana_substitute(expr), contract_series, buckets)]
    assert not bad, "queries outside the contract:\n" + "\n".join(bad)


def test_a_query_on_a_bucket_the_exporter_does_not_write_is_a_violation(
        contract_series: dict[str, frozenset[str]], contract_families: list[contract.Family]) -> None:
    """The old TTFT test's invented ``le="1.2"`` is caught; the real 2.5 and a whole number in both spellings
    (``le=~"5(\\.0)?"``) are not (vllm-0.19.0.json, vllm:time_to_first_token_seconds buckets)."""
    buckets = contract.series_buckets(contract_families)
    ttft = "vllm:time_to_first_token_seconds_bucket"
    assert contract.violations(f'sum(rate({ttft}{{le="1.2"}}[5m]))', contract_series, buckets) == [
        f'{ttft}{{le MatchOp.Equal "1.2"}} selects 0 buckets']
    assert contract.violations(f'sum(rate({ttft}{{le="2.5"}}[5m]))', contract_series, buckets) == []
    assert contract.violations(f'sum(rate({ttft}{{le=~"5(\\\\.0)?"}}[5m]))', contract_series, buckets) == []


def test_the_catalogue_buckets_are_the_contracts(contract_families: list[contract.Family]) -> None:
    """The bucket boundaries kept in core (catalogue.py, the one place the config's SLO check and the alerts read)
    equal the exporters' lists in shared/metrics. Where the contract names the source variable instead of a list
    (vLLM's ``request_latency_buckets``), every family the contract gives that variable has the catalogue's one
    list for it."""
    listed = {f.name: f.buckets for f in contract_families if f.kind == "histogram" and f.buckets is not None}
    raw = contract.raw_buckets()
    checked = 0
    for metric in m.CATALOGUE:
        if metric.type != "histogram":
            continue
        if metric.family in listed:
            assert metric.buckets == listed[metric.family], metric.name
            checked += 1
        else:  # LMCache's named lists: no SLO is read from them, so the catalogue keeps none
            assert metric.buckets == (), metric.name
    assert checked == 6
    named = {name for name, b in raw.items() if b == "request_latency_buckets"}
    assert {m.E2E_LATENCY.family, m.QUEUE_TIME.family, m.PREFILL_TIME.family} <= named
    assert isinstance(raw[m.TIME_TO_FIRST_TOKEN.family], list), "TTFT's list is literal in the contract"


@pytest.mark.parametrize(("expr", "expected"), [
    # What the dashboards and alerts asked before: `pod` is not a label on HyperPod inference series.
    ('sum(vllm:num_requests_waiting{namespace="default", pod=~"prefill-x-[a-z0-9]+-[a-z0-9]+"})',
     "vllm:num_requests_waiting has no label 'pod'"),
    # LMCache 0.4.3 has no such counters.
    ('sum(rate(lmcache:num_retrieve_retrieved_tokens_total{namespace="default"}[5m]))',
     "series lmcache:num_retrieve_retrieved_tokens_total is not in the contract"),
    # Removed in vLLM 0.12.
    ("max(vllm:gpu_cache_usage_perc)", "series vllm:gpu_cache_usage_perc is not in the contract"),
    ('sum by (pod) (vllm:num_requests_running{pod_name="a"})', "aggregation by 'pod'"),
])
def test_fails_when_a_query_names_a_series_or_label_outside_the_contract(
        expr: str, expected: str, contract_series: dict[str, frozenset[str]]) -> None:
    assert any(expected in v for v in contract.violations(expr, contract_series)), expected


def test_contract_directory_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(contract.ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="HYPERPOD_METRICS_DIR"):
        contract.metrics_dir()


def test_catalogue_names_are_unique_and_pinned_to_the_worker_image() -> None:
    names = [metric.name for metric in m.CATALOGUE]
    assert len(names) == len(set(names))
    assert "0.19.0" in m.VLLM.version and "0.4.3" in m.LMCACHE.version
    assert "gpu_cache_usage_perc" in (m.KV_CACHE_USAGE.renamed_from or "")
    assert "time_per_output_token_seconds" in (m.INTER_TOKEN_LATENCY.renamed_from or "")


def test_an_invalid_expression_is_rejected_by_the_parser() -> None:
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(vllm:num_preemptions_total[5m])")


def test_kv_load_failures_count_abort_and_error(default_config: Config) -> None:
    """SOURCES.md: a failed KV load finishes with finished_reason="error", a client abort with "abort"."""
    from hyperpod_core.telemetry.dashboards import dpd_overview

    (panel,) = [p for p in dpd_overview(default_config.spec()).panels if p.title == "Aborted or failed requests"]
    assert 'finished_reason=~"abort|error"' in panel.queries[0].expr


def test_retrieve_speed_is_a_rate_ratio_not_a_saturating_quantile(default_config: Config) -> None:
    """SOURCES.md: lmcache:retrieve_speed's largest bucket is far below EFA speeds; hit tokens over retrieve
    time does not saturate."""
    from hyperpod_core.telemetry.dashboards import dashboards

    exprs = [q.expr for d in dashboards(default_config.spec()) for p in d.panels for q in p.queries]
    assert not [e for e in exprs if "retrieve_speed" in e]
    (speed,) = [q.expr for d in dashboards(default_config.spec())[:1] for p in d.panels for q in p.queries
                if q.legend.startswith("retrieve speed")]
    assert "lmcache:num_hit_tokens_total" in speed and "lmcache:time_to_retrieve_sum" in speed


DPD = Target(namespace="default", endpoint="llama", kind="dpd")
COLOCATED = Target(namespace="default", endpoint="llama", kind="colocated")
EXACT = Target(namespace="default", endpoint="llama", kind="dpd", revisions=False)


@pytest.mark.parametrize(("target", "role", "pod", "matches"), [
    (DPD, "prefill", "prefill-llama-6d5f7c8b9-x2k4p", True),
    (DPD, "prefill", "decode-llama-6d5f7c8b9-x2k4p", False),
    (DPD, "decode", "decode-llama-5b8c9d7f6-klm2n", True),
    (DPD, "decode", "decode-llama-x-5b8c9d7f6-klm2n", False),
    (DPD, "any", "prefill-llama-6d5f7c8b9-x2k4p", True),
    (DPD, "any", "llama-7f6d5c4b3-pq9rs", False),
    # The colocated manifest keeps the DPD name: its pods are "<name>-<rs>-<pod>", never the DPD pods.
    (COLOCATED, "decode", "llama-7f6d5c4b3-pq9rs", True),
    (COLOCATED, "decode", "decode-llama-5b8c9d7f6-klm2n", False),
    (COLOCATED, "any", "llama-extra-7f6d5c4b3-pq9rs", False),
    # A blue/green revision (hyperpod-dpd rollout: InferenceEndpointConfig llama-r<N>) serves the same endpoint.
    (DPD, "prefill", "prefill-llama-r3-6d5f7c8b9-x2k4p", True),
    (DPD, "decode", "decode-llama-r12-5b8c9d7f6-klm2n", True),
    (DPD, "any", "decode-llama-r1-5b8c9d7f6-klm2n", True),
    (DPD, "decode", "decode-llama-rx-5b8c9d7f6-klm2n", False),
    (COLOCATED, "decode", "llama-r2-7f6d5c4b3-pq9rs", True),
    # An InferenceEndpointConfig's own autoscaling queries: its pods only, never another revision's.
    (EXACT, "prefill", "prefill-llama-6d5f7c8b9-x2k4p", True),
    (EXACT, "prefill", "prefill-llama-r3-6d5f7c8b9-x2k4p", False),
])
def test_pod_regex(target: Target, role, pod: str, matches: bool) -> None:
    # Prometheus anchors regex matchers, like fullmatch.
    assert bool(re.fullmatch(target.pod_regex(role), pod)) is matches


def test_the_router_of_every_revision_is_the_endpoints() -> None:
    """The router runs as ``<iec>-<ns>-router-<rs>-<pod>`` (operator.md (e)): a revision's is ``llama-r2-default-...``;
    endpoint ``llama-x``'s is not llama's."""
    for pod, matches in (("llama-default-router-5d4c3b2a1-rt7uv", True), ("llama-r2-default-router-5d4c3b2a1-rt7uv",
                                                                          True),
                         ("llama-x-default-router-5d4c3b2a1-rt7uv", False)):
        assert bool(re.fullmatch(DPD.router_pod_regex(), pod)) is matches, pod


def test_selectors_use_the_labels_of_each_path() -> None:
    assert 'pod_name=~"prefill-llama-' in series(m.NUM_REQUESTS_WAITING, DPD, "prefill")
    custom = Target(namespace="default", endpoint="llama", kind="dpd",
                    collector=CollectorLabels(dcgm_pod="exported_pod", dcgm_namespace="exported_namespace"))
    assert series(m.GPU_UTIL, custom, "decode").startswith(
        'DCGM_FI_DEV_GPU_UTIL{exported_namespace="default", exported_pod=~"decode-llama-')
    assert 'pod=~"' in series(m.POD_RESTARTS, custom, "any")


def test_fails_when_role_does_not_exist_on_the_endpoint() -> None:
    with pytest.raises(ValueError, match="role 'worker' does not exist on a dpd endpoint"):
        DPD.pod_regex("worker")


def test_fails_when_the_function_does_not_fit_the_metric_type() -> None:
    with pytest.raises(ValueError, match="is a gauge; rate"):
        rate_sum(m.KV_CACHE_USAGE, DPD, "decode")
    with pytest.raises(ValueError, match="quantiles need a histogram"):
        quantile(0.9, m.GENERATION_TOKENS, DPD, "decode")
    with pytest.raises(ValueError, match="use rate_sum"):
        gauge("sum", m.GENERATION_TOKENS, DPD, "decode")
    with pytest.raises(ValueError, match="only histograms have '_bucket'"):
        m.KV_CACHE_USAGE.series("_bucket")


def test_autoscaling_triggers_use_the_same_query_definitions_as_dashboards_and_alerts(
        default_config: Config, default_config_dict: dict) -> None:
    """One definition: the trigger query is the dashboard's signal with the endpoint filled in, and the alert
    reads the same expression. The dashboards and alerts watch the endpoint's pods of every blue/green revision
    (``queries.REVISION``); a trigger, the InferenceEndpointConfig's own, only its own pods."""
    from tests.observability.conftest import autoscaling_config, substitute

    from hyperpod_core.telemetry.alerts import alert_rule_groups
    from hyperpod_core.telemetry.dashboards import dpd_overview
    from hyperpod_core.telemetry.queries import REVISION
    from hyperpod_k8s.endpoint.props import _scaling

    config = autoscaling_config(default_config_dict)
    prefill, decode = (_scaling(config.spec(), role) for role in ("prefill", "decode"))
    assert prefill is not None and decode is not None
    assert REVISION not in prefill.query + decode.query
    panels = {p.title: p for p in dpd_overview(config.spec()).panels}
    assert substitute(panels["Prefill queue"].queries[0].expr, config).replace(REVISION, "") == prefill.query
    assert substitute(panels["Decode KV-cache usage"].queries[0].expr, config).replace(REVISION, "") == decode.query
    rules = {r["alert"]: r["expr"].replace(REVISION, "") for r in alert_rule_groups(config.specs())["groups"][0][
        "rules"]}
    assert rules["DpdDecodeKvCacheSaturated"].startswith(decode.query + " > ")
    assert prefill.query in rules["DpdPrefillQueueGrowing"]


def test_worker_sets_prometheus_multiproc_dir_for_vllm_and_lmcache(default_config: Config) -> None:
    """LMCache series reach vLLM's /metrics only with PROMETHEUS_MULTIPROC_DIR set for both processes
    (SOURCES.md). The CRD's worker has no volume mounts besides the model (shared/crds), so it points at /tmp."""
    from tests.k8s.endpoint_props import props_of

    props = props_of(default_config)
    for env in (props.dpd_environment, props.colocated_environment):
        assert dict(env)["PROMETHEUS_MULTIPROC_DIR"] == "/tmp"
