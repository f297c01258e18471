"""Alerts: valid rules (promtool check rules) and one promtool unit test per alert: fires / stays quiet.

Input series are contract-shaped: every label the contract (``shared/metrics`` via ``contract.py``) says the
series carries on HyperPod, with the pod in ``pod_name`` for vLLM/LMCache/sidecar series.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.observability import contract

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.alerts import (
    CLUSTER_METRICS_ABSENT,
    ENDPOINT_DOWN,
    HEARTBEAT,
    INFERENCE_METRICS_ABSENT,
    alert_rule_groups,
    alerts,
    cluster_alerts,
)
from hyperpod_core.telemetry.targets import collector_labels

EVAL_TIME = "30m"


def _pods(config: Config) -> dict[str, str]:
    """Pod names by the role they play in the scenarios, for the endpoint ``config.spec().endpoint.apply`` deploys.

    DPD: two prefill pods and a decode pod. Colocated: the worker pods (same endpoint name, no role prefix) play
    both the prefill and the decode role; ``bystander`` is a pod whose saturation is not this endpoint's
    problem (a DPD prefill pod, or on colocated another endpoint's worker, ``<ep>-extra``)."""
    ep, ns = config.spec().endpoint.name, config.spec().endpoint.namespace
    common = {"ns": ns,
              # The router in the operator's namespace (operator.md (e): <iec>-<ns>-router-XXXX) and the colocated
              # pods (same endpoint name, no role prefix).
              "router": f"{ep}-{ns}-router-5d4c3b2a1-rt7uv", "worker": f"{ep}-7f6d5c4b3-pq9rs",
              "dpd_prefill": f"prefill-{ep}-6d5f7c8b9-x2k4p", "dpd_decode": f"decode-{ep}-5b8c9d7f6-klm2n"}
    if config.spec().endpoint.apply == "dpd":
        return {**common, "prefill": f"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill2": f"prefill-{ep}-6d5f7c8b9-q7w8e",
                "decode": f"decode-{ep}-5b8c9d7f6-klm2n", "bystander": f"prefill-{ep}-6d5f7c8b9-x2k4p"}
    return {**common, "prefill": f"{ep}-7f6d5c4b3-pq9rs", "prefill2": f"{ep}-7f6d5c4b3-zt5wx",
            "decode": f"{ep}-7f6d5c4b3-pq9rs", "bystander": f"{ep}-extra-7f6d5c4b3-ab1cd"}


def _ready(config: Config, pod: str, ready: bool, namespace: str | None = None) -> list[dict]:
    """kube_pod_status_ready as kube-state-metrics writes it: 1 on the pod's current condition, 0 on the others."""
    extra = {"namespace": namespace} if namespace else {}
    return [_s(m.POD_READY, pod, f"{int(cond == ('true' if ready else 'false'))}x40", config, condition=cond,
               **extra) for cond in ("true", "false", "unknown")]


def _s(metric: m.Metric, pod: str, values: str, config: Config, suffix: str = "", **labels: str) -> dict:
    """One input series with every label the contract gives ``metric`` on HyperPod."""
    collector = collector_labels(config.observability)
    (family,) = [f for f in contract.families(collector) if f.name == metric.family]
    all_labels = {x: f"{x}-value" for x in family.labels}
    all_labels.update({metric.namespace_label(collector): config.spec().endpoint.namespace,
                       metric.pod_label(collector): pod})
    if family.metric_source is not None:
        all_labels[lbl.METRIC_SOURCE] = family.metric_source
    all_labels.update(labels)
    body = ", ".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{metric.series(suffix)}{{{body}}}", "values": values}


def _grow(per_minute: float, busy_minutes: int = 40) -> str:
    """A counter's values for 40 minutes: ``per_minute`` more each minute for ``busy_minutes``, then flat (idle)."""
    grows = f"0+{per_minute:g}x{busy_minutes}"
    return grows if busy_minutes == 40 else f"{grows} {per_minute * busy_minutes:g}x{39 - busy_minutes}"


def _hist(metric: m.Metric, pod: str, per_minute: dict[float, float], config: Config, *,
          busy_minutes: int = 40) -> list[dict]:
    """A histogram as the exporter writes it, from the CONTRACT's bucket list only (``contract.py``: the lists
    of shared/metrics, never the catalogue's): ``per_minute`` maps a latency (seconds) to the requests a minute
    that take it (for ``busy_minutes``, then none); every contract boundary's bucket (``le`` as prometheus_client
    writes it) counts those at or below it, then ``+Inf``, ``_sum`` and ``_count``."""
    (family,) = [f for f in contract.families(collector_labels(config.observability)) if f.name == metric.family]
    assert family.buckets, f"the contract has no bucket list for {metric.name}"
    total = sum(per_minute.values())
    series = [_s(metric, pod, _grow(sum(n for v, n in per_minute.items() if v <= b), busy_minutes), config,
                 "_bucket", le=contract.exposed_le(b)) for b in family.buckets]
    series.append(_s(metric, pod, _grow(total, busy_minutes), config, "_bucket", le="+Inf"))
    return [*series, _s(metric, pod, _grow(sum(v * n for v, n in per_minute.items()), busy_minutes), config, "_sum"),
            _s(metric, pod, _grow(total, busy_minutes), config, "_count")]


def _user_ttft(config: Config, leg_s: float, per_minute: int = 60) -> list[dict]:
    """Every request spends ``leg_s`` in each leg the user waits for: on DPD the prefill leg (E2E on the prefill
    pods) and the decode TTFT; on colocated the engine's TTFT (one leg)."""
    p = _pods(config)
    legs = ([(m.E2E_LATENCY, p["prefill"]), (m.TIME_TO_FIRST_TOKEN, p["decode"])]
            if config.spec().endpoint.apply == "dpd" else [(m.TIME_TO_FIRST_TOKEN, p["decode"])])
    return [x for metric, pod in legs for x in _hist(metric, pod, {leg_s: per_minute}, config)]


#: The inference requests on the sidecar's labels (AWS's HyperPod inference dashboard: method="POST",
#: uri="/invocations"; aws/sagemaker-hyperpod-cluster-setup @ 6e045f89fe89, .../templates/inference.json).
INVOKE = {"method": "POST", "uri": "/invocations", "status": "200"}
FAILED = {**INVOKE, "status": "500"}
#: A probe through the proxy: no inference request.
PROBE = {"method": "GET", "uri": "/ping", "status": "200"}


def _visible(config: Config) -> list[dict]:
    """kube-state-metrics sees the cluster: a ready pod of something else in the endpoint's namespace and the
    operator's controller in its namespace."""
    return [*_ready(config, "unrelated-5c4b3a2f1-zz9aa", True),
            *_ready(config, "hyperpod-inference-operator-6b5c4d3e2-op1qr", True, "hyperpod-inference-system")]


def _inference(config: Config, pod: str) -> list[dict]:
    """A pod's vLLM gauge and sidecar counter, as a healthy pod sends them."""
    return [_s(m.NUM_REQUESTS_RUNNING, pod, "3x40", config), _s(m.MODEL_INVOCATIONS, pod, "0+60x40", config,
                                                                **INVOKE)]


def _scenarios(config: Config) -> dict[str, tuple[list[dict], list[dict], dict[str, str]]]:
    """alert -> (series that make it fire, series that must not, extra labels of the fired alert), for the
    endpoint ``config.spec().endpoint.apply`` deploys (its pods from :func:`_pods`)."""
    p = _pods(config)
    dpd = config.spec().endpoint.apply == "dpd"
    slo = config.observability.slo.ttft_p95_seconds
    tpot = config.observability.slo.tpot_p95_seconds
    waiting = m.NUM_REQUESTS_WAITING
    operator_ns = "hyperpod-inference-system"
    router = _ready(config, p["router"], True, operator_ns)
    if dpd:
        down = ([*_ready(config, p["prefill"], True), *_ready(config, p["decode"], False), *router],
                [*_ready(config, p["prefill"], True), *_ready(config, p["decode"], True), *router],
                {"component": "decode"})
        # 600 disaggregated requests a minute: 600 prefill legs (all fine) and 600 decode legs, 9 of which fail.
        # Per request that is 1.5 % (> 1 %); per invocation it would read 0.75 % and stay quiet.
        errors = ([_s(m.MODEL_INVOCATIONS, p["prefill"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["prefill"], "0x40", config, **FAILED),
                   _s(m.MODEL_INVOCATIONS, p["decode"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["decode"], "0+9x40", config, **FAILED)],
                  [_s(m.MODEL_INVOCATIONS, p["prefill"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["prefill"], "0x40", config, **FAILED),
                   _s(m.MODEL_INVOCATIONS, p["decode"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["decode"], "0+3x40", config, **FAILED)], {})
        # Decode is Ready and finishes requests, but its vLLM series do not arrive (prefill's do).
        absent = ([*_ready(config, p["prefill"], True), *_ready(config, p["decode"], True),
                   *_inference(config, p["prefill"])],
                  [*_ready(config, p["prefill"], True), *_ready(config, p["decode"], True),
                   *_inference(config, p["prefill"]), *_inference(config, p["decode"])],
                  {"component": "decode", "pod_name": p["decode"]})
    else:
        down = ([*_ready(config, p["worker"], False), *router], [*_ready(config, p["worker"], True), *router],
                {"component": "worker"})
        # Colocated: one invocation per request; 9 of 600 (1.5 %) fail vs 3 of 600 (0.5 %).
        errors = ([_s(m.MODEL_INVOCATIONS, p["worker"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["worker"], "0+9x40", config, **FAILED)],
                  [_s(m.MODEL_INVOCATIONS, p["worker"], "0+600x40", config, **INVOKE),
                   _s(m.MODEL_ERRORS, p["worker"], "0+3x40", config, **FAILED)], {})
        absent = ([*_ready(config, p["worker"], True)],
                  [*_ready(config, p["worker"], True), *_inference(config, p["worker"])],
                  {"component": "worker", "pod_name": p["worker"]})
    out = {
        "DpdEndpointDown": down,
        "DpdDecodeKvCacheSaturated": (
            [_s(m.KV_CACHE_USAGE, p["decode"], "0.97x40", config)],
            # A saturated pod that is not ours to watch (a prefill pod; another endpoint) is not this problem.
            [_s(m.KV_CACHE_USAGE, p["decode"], "0.5x40", config),
             _s(m.KV_CACHE_USAGE, p["bystander"], "0.99x40", config)], {}),
        "DpdPrefillQueueGrowing": (
            [_s(waiting, p["prefill"], "0+1x40", config), _s(waiting, p["prefill2"], "0+1x40", config)],
            # Long but steady queue: above the threshold, not growing.
            [_s(waiting, p["prefill"], "20x40", config), _s(waiting, p["prefill2"], "20x40", config)], {}),
        "DpdInferenceMetricsAbsent": absent,
        # The cluster series do not arrive at all (the inference series do) vs kube-state-metrics sees both namespaces.
        "DpdClusterMetricsAbsent": (_inference(config, p["decode"]),
                                    [*_inference(config, p["decode"]), *_visible(config)], {}),
        # SLO 2.5 s (a boundary of the contract's TTFT buckets): 10 % of requests at 4 s vs all at 2.4 s.
        "DpdTtftSloBreach": (
            _hist(m.TIME_TO_FIRST_TOKEN, p["decode"], {0.5: 54, 1.6 * slo: 6}, config),
            _hist(m.TIME_TO_FIRST_TOKEN, p["decode"], {0.96 * slo: 60}, config), {}),
        # Users wait 1.2 x SLO on average (DPD: both legs at 0.6 x SLO; colocated: one leg at 1.2 x SLO) vs 0.8 x.
        "DpdUserTtftMeanAboveSlo": (
            _user_ttft(config, (0.6 if dpd else 1.2) * slo), _user_ttft(config, (0.4 if dpd else 0.8) * slo), {}),
        # SLO 0.1 s: 10 % of requests at 0.2 s vs all at 0.09 s.
        "DpdTpotSloBreach": (
            _hist(m.REQUEST_TPOT, p["decode"], {0.05: 54, 2 * tpot: 6}, config),
            _hist(m.REQUEST_TPOT, p["decode"], {0.9 * tpot: 60}, config), {}),
        "DpdErrorRatioHigh": errors,
        "DpdPodRestartLoop": (
            [_s(m.POD_RESTARTS, p["decode"], "0+1x40", config, container="decode")],
            [_s(m.POD_RESTARTS, p["decode"], "0x10 1x30", config, container="decode")], {"pod": p["decode"]}),
        "DpdRequestsAbortedOrFailed": (
            # A failed KV load finishes with "error" (SOURCES.md); "abort" counts too.
            [_s(m.REQUEST_SUCCESS, p["decode"], "0+600x40", config, finished_reason="stop"),
             _s(m.REQUEST_SUCCESS, p["decode"], "0+30x40", config, finished_reason="error"),
             _s(m.REQUEST_SUCCESS, p["decode"], "0+30x40", config, finished_reason="abort")],
            # Normal endings only ("length" is a normal ending too).
            [_s(m.REQUEST_SUCCESS, p["decode"], "0+600x40", config, finished_reason="stop"),
             _s(m.REQUEST_SUCCESS, p["decode"], "0+60x40", config, finished_reason="length"),
             _s(m.REQUEST_SUCCESS, p["decode"], "0+1x40", config, finished_reason="error")], {}),
    }
    if dpd:  # what only exists with disaggregation
        out["DpdPrefillLegSlow"] = (
            # The prefill leg's E2E on the prefill pods (the router waits for it) is slow; decode may look fine.
            _hist(m.E2E_LATENCY, p["prefill"], {0.5: 54, 1.6 * slo: 6}, config),
            _hist(m.E2E_LATENCY, p["prefill"], {0.96 * slo: 60}, config), {})
        out["DpdKvTransferIncomplete"] = (
            [_s(m.LMCACHE_REQUESTED_TOKENS, p["decode"], "0+1000x40", config),
             _s(m.LMCACHE_HIT_TOKENS, p["decode"], "0+800x40", config)],
            [_s(m.LMCACHE_REQUESTED_TOKENS, p["decode"], "0+1000x40", config),
             _s(m.LMCACHE_HIT_TOKENS, p["decode"], "0+995x40", config)], {})
    return out


#: Alerts of both modes (the prefill-leg and KV-transfer alerts exist only on DPD).
COMMON_ALERTS = ("DpdEndpointDown", INFERENCE_METRICS_ABSENT, CLUSTER_METRICS_ABSENT, "DpdDecodeKvCacheSaturated",
                 "DpdPrefillQueueGrowing", "DpdTtftSloBreach",
                 "DpdUserTtftMeanAboveSlo", "DpdTpotSloBreach", "DpdErrorRatioHigh", "DpdRequestsAbortedOrFailed",
                 "DpdPodRestartLoop")
DPD_ONLY_ALERTS = ("DpdPrefillLegSlow", "DpdKvTransferIncomplete")


MODES = ("dpd", "colocated")


@pytest.fixture(scope="module")
def configs(default_config: Config, colocated_config: Config) -> dict[str, Config]:
    """The default config per value of ``endpoint.apply``."""
    return {"dpd": default_config, "colocated": colocated_config}


@pytest.fixture(scope="module")
def rules_files(configs: dict[str, Config], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for mode, config in configs.items():
        path = tmp_path_factory.mktemp(f"rules-{mode}") / "rules.yml"
        path.write_text(yaml.safe_dump(alert_rule_groups(config.specs()), sort_keys=False))
        out[mode] = path
    return out


@pytest.mark.parametrize("mode", MODES)
def test_promtool_check_rules(mode: str, rules_files: dict[str, Path], promtool: str) -> None:
    out = subprocess.run([promtool, "check", "rules", str(rules_files[mode])], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alerts_of(rules_files[mode]))} rules found" in out.stdout


def alerts_of(rules_file: Path) -> list[dict]:
    return [r for g in yaml.safe_load(rules_file.read_text())["groups"] for r in g["rules"]]


@pytest.mark.parametrize("mode", MODES)
def test_every_alert_has_a_unit_test_and_a_runbook(mode: str, configs: dict[str, Config]) -> None:
    config = configs[mode]
    names = [a.name for a in (*alerts(config.spec()), *cluster_alerts(collector_labels(config.observability)))]
    assert len(names) == len(set(names))
    assert set(names) == set(_scenarios(config)) | {HEARTBEAT}
    assert set(names) == {*COMMON_ALERTS, HEARTBEAT, *(DPD_ONLY_ALERTS if mode == "dpd" else ())}
    rules = [r for g in alert_rule_groups(config.specs())["groups"] for r in g["rules"]]
    assert sorted(r["alert"] for r in rules) == sorted(names)
    for rule in rules:
        assert rule["annotations"]["runbook"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical") or rule["alert"] == HEARTBEAT
        assert rule["labels"]["alert_kind"] in ("pd", "availability", "heartbeat")
    kinds = {r["alert"]: r["labels"]["alert_kind"] for r in rules}
    # Only the availability alerts survive an endpoint outage: they name its cause.
    assert {a for a, k in kinds.items() if k != "pd"} == {ENDPOINT_DOWN, "DpdPodRestartLoop", HEARTBEAT,
                                                          INFERENCE_METRICS_ABSENT, CLUSTER_METRICS_ABSENT}


def _promtool_test(promtool: str, rules_file: Path, tmp_path: Path, tests: list[dict]) -> None:
    test_file = tmp_path / "test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def _expected(rule: dict, extra_labels: dict[str, str]) -> dict:
    annotations = dict(rule["annotations"])
    for label in ("component", "pod_name"):
        annotations = {k: v.replace(f"{{{{ $labels.{label} }}}}", extra_labels.get(label, ""))
                       for k, v in annotations.items()}
    return {"exp_labels": {**rule["labels"], **extra_labels}, "exp_annotations": annotations}


@pytest.mark.parametrize(("mode", "alert"), [*(("dpd", a) for a in (*COMMON_ALERTS, *DPD_ONLY_ALERTS)),
                                             *(("colocated", a) for a in COMMON_ALERTS)])
def test_promtool_unit_test(mode: str, alert: str, configs: dict[str, Config], rules_files: dict[str, Path],
                            tmp_path: Path, promtool: str) -> None:
    """Each alert fires on the pods of the endpoint ``endpoint.apply`` deploys (colocated: its worker pods) and
    stays quiet otherwise."""
    fire, quiet, extra_labels = _scenarios(configs[mode])[alert]
    (rule,) = [r for r in alerts_of(rules_files[mode]) if r["alert"] == alert]
    _promtool_test(promtool, rules_files[mode], tmp_path, [
        {"name": f"{alert} fires", "interval": "1m", "input_series": fire,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert,
                              "exp_alerts": [_expected(rule, extra_labels)]}]},
        {"name": f"{alert} stays quiet", "interval": "1m", "input_series": quiet,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": []}]},
    ])


@pytest.mark.parametrize(("mode", "other"), [("dpd", "colocated"), ("colocated", "dpd")])
def test_alerts_watch_only_the_applied_endpoint(mode: str, other: str, configs: dict[str, Config],
                                                rules_files: dict[str, Path], tmp_path: Path, promtool: str) -> None:
    """The other mode's pods (a manifest in dist/alternate/, not applied) do not page: what makes an alert fire
    on the other mode's pods leaves this mode's rules quiet."""
    # Endpoint-down has its own test below; the cluster series are not any one endpoint's.
    cases = [a for a in COMMON_ALERTS if a not in (ENDPOINT_DOWN, CLUSTER_METRICS_ABSENT)]
    _promtool_test(promtool, rules_files[mode], tmp_path, [
        {"name": f"{alert} on {other} pods", "interval": "1m", "input_series": _scenarios(configs[other])[alert][0],
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": []}]} for alert in cases])


def test_users_ttft_alert_fires_when_each_leg_is_within_the_slo(default_config: Config,
                                                                 rules_files: dict[str, Path], tmp_path: Path,
                                                                 promtool: str) -> None:
    """Both legs at 0.6 x the TTFT SLO: each leg's p95 is below it (the leg alerts stay quiet), the users wait
    1.2 x SLO, and only the mean alert sees it (the router waits for the prefill leg, then the decode TTFT:
    production-stack route_disaggregated_prefill_request; means add)."""
    slo = default_config.observability.slo.ttft_p95_seconds
    series = _user_ttft(default_config, 0.6 * slo)
    quiet = [{"eval_time": EVAL_TIME, "alertname": a, "exp_alerts": []}
             for a in ("DpdTtftSloBreach", "DpdPrefillLegSlow")]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == "DpdUserTtftMeanAboveSlo"]
    assert f"> {slo}) and on() (" in rule["expr"]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "0.6 + 0.6 x SLO", "interval": "1m", "input_series": series, "alert_rule_test": [
            *quiet, {"eval_time": EVAL_TIME, "alertname": "DpdUserTtftMeanAboveSlo",
                     "exp_alerts": [_expected(rule, {})]}]},
        {"name": "0.45 + 0.45 x SLO", "interval": "1m", "input_series": _user_ttft(default_config, 0.45 * slo),
         "alert_rule_test": [*quiet, {"eval_time": EVAL_TIME, "alertname": "DpdUserTtftMeanAboveSlo",
                                      "exp_alerts": []}]},
    ])


@pytest.mark.parametrize("mode", MODES)
def test_heartbeat_always_fires(mode: str, rules_files: dict[str, Path], tmp_path: Path, promtool: str) -> None:
    """With no series at all (a silent cluster), the heartbeat still fires: its absence downstream is the alarm."""
    (rule,) = [r for r in alerts_of(rules_files[mode]) if r["alert"] == HEARTBEAT]
    _promtool_test(promtool, rules_files[mode], tmp_path, [
        {"name": "heartbeat", "interval": "1m", "input_series": [],
         "alert_rule_test": [{"eval_time": "1m", "alertname": HEARTBEAT, "exp_alerts": [_expected(rule, {})]}]}])


@pytest.mark.parametrize("mode", MODES)
def test_endpoint_down_stays_quiet_when_the_other_mode_serves(mode: str, configs: dict[str, Config],
                                                              rules_files: dict[str, Path], tmp_path: Path,
                                                              promtool: str) -> None:
    """A rollback (the other manifest re-applied: same name) or a benchmark switch removes this mode's pods; the
    endpoint still serves, so nobody is paged. With neither mode ready it fires for every missing component."""
    config = configs[mode]
    p = _pods(config)
    router = _ready(config, p["router"], True, "hyperpod-inference-system")
    if mode == "dpd":
        other_serves = [*_ready(config, p["worker"], True), *router]
        nothing = [*_ready(config, p["worker"], False), *router]
        missing = ("prefill", "decode")
    else:
        other_serves = [*_ready(config, p["dpd_prefill"], True), *_ready(config, p["dpd_decode"], True), *router]
        nothing = [*_ready(config, p["dpd_prefill"], False), *router]
        missing = ("worker",)
    (rule,) = [r for r in alerts_of(rules_files[mode]) if r["alert"] == ENDPOINT_DOWN]
    _promtool_test(promtool, rules_files[mode], tmp_path, [
        {"name": "the other mode serves", "interval": "1m", "input_series": other_serves,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN, "exp_alerts": []}]},
        {"name": "nothing serves", "interval": "1m", "input_series": nothing,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN,
                              "exp_alerts": [_expected(rule, {"component": c}) for c in missing]}]},
    ])


def _of_revision(series: list[dict], config: Config, revision: str) -> list[dict]:
    """The same series from the pods of blue/green revision ``<endpoint>-<revision>`` (hyperpod-dpd rollout applies
    the new revision as an InferenceEndpointConfig of that name: pods ``prefill-<endpoint>-r1-...``, router
    ``<endpoint>-r1-<ns>-router-...``, colocated workers ``<endpoint>-r1-...``)."""
    ep = re.escape(config.spec().endpoint.name)
    return [{**x, "series": re.sub(rf'"((?:prefill|decode)-)?{ep}-',
                                   lambda m: f'"{m[1] or ""}{config.spec().endpoint.name}-{revision}-', x["series"])}
            for x in series]


@pytest.mark.parametrize("mode", MODES)
def test_alerts_watch_the_revision_that_serves(mode: str, configs: dict[str, Config], rules_files: dict[str, Path],
                                               tmp_path: Path, promtool: str) -> None:
    """After a blue/green the endpoint's pods are revision r1's: its being ready keeps the endpoint-down alert quiet
    (nobody is paged for a rollout that went well), and its saturation and queue fire the endpoint's alerts."""
    config = configs[mode]
    tests = []
    for alert in (ENDPOINT_DOWN, "DpdDecodeKvCacheSaturated", "DpdPrefillQueueGrowing"):
        fire, quiet, extra_labels = _scenarios(config)[alert]
        (rule,) = [r for r in alerts_of(rules_files[mode]) if r["alert"] == alert]
        tests += [
            {"name": f"{alert} fires on r1", "interval": "1m", "input_series": _of_revision(fire, config, "r1"),
             "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert,
                                  "exp_alerts": [_expected(rule, extra_labels)]}]},
            {"name": f"{alert} stays quiet on r1", "interval": "1m", "input_series": _of_revision(quiet, config, "r1"),
             "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": []}]}]
    _promtool_test(promtool, rules_files[mode], tmp_path, tests)


