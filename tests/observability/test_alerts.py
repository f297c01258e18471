"""Alerts: valid rules (promtool check rules) and one promtool unit test per alert: fires / stays quiet.

Input series are contract-shaped: every label the contract (``shared/metrics`` via ``contract.py``) says the
series carries on HyperPod, with the pod in ``pod_name`` for vLLM/LMCache/sidecar series.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.observability import contract

from hyperpod_core.config import Config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.alerts import ENDPOINT_DOWN, HEARTBEAT, alert_rule_groups, alerts
from hyperpod_core.telemetry.targets import collector_labels

EVAL_TIME = "30m"


def _pods(config: Config) -> dict[str, str]:
    ep, ns = config.endpoint.name, config.endpoint.namespace
    return {"prefill": f"prefill-{ep}-6d5f7c8b9-x2k4p", "prefill2": f"prefill-{ep}-6d5f7c8b9-q7w8e",
            "decode": f"decode-{ep}-5b8c9d7f6-klm2n", "ns": ns,
            # The router in the operator's namespace (operator.md (e): <iec>-<ns>-router-XXXX) and the colocated
            # pods (same endpoint name, no role prefix).
            "router": f"{ep}-{ns}-router-5d4c3b2a1-rt7uv", "worker": f"{ep}-7f6d5c4b3-pq9rs"}


def _ready(config: Config, pod: str, ready: bool, namespace: str | None = None) -> list[dict]:
    """kube_pod_status_ready as kube-state-metrics writes it: 1 on the pod's current condition, 0 on the others."""
    extra = {"namespace": namespace} if namespace else {}
    return [_s(m.POD_READY, pod, f"{int(cond == ('true' if ready else 'false'))}x40", config, condition=cond,
               **extra) for cond in ("true", "false", "unknown")]


def _s(metric: m.Metric, pod: str, values: str, config: Config, suffix: str = "", **labels: str) -> dict:
    """One input series with every label the contract gives ``metric`` on HyperPod."""
    collector = collector_labels(config)
    (family,) = [f for f in contract.families(collector) if f.name == metric.family]
    all_labels = {x: f"{x}-value" for x in family.labels}
    all_labels.update({metric.namespace_label(collector): config.endpoint.namespace,
                       metric.pod_label(collector): pod})
    if family.metric_source is not None:
        all_labels[lbl.METRIC_SOURCE] = family.metric_source
    all_labels.update(labels)
    body = ", ".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{metric.series(suffix)}{{{body}}}", "values": values}


def _hist(metric: m.Metric, pod: str, per_minute_by_le: dict[str, int], config: Config) -> list[dict]:
    return [_s(metric, pod, f"0+{n}x40", config, "_bucket", le=le) for le, n in per_minute_by_le.items()]