def test_thresholds_come_from_config(default_config_dict: dict) -> None:
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    # Latency objectives are bucket boundaries (vllm-0.19.0.json): TTFT and E2E have 5 s, TPOT has 0.075 s. A whole
    # number matches both spellings of le (1.0 from prometheus_client and Prometheus 3, 1 from OTel's translator).
    data["observability"]["slo"].update(ttft_p95_seconds=5.0, tpot_p95_seconds=0.075, error_ratio=0.02,
                                        kv_cache_usage_ratio=0.85, prefill_queue_per_replica=9)
    exprs = {r["alert"]: r["expr"] for r in alert_rule_groups(parse_config(data).specs())["groups"][0]["rules"]}
    assert 'vllm:time_to_first_token_seconds_bucket{' in exprs["DpdTtftSloBreach"]
    assert 'le=~"5(\\\\.0)?"' in exprs["DpdTtftSloBreach"] and 'le=~"5(\\\\.0)?"' in exprs["DpdPrefillLegSlow"]
    assert "< 0.95) and on() (" in exprs["DpdTtftSloBreach"]
    assert 'le="0.075"' in exprs["DpdTpotSloBreach"] and "< 0.95) and on() (" in exprs["DpdTpotSloBreach"]
    assert "histogram_quantile" not in exprs["DpdTtftSloBreach"] + exprs["DpdTpotSloBreach"]
    assert exprs["DpdErrorRatioHigh"].endswith("> 0.02")
    assert exprs["DpdDecodeKvCacheSaturated"].endswith("> 0.85")
    assert "> 9" in exprs["DpdPrefillQueueGrowing"]


# --- several endpoints (issue 34): a group per endpoint with its own labels and objectives, the cluster's once ------

TWO_MODELS = Path(__file__).resolve().parents[2] / "config" / "examples" / "two-models.yaml"


@pytest.fixture(scope="module")
def fleet_rules(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, dict, Path]:
    """config/examples/two-models.yaml's rule file: the 70B at the deployment's objectives, the 8B at its own TTFT
    objective of 1 s."""
    from hyperpod_core.config import load_config

    config = load_config(TWO_MODELS)
    doc = alert_rule_groups(config.specs())
    path = tmp_path_factory.mktemp("fleet-rules") / "rules.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return config, doc, path


def test_each_endpoint_has_its_group_labelled_with_it_and_the_cluster_alerts_come_once(fleet_rules) -> None:
    """One group per endpoint, every rule labelled with its endpoint and namespace (the alert manager groups and
    inhibits on them: alertmanager.py); the heartbeat and the cluster-metrics alert once, naming no endpoint, so two
    endpoints never page twice for one cluster."""
    config, doc, _ = fleet_rules
    assert [g["name"] for g in doc["groups"]] == ["dpd-llama-3-3-70b", "dpd-llama-3-1-8b", "dpd-cluster.two-models"]
    for spec, group in zip(config.specs(), doc["groups"], strict=False):
        assert {(r["labels"]["endpoint"], r["labels"]["namespace"]) for r in group["rules"]} == {
            (spec.name, spec.namespace)}
        assert {r["alert"] for r in group["rules"]} == {a.name for a in alerts(spec)}
    cluster = doc["groups"][-1]["rules"]
    assert sorted(r["alert"] for r in cluster) == sorted([HEARTBEAT, CLUSTER_METRICS_ABSENT])
    assert all("endpoint" not in r["labels"] and "namespace" not in r["labels"] for r in cluster)
    every = [r["alert"] for g in doc["groups"] for r in g["rules"]]
    assert every.count(HEARTBEAT) == every.count(CLUSTER_METRICS_ABSENT) == 1