def _scenarios(config: Config) -> dict[str, tuple[list[dict], list[dict], dict[str, str]]]:
    """alert -> (series that make it fire, series that must not, extra labels of the fired alert)."""
    p = _pods(config)
    waiting = m.NUM_REQUESTS_WAITING
    operator_ns = "hyperpod-inference-system"
    return {
        "DpdEndpointDown": (
            # The decode pod exists but is not Ready: users' long and short prompts both fail.
            [*_ready(config, p["prefill"], True), *_ready(config, p["decode"], False),
             *_ready(config, p["router"], True, operator_ns)],
            [*_ready(config, p["prefill"], True), *_ready(config, p["decode"], True),
             *_ready(config, p["router"], True, operator_ns)], {"component": "decode"}),
        "DpdPrefillLegSlow": (
            # The prefill leg's E2E on the prefill pods (the router waits for it) is slow; decode may look fine.
            _hist(m.E2E_LATENCY, p["prefill"], {"0.5": 0, "5": 60, "+Inf": 60}, config),
            _hist(m.E2E_LATENCY, p["prefill"], {"0.5": 60, "5": 60, "+Inf": 60}, config), {}),
        "DpdDecodeKvCacheSaturated": (
            [_s(m.KV_CACHE_USAGE, p["decode"], "0.97x40", config)],
            # A saturated *prefill* pod is not a decode problem.
            [_s(m.KV_CACHE_USAGE, p["decode"], "0.5x40", config),
             _s(m.KV_CACHE_USAGE, p["prefill"], "0.99x40", config)], {}),
        "DpdPrefillQueueGrowing": (
            [_s(waiting, p["prefill"], "0+1x40", config), _s(waiting, p["prefill2"], "0+1x40", config)],
            # Long but steady queue: above the threshold, not growing.
            [_s(waiting, p["prefill"], "20x40", config), _s(waiting, p["prefill2"], "20x40", config)], {}),
        "DpdTtftSloBreach": (
            _hist(m.TIME_TO_FIRST_TOKEN, p["decode"], {"0.5": 0, "5": 60, "+Inf": 60}, config),
            _hist(m.TIME_TO_FIRST_TOKEN, p["decode"], {"0.5": 60, "5": 60, "+Inf": 60}, config), {}),
        "DpdTpotSloBreach": (
            _hist(m.REQUEST_TPOT, p["decode"], {"0.05": 0, "0.5": 60, "+Inf": 60}, config),
            _hist(m.REQUEST_TPOT, p["decode"], {"0.05": 60, "0.5": 60, "+Inf": 60}, config), {}),
        "DpdErrorRatioHigh": (
            # 600 disaggregated requests a minute: 600 prefill legs (all fine) and 600 decode legs, 9 of which fail.
            # Per request that is 1.5 % (> 1 %); per invocation it would read 0.75 % and stay quiet.
            [_s(m.MODEL_INVOCATIONS, p["prefill"], "0+600x40", config),
             _s(m.MODEL_ERRORS, p["prefill"], "0x40", config),
             _s(m.MODEL_INVOCATIONS, p["decode"], "0+600x40", config),
             _s(m.MODEL_ERRORS, p["decode"], "0+9x40", config)],
            [_s(m.MODEL_INVOCATIONS, p["prefill"], "0+600x40", config),
             _s(m.MODEL_ERRORS, p["prefill"], "0x40", config),
             _s(m.MODEL_INVOCATIONS, p["decode"], "0+600x40", config),
             _s(m.MODEL_ERRORS, p["decode"], "0+3x40", config)], {}),
        "DpdPodRestartLoop": (
            [_s(m.POD_RESTARTS, p["decode"], "0+1x40", config, container="decode")],
            [_s(m.POD_RESTARTS, p["decode"], "0x10 1x30", config, container="decode")], {"pod": p["decode"]}),
        "DpdKvTransferIncomplete": (
            [_s(m.LMCACHE_REQUESTED_TOKENS, p["decode"], "0+1000x40", config),
             _s(m.LMCACHE_HIT_TOKENS, p["decode"], "0+800x40", config)],
            [_s(m.LMCACHE_REQUESTED_TOKENS, p["decode"], "0+1000x40", config),
             _s(m.LMCACHE_HIT_TOKENS, p["decode"], "0+995x40", config)], {}),
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


@pytest.fixture(scope="module")
def rules_file(default_config: Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.yml"
    path.write_text(yaml.safe_dump(alert_rule_groups(default_config), sort_keys=False))
    return path


def test_promtool_check_rules(rules_file: Path, promtool: str) -> None:
    out = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alerts_of(rules_file))} rules found" in out.stdout


def alerts_of(rules_file: Path) -> list[dict]:
    return [r for g in yaml.safe_load(rules_file.read_text())["groups"] for r in g["rules"]]


def test_every_alert_has_a_unit_test_and_a_runbook(default_config: Config) -> None:
    names = [a.name for a in alerts(default_config)]
    assert len(names) == len(set(names))
    assert set(names) == set(_scenarios(default_config)) | {HEARTBEAT}
    for rule in alert_rule_groups(default_config)["groups"][0]["rules"]:
        assert rule["annotations"]["runbook"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical") or rule["alert"] == HEARTBEAT
        assert rule["labels"]["alert_kind"] in ("pd", "availability", "heartbeat")
    kinds = {r["alert"]: r["labels"]["alert_kind"] for r in alert_rule_groups(default_config)["groups"][0]["rules"]}
    # Only the availability alerts survive an endpoint outage: they name its cause.
    assert {a for a, k in kinds.items() if k != "pd"} == {ENDPOINT_DOWN, "DpdPodRestartLoop", HEARTBEAT}


def _promtool_test(promtool: str, rules_file: Path, tmp_path: Path, tests: list[dict]) -> None:
    test_file = tmp_path / "test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests}))
    out = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def _expected(rule: dict, extra_labels: dict[str, str]) -> dict:
    annotations = {k: v.replace("{{ $labels.component }}", extra_labels.get("component", ""))
                   for k, v in rule["annotations"].items()}
    return {"exp_labels": {**rule["labels"], **extra_labels}, "exp_annotations": annotations}


@pytest.mark.parametrize("alert", [
    "DpdEndpointDown", "DpdDecodeKvCacheSaturated", "DpdPrefillQueueGrowing", "DpdTtftSloBreach",
    "DpdPrefillLegSlow", "DpdTpotSloBreach", "DpdErrorRatioHigh", "DpdRequestsAbortedOrFailed", "DpdPodRestartLoop",
    "DpdKvTransferIncomplete",
])
def test_promtool_unit_test(alert: str, default_config: Config, rules_file: Path, tmp_path: Path,
                            promtool: str) -> None:
    fire, quiet, extra_labels = _scenarios(default_config)[alert]
    (rule,) = [r for r in alerts_of(rules_file) if r["alert"] == alert]
    _promtool_test(promtool, rules_file, tmp_path, [
        {"name": f"{alert} fires", "interval": "1m", "input_series": fire,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert,
                              "exp_alerts": [_expected(rule, extra_labels)]}]},
        {"name": f"{alert} stays quiet", "interval": "1m", "input_series": quiet,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": []}]},
    ])