def test_each_endpoints_alerts_judge_its_own_objectives(fleet_rules) -> None:
    """The 8B overrides slo.ttft_p95_seconds with 1 (two-models.yaml), a TTFT bucket boundary (vllm-0.19.0.json:
    ... 0.75, 1.0, 2.5 ...); the 70B keeps the deployment's 2.5. Each group's TTFT alert counts at its own bound and
    reads its own pods."""
    _, doc, _ = fleet_rules
    ttft = {g["name"]: next(r["expr"] for r in g["rules"] if r["alert"] == "DpdTtftSloBreach")
            for g in doc["groups"][:2]}
    assert 'le=~"1(\\\\.0)?"' in ttft["dpd-llama-3-1-8b"] and "2.5" not in ttft["dpd-llama-3-1-8b"]
    assert 'le="2.5"' in ttft["dpd-llama-3-3-70b"]
    assert "decode-llama-3-1-8b-" in ttft["dpd-llama-3-1-8b"] and "llama-3-3-70b" not in ttft["dpd-llama-3-1-8b"]


def test_promtool_checks_the_rules_of_several_endpoints(fleet_rules, promtool: str) -> None:
    """Prometheus refuses a rule file whose group names repeat (promtool check rules: "groupname must be unique");
    an endpoint's group is dpd-<name> (a DNS label, no '.'), the cluster's dpd-cluster.<deployment>."""
    _, doc, path = fleet_rules
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in doc['groups'])} rules found" in out.stdout


def test_alert_rule_groups_import_neither_cdk8s_nor_aws_cdk() -> None:
    code = ("import sys; from hyperpod_core.telemetry.alerts import alert_rule_groups; "
            "from hyperpod_k8s.observability import write_dashboard_files; "
            "bad = [x for x in ('cdk8s', 'aws_cdk', 'constructs', 'jsii') if x in sys.modules]; "
            "assert not bad, bad")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": f"{root / 'infra'}:{root / 'k8s'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr


def test_ttft_slo_alert_counts_the_requests_within_the_objective(default_config: Config, rules_files: dict[str, Path],
                                                                 tmp_path: Path, promtool: str) -> None:
    """The fourth review's cases C and D (observability-review.md, section 2), on histograms built from the
    contract's TTFT buckets (... 1.0, 2.5, 5.0 ...; 60 requests a minute), against the objective 2.5 s. A quantile
    read from these buckets interpolates inside (1.0, 2.5]: all requests at 1.2 s read as p95 2.425 s. Counting the
    requests at le="2.5" needs no interpolation:
    C: every TTFT 1.2 s -> quiet; all at 2.4 s (within 2.5) -> quiet; D restated: 10 % at 4.0 s -> fires."""
    assert default_config.observability.slo.ttft_p95_seconds == 2.5
    decode = _pods(default_config)["decode"]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == "DpdTtftSloBreach"]
    cases = {"C: every TTFT 1.2 s": ({1.2: 60}, []), "every TTFT 2.4 s": ({2.4: 60}, []),
             "D: 10 % of TTFTs 4.0 s": ({0.5: 54, 4.0: 6}, [_expected(rule, {})])}
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": name, "interval": "1m",
         "input_series": _hist(m.TIME_TO_FIRST_TOKEN, decode, observations, default_config),
         "alert_rule_test": [{"eval_time": "20m", "alertname": "DpdTtftSloBreach", "exp_alerts": expected}]}
        for name, (observations, expected) in cases.items()])