def test_heartbeat_always_fires(default_config: Config, rules_file: Path, tmp_path: Path, promtool: str) -> None:
    """With no series at all (a silent cluster), the heartbeat still fires: its absence downstream is the alarm."""
    (rule,) = [r for r in alerts_of(rules_file) if r["alert"] == HEARTBEAT]
    _promtool_test(promtool, rules_file, tmp_path, [
        {"name": "heartbeat", "interval": "1m", "input_series": [],
         "alert_rule_test": [{"eval_time": "1m", "alertname": HEARTBEAT, "exp_alerts": [_expected(rule, {})]}]}])


def test_endpoint_down_stays_quiet_when_the_other_mode_serves(default_config: Config, rules_file: Path,
                                                              tmp_path: Path, promtool: str) -> None:
    """A rollback (the colocated manifest re-applied: same name) or a benchmark switch removes the DPD pods; the
    endpoint still serves, so nobody is paged. With neither mode ready it fires for every missing component."""
    p = _pods(default_config)
    operator_ns = "hyperpod-inference-system"
    colocated = [*_ready(default_config, p["worker"], True), *_ready(default_config, p["router"], True, operator_ns)]
    (rule,) = [r for r in alerts_of(rules_file) if r["alert"] == ENDPOINT_DOWN]
    gone = [_expected(rule, {"component": c}) for c in ("prefill", "decode")]
    _promtool_test(promtool, rules_file, tmp_path, [
        {"name": "rolled back to colocated", "interval": "1m", "input_series": colocated,
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN, "exp_alerts": []}]},
        {"name": "nothing serves", "interval": "1m",
         "input_series": [*_ready(default_config, p["worker"], False),
                          *_ready(default_config, p["router"], True, operator_ns)],
         "alert_rule_test": [{"eval_time": EVAL_TIME, "alertname": ENDPOINT_DOWN, "exp_alerts": gone}]},
    ])


def test_thresholds_come_from_config(default_config_dict: dict) -> None:
    from hyperpod_core.config import parse_config

    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["slo"].update(ttft_p95_seconds=3.5, tpot_p95_seconds=0.07, error_ratio=0.02,
                                        kv_cache_usage_ratio=0.85, prefill_queue_per_replica=9)
    exprs = {r["alert"]: r["expr"] for r in alert_rule_groups(parse_config(data))["groups"][0]["rules"]}
    assert exprs["DpdTtftSloBreach"].endswith("> 3.5")
    assert exprs["DpdTpotSloBreach"].endswith("> 0.07")
    assert exprs["DpdErrorRatioHigh"].endswith("> 0.02")
    assert exprs["DpdDecodeKvCacheSaturated"].endswith("> 0.85")
    assert "> 9" in exprs["DpdPrefillQueueGrowing"]


def test_alert_rule_groups_import_neither_cdk8s_nor_aws_cdk() -> None:
    code = ("import sys; from hyperpod_core.telemetry.alerts import alert_rule_groups; "
            "from hyperpod_k8s.observability import write_dashboard_files; "
            "bad = [x for x in ('cdk8s', 'aws_cdk', 'constructs', 'jsii') if x in sys.modules]; "
            "assert not bad, bad")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": f"{root / 'infra'}:{root / 'k8s'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