def test_error_ratio_counts_only_the_inference_requests(default_config: Config, rules_files: dict[str, Path],
                                                       tmp_path: Path, promtool: str) -> None:
    """9 of 600 inference requests a minute fail (1.5 % > 1 %) while 600 probes (GET /ping) pass through the same
    proxies: counted over all traffic the ratio would read 0.75 % and stay quiet. AWS's HyperPod inference dashboard
    counts only method="POST", uri="/invocations" (inference.json @ 6e045f89fe89)."""
    p = _pods(default_config)
    series = []
    for pod, errors in ((p["prefill"], 0), (p["decode"], 9)):
        series += [_s(m.MODEL_INVOCATIONS, pod, "0+600x40", default_config, **INVOKE),
                   _s(m.MODEL_ERRORS, pod, f"0+{errors}x40", default_config, **FAILED),
                   _s(m.MODEL_INVOCATIONS, pod, "0+600x40", default_config, **PROBE)]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == "DpdErrorRatioHigh"]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "probes beside the inference requests", "interval": "1m", "input_series": series,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": "DpdErrorRatioHigh",
                              "exp_alerts": [_expected(rule, {})]}]}])


def test_missing_cluster_series_page_as_such_not_as_an_outage(default_config: Config, rules_files: dict[str, Path],
                                                              tmp_path: Path, promtool: str) -> None:
    """No kube-state-metrics series at all (the collector lost them, or writes other labels) while the pods serve:
    endpoint-down stays quiet (it cannot see the pods, so it must not say they are down, and it is the inhibition
    source), and DpdClusterMetricsAbsent says what is wrong (fourth review, finding 4)."""
    p = _pods(default_config)
    serving = [*_inference(default_config, p["prefill"]), *_inference(default_config, p["decode"])]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == CLUSTER_METRICS_ABSENT]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "no cluster series", "interval": "1m", "input_series": serving, "alert_rule_test": [
            {"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN, "exp_alerts": []},
            {"eval_time": EVAL_TIME, "alertname": CLUSTER_METRICS_ABSENT, "exp_alerts": [_expected(rule, {})]}]}])


def test_ready_pods_without_inference_series_page(default_config: Config, rules_files: dict[str, Path],
                                                  tmp_path: Path, promtool: str) -> None:
    """The fourth review's finding 3: for an hour every pod (prefill, decode, router) is Ready, restarts stay flat,
    and no vLLM, LMCache or sidecar series exist: DpdInferenceMetricsAbsent fires for both roles. And when vLLM
    finishes requests on decode but the sidecar's counters never arrive, it fires for decode."""
    p = _pods(default_config)
    router = _ready(default_config, p["router"], True, "hyperpod-inference-system")
    ready = [*_ready(default_config, p["prefill"], True), *_ready(default_config, p["decode"], True), *router,
             *(_s(m.POD_RESTARTS, pod, "3x40", default_config, container=role)
               for pod, role in ((p["prefill"], "prefill"), (p["decode"], "decode")))]
    no_sidecar = [*ready, *_inference(default_config, p["prefill"]),
                  _s(m.NUM_REQUESTS_RUNNING, p["decode"], "3x40", default_config),
                  _s(m.REQUEST_SUCCESS, p["decode"], "0+60x40", default_config, finished_reason="stop")]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == INFERENCE_METRICS_ABSENT]
    quiet = [{"eval_time": "39m", "alertname": a, "exp_alerts": []} for a in (*COMMON_ALERTS, *DPD_ONLY_ALERTS)
             if a != INFERENCE_METRICS_ABSENT]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "Ready, no inference series", "interval": "1m", "input_series": ready, "alert_rule_test": [
            *quiet, {"eval_time": "39m", "alertname": INFERENCE_METRICS_ABSENT,
                     "exp_alerts": [_expected(rule, {"component": c, "pod_name": p[c]})
                                    for c in ("prefill", "decode")]}]},
        {"name": "vLLM finishes requests, no sidecar series", "interval": "1m", "input_series": no_sidecar,
         "alert_rule_test": [{"eval_time": "39m", "alertname": INFERENCE_METRICS_ABSENT,
                              "exp_alerts": [_expected(rule, {"component": "decode", "pod_name": p["decode"]})]}]}])


def _rules_of(config: Config, tmp_path: Path) -> Path:
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(alert_rule_groups(config.specs()), sort_keys=False))
    return path


def test_error_ratio_counts_chat_traffic_on_a_completions_endpoint(default_config_dict: dict, tmp_path: Path,
                                                                   promtool: str) -> None:
    """config/examples/kvaware-redis-evaluation.yaml declares invocation_path v1/completions, and genai-bench posts
    to /v1/chat/completions; the router posts both legs to the path the client used (vllm-project/production-stack
    @ a6c01db, src/vllm_router/services/request_service/request.py, send_request_to_prefiller and
    send_request_to_decode: client.post(endpoint, ...)). 20 % of the decode legs fail: DpdErrorRatioHigh fires,
    and the sidecar does count the pods' inference requests, so DpdInferenceMetricsAbsent stays quiet. GET /ping
    probes pass through the same proxies."""
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    data["endpoint"]["invocation_path"] = "v1/completions"
    config = parse_config(data)
    rules = _rules_of(config, tmp_path)
    p = _pods(config)
    chat = {"method": "POST", "uri": "/v1/chat/completions", "status": "200"}
    series = [*_visible(config), *_ready(config, p["router"], True, "hyperpod-inference-system")]
    for pod in (p["prefill"], p["decode"]):
        series += [*_ready(config, pod, True), _s(m.NUM_REQUESTS_RUNNING, pod, "3x40", config),
                   _s(m.REQUEST_SUCCESS, pod, "0+48x40", config, finished_reason="stop"),
                   _s(m.MODEL_INVOCATIONS, pod, "0+60x40", config, **chat),
                   _s(m.MODEL_INVOCATIONS, pod, "0+6x40", config, **PROBE)]
    series.append(_s(m.MODEL_ERRORS, p["decode"], "0+12x40", config, **{**chat, "status": "500"}))
    (rule,) = [r for r in alerts_of(rules) if r["alert"] == "DpdErrorRatioHigh"]
    _promtool_test(promtool, rules, tmp_path, [
        {"name": "chat traffic on a completions endpoint", "interval": "1m", "input_series": series,
         "alert_rule_test": [
             {"eval_time": EVAL_TIME, "alertname": "DpdErrorRatioHigh", "exp_alerts": [_expected(rule, {})]},
             {"eval_time": EVAL_TIME, "alertname": INFERENCE_METRICS_ABSENT, "exp_alerts": []}]}])


def test_probes_alone_are_no_inference_requests(default_config: Config, rules_files: dict[str, Path],
                                                tmp_path: Path, promtool: str) -> None:
    """vLLM finishes requests on decode, but the decode sidecar's only series are probes (GET /ping, and POST /ping,
    which vLLM's SageMaker route also takes: vllm-project/vllm @ 09cb327, vllm/entrypoints/sagemaker/
    api_router.py): the sidecar counts none of the pod's inference requests, so the error ratio is blind to it and
    DpdInferenceMetricsAbsent fires for that pod; the probes make no error ratio."""
    p = _pods(default_config)
    series = [*_ready(default_config, p["prefill"], True), *_ready(default_config, p["decode"], True),
              *_inference(default_config, p["prefill"]),
              _s(m.NUM_REQUESTS_RUNNING, p["decode"], "3x40", default_config),
              _s(m.REQUEST_SUCCESS, p["decode"], "0+60x40", default_config, finished_reason="stop"),
              _s(m.MODEL_INVOCATIONS, p["decode"], "0+6x40", default_config, **PROBE),
              _s(m.MODEL_INVOCATIONS, p["decode"], "0+6x40", default_config, **{**PROBE, "method": "POST"}),
              _s(m.MODEL_ERRORS, p["decode"], "0+6x40", default_config, **{**PROBE, "status": "500"})]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == INFERENCE_METRICS_ABSENT]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "probes only on decode", "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "39m", "alertname": INFERENCE_METRICS_ABSENT,
             "exp_alerts": [_expected(rule, {"component": "decode", "pod_name": p["decode"]})]},
            {"eval_time": "39m", "alertname": "DpdErrorRatioHigh", "exp_alerts": []}]}])


@pytest.mark.parametrize("collector", ["default", "relabelled"])
def test_one_silent_replica_among_ready_ones_pages(collector: str, default_config_dict: dict, tmp_path: Path,
                                                   promtool: str) -> None:
    """Two decode pods are Ready and one of them ships no inference series (vLLM's or the sidecar's): an absent()
    over the role's pod pattern sees the healthy one and stays quiet; the comparison pod by pod names the silent
    one. The healthy pods keep it quiet for themselves. Also with a collector that writes kube-state-metrics' pod
    and namespace as exported_pod / exported_namespace (observability.collector_labels)."""
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    if collector == "relabelled":
        data["observability"]["collector_labels"] = {"kube_state_metrics_pod": "exported_pod",
                                                     "kube_state_metrics_namespace": "exported_namespace"}
    config = parse_config(data)
    rules = _rules_of(config, tmp_path)
    p = _pods(config)
    silent = f"decode-{config.spec().endpoint.name}-5b8c9d7f6-zz7yy"
    series = [*_ready(config, p["prefill"], True), *_ready(config, p["decode"], True),
              *_ready(config, silent, True), *_inference(config, p["prefill"]), *_inference(config, p["decode"])]
    (rule,) = [r for r in alerts_of(rules) if r["alert"] == INFERENCE_METRICS_ABSENT]
    _promtool_test(promtool, rules, tmp_path, [
        {"name": "one of two decode pods silent", "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "39m", "alertname": INFERENCE_METRICS_ABSENT,
             "exp_alerts": [_expected(rule, {"component": "decode", "pod_name": silent})]}]}])


def test_endpoint_down_fires_while_the_pods_are_pending(default_config: Config, rules_files: dict[str, Path],
                                                        tmp_path: Path, promtool: str) -> None:
    """GPU capacity is lost and the recreated prefill and decode pods stay Pending (unschedulable). kube-state-metrics
    writes kube_pod_status_ready only for a pod whose status holds a Ready condition (kubernetes/kube-state-metrics,
    internal/store/pod.go, createPodStatusReadyFamilyGenerator), so those pods have no Ready series, and nothing
    else runs in the endpoint's namespace. The cluster is visible (kube-system, the operator, the router): the
    endpoint is down, DpdEndpointDown fires (critical) once its 5 minutes have passed, and no series is missing."""
    p = _pods(default_config)
    series = [*_ready(default_config, "coredns-6b5c4d3e2-dn5sq", True, "kube-system"),
              *_ready(default_config, "hyperpod-inference-operator-6b5c4d3e2-op1qr", True, "hyperpod-inference-system"),
              *_ready(default_config, p["router"], True, "hyperpod-inference-system")]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == ENDPOINT_DOWN]
    assert rule["labels"]["severity"] == "critical" and rule["for"] == "5m"
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "role pods pending", "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "4m", "alertname": ENDPOINT_DOWN, "exp_alerts": []},
            {"eval_time": "6m", "alertname": ENDPOINT_DOWN,
             "exp_alerts": [_expected(rule, {"component": c}) for c in ("prefill", "decode")]},
            {"eval_time": EVAL_TIME, "alertname": CLUSTER_METRICS_ABSENT, "exp_alerts": []}]}])


def test_an_empty_endpoint_namespace_is_no_missing_cluster_metric(default_config: Config,
                                                                  rules_files: dict[str, Path], tmp_path: Path,
                                                                  promtool: str) -> None:
    """Before the endpoint is applied (or after it is deleted) its namespace holds no pod, which is normal: the
    cluster metrics arrive from every other namespace, so DpdClusterMetricsAbsent stays quiet. Nothing serves, so
    DpdEndpointDown names every component."""
    series = [*_ready(default_config, "coredns-6b5c4d3e2-dn5sq", True, "kube-system"),
              *_ready(default_config, "hyperpod-inference-operator-6b5c4d3e2-op1qr", True, "hyperpod-inference-system")]
    (rule,) = [r for r in alerts_of(rules_files["dpd"]) if r["alert"] == ENDPOINT_DOWN]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "endpoint not applied", "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": EVAL_TIME, "alertname": CLUSTER_METRICS_ABSENT, "exp_alerts": []},
            {"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN,
             "exp_alerts": [_expected(rule, {"component": c}) for c in ("prefill", "decode", "router")]}]}])


#: The latency alerts: each fires when a fifth of the requests are slow (``_slow_traffic``).
LATENCY_ALERTS = ("DpdTtftSloBreach", "DpdPrefillLegSlow", "DpdUserTtftMeanAboveSlo", "DpdTpotSloBreach")


def _slow_traffic(config: Config, per_minute: float, busy_minutes: int = 40) -> list[dict]:
    """``per_minute`` requests a minute, a fifth of them slow (TTFT and prefill leg 10 s, TPOT 0.2 s): every latency
    alert's condition holds (share within the objective 80 %; users' mean TTFT 2 x 2.4 s over a 2.5 s SLO)."""
    p = _pods(config)
    fast, slow = 0.8 * per_minute, 0.2 * per_minute
    return [*_hist(m.TIME_TO_FIRST_TOKEN, p["decode"], {0.5: fast, 10.0: slow}, config, busy_minutes=busy_minutes),
            *_hist(m.E2E_LATENCY, p["prefill"], {0.5: fast, 10.0: slow}, config, busy_minutes=busy_minutes),
            *_hist(m.REQUEST_TPOT, p["decode"], {0.05: fast, 0.2: slow}, config, busy_minutes=busy_minutes)]


def test_latency_alerts_judge_no_window_of_a_few_requests(default_config: Config, rules_files: dict[str, Path],
                                                          tmp_path: Path, promtool: str) -> None:
    """One request a minute, one in five slow: 5 requests in the 5-minute window, fewer than MIN_REQUESTS (20, the
    fewest for which one slow request alone cannot breach a p95 objective: 19 of 20 is 95 %), so nothing pages. The
    same shape at 12 requests a minute (60 in the window) pages every latency alert."""
    rules = {r["alert"]: r for r in alerts_of(rules_files["dpd"])}
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "5 requests in 5 minutes, one slow", "interval": "1m",
         "input_series": _slow_traffic(default_config, 1),
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": a, "exp_alerts": []} for a in LATENCY_ALERTS]},
        {"name": "60 requests in 5 minutes, a fifth slow", "interval": "1m",
         "input_series": _slow_traffic(default_config, 12),
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": a, "exp_alerts": [_expected(rules[a], {})]}
                             for a in LATENCY_ALERTS]}])


def test_an_idle_endpoint_stays_quiet(default_config: Config, rules_files: dict[str, Path], tmp_path: Path,
                                      promtool: str) -> None:
    """Slow, failing traffic for 10 minutes, then none for 30: the counters stay flat, every ratio is 0/0 (no
    value), and neither the latency alerts nor the error ratio page an idle endpoint."""
    p = _pods(default_config)
    series = [*_slow_traffic(default_config, 60, busy_minutes=10),
              _s(m.MODEL_INVOCATIONS, p["decode"], _grow(60, 10), default_config, **INVOKE),
              _s(m.MODEL_ERRORS, p["decode"], _grow(30, 10), default_config, **FAILED)]
    _promtool_test(promtool, rules_files["dpd"], tmp_path, [
        {"name": "idle for 30 minutes", "interval": "1m", "input_series": series,
         "alert_rule_test": [{"eval_time": "40m", "alertname": a, "exp_alerts": []}
                             for a in (*LATENCY_ALERTS, "DpdErrorRatioHigh")]}])
