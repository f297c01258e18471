"""The alert manager definition: valid for Alertmanager itself, within AMP's rules, and it delivers.

Sources of the expected values:
* Alertmanager's own validator, ``amtool check-config`` and ``amtool config routes test`` (Debian
  ``prometheus-alertmanager`` 0.25), and a real Alertmanager of that package (session fixture);
* AMP user guide, "Configure alert manager to send messages to your Amazon SNS topic": SNS is the only receiver,
  ``sigv4.region`` is required, ``api_url`` and ``http_config`` are not allowed; "Upload your alert manager
  configuration file": the definition is YAML under ``alertmanager_config``;
* the SNS Publish API (query protocol: ``TopicArn``, ``Subject``, ``MessageAttributes.entry.N``), which the fake
  SNS records the way Alertmanager's notifier calls it.

End to end: the session's Prometheus evaluates our real rule file against the scraped series and sends what
fires to the Alertmanager, which publishes to the (fake) SNS topic: the always-firing heartbeat proves the path.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from tests.observability.conftest import TEST_TOPIC_ARN, require_tool

from hyperpod_core.config import Config, parse_config
from hyperpod_core.telemetry.alertmanager import (
    HEARTBEAT_REPEAT,
    RECEIVER,
    alert_manager_definition,
    alertmanager_text,
)
from hyperpod_core.telemetry.alerts import (
    ENDPOINT_DOWN,
    HEARTBEAT,
    INFERENCE_METRICS_ABSENT,
    KIND_LABEL,
    alert_rule_groups,
)

pytestmark = pytest.mark.slow
DELIVERY_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def amtool() -> str:
    return require_tool("amtool")


@pytest.fixture(scope="module")
def config_file(default_config: Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("am") / "alertmanager.yml"
    path.write_text(alertmanager_text(default_config.region,
                                      [TEST_TOPIC_ARN, "arn:aws:sns:us-east-1:111122223333:pager"]))
    return path


def test_amtool_check_config_accepts_the_definition(config_file: Path, amtool: str) -> None:
    out = subprocess.run([amtool, "check-config", str(config_file)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout and " - 1 inhibit rules" in out.stdout and " - 1 receivers" in out.stdout


def test_definition_keeps_to_what_amp_accepts(default_config: Config) -> None:
    pager = "arn:aws:sns:us-east-1:111122223333:pager"
    definition = yaml.safe_load(alert_manager_definition(default_config.region, [TEST_TOPIC_ARN, pager]))
    assert list(definition) == ["alertmanager_config"]
    config = yaml.safe_load(definition["alertmanager_config"])
    (receiver,) = config["receivers"]
    assert list(receiver) == ["name", "sns_configs"], "SNS is AMP's only receiver"
    assert [c["topic_arn"] for c in receiver["sns_configs"]] == [TEST_TOPIC_ARN, pager]
    for sns in receiver["sns_configs"]:
        assert "api_url" not in sns and "http_config" not in sns
        assert sns["sigv4"]["region"] == sns["topic_arn"].split(":")[3]
        assert len(sns["subject"]) < 100, "SNS subjects are at most 100 characters"


@pytest.mark.parametrize("alert", [r["alert"] for g in alert_rule_groups(parse_config(yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "config" / "default.yaml").read_text())).specs())["groups"]
    for r in g["rules"]])
def test_every_alert_routes_to_the_sns_receiver(alert: str, default_config: Config, config_file: Path,
                                                amtool: str) -> None:
    (rule,) = [r for g in alert_rule_groups(default_config.specs())["groups"] for r in g["rules"]
               if r["alert"] == alert]
    labels = [f"alertname={alert}", *(f"{k}={v}" for k, v in rule["labels"].items())]
    out = subprocess.run([amtool, "config", "routes", "test", f"--config.file={config_file}",
                          f"--verify.receivers={RECEIVER}", *labels], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def test_heartbeat_is_repeated_within_the_topic_alarm_window() -> None:
    """The topic's silence alarm (alert_topic.py) fires after SILENT_PERIODS whole periods without a message."""
    from hyperpod_constructs.alert_topic import SILENCE_PERIOD, SILENT_PERIODS

    hours = int(HEARTBEAT_REPEAT.removesuffix("h"))
    assert hours * 3600 < SILENT_PERIODS * SILENCE_PERIOD.to_seconds()
    assert hours * 3600 >= SILENCE_PERIOD.to_seconds() / 2, "at most two heartbeat messages a day"


def test_the_heartbeat_travels_from_the_rules_to_the_sns_topic(prometheus, fake_sns) -> None:
    """Prometheus evaluates the real rule file, hands the firing heartbeat to Alertmanager, which publishes it
    to the topic with its subject and message attributes."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        with fake_sns.lock:
            beats = [m for m in fake_sns.published if fake_sns.attributes(m).get("alertname") == HEARTBEAT]
        if beats:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"no heartbeat reached SNS within {DELIVERY_TIMEOUT_S}s", pytrace=False)
    message = beats[0]
    assert message["Action"] == "Publish" and message["TopicArn"] == TEST_TOPIC_ARN
    assert message["Subject"].startswith(f"[FIRING] {HEARTBEAT}")
    assert fake_sns.attributes(message)[KIND_LABEL] == "heartbeat"


def test_pd_alerts_are_inhibited_while_the_endpoint_is_down(alertmanager) -> None:
    def alert(name: str, endpoint: str, kind: str) -> dict:
        return {"labels": {"alertname": name, "namespace": "inhibit-test", "endpoint": endpoint, KIND_LABEL: kind,
                           "severity": "warning"}, "annotations": {"summary": name}}

    alertmanager.post([alert(ENDPOINT_DOWN, "down", "availability"), alert("DpdTtftSloBreach", "down", "pd"),
                       alert("DpdPodRestartLoop", "down", "availability"), alert("DpdTtftSloBreach", "up", "pd")])
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        found = {(a["labels"]["alertname"], a["labels"]["endpoint"]): a["status"]["inhibitedBy"]
                 for a in alertmanager.alerts(namespace="inhibit-test")}
        if len(found) == 4:
            break
        time.sleep(0.2)
    assert found[("DpdTtftSloBreach", "down")], "a P/D alert of the down endpoint is muted"
    assert not found[("DpdTtftSloBreach", "up")], "another endpoint's alert is not"
    assert not found[("DpdPodRestartLoop", "down")], "the restart loop names the cause: never muted"
    assert not found[(ENDPOINT_DOWN, "down")]


def test_a_silenced_endpoint_down_never_mutes_the_critical_error_ratio(alertmanager, default_config: Config) -> None:
    """The fourth review's finding 4, in a real Alertmanager: silence DpdEndpointDown (the natural reaction to a
    false positive). Alertmanager keeps inhibiting while a silenced source fires, so the silence still mutes the
    endpoint's warning pd alerts (the runbook says so), but the critical DpdErrorRatioHigh is no inhibition target
    and reaches people, nor is DpdInferenceMetricsAbsent, critical because it says that alert is blind. The alerts
    carry the labels of the synthesized rules."""
    rules = {r["alert"]: r for g in alert_rule_groups(default_config.specs())["groups"] for r in g["rules"]}
    namespace = "silence-test"

    def alert(name: str) -> dict:
        return {"labels": {"alertname": name, **rules[name]["labels"], "namespace": namespace},
                "annotations": {"summary": name}}

    now = datetime.datetime.now(datetime.UTC)
    silence = {"matchers": [{"name": "alertname", "value": ENDPOINT_DOWN, "isRegex": False, "isEqual": True}],
               "startsAt": now.isoformat(), "endsAt": (now + datetime.timedelta(days=7)).isoformat(),
               "createdBy": "test", "comment": "false positive"}
    request = urllib.request.Request(f"{alertmanager.base_url}/api/v2/silences", data=json.dumps(silence).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200
    assert rules["DpdErrorRatioHigh"]["labels"]["severity"] == "critical"
    assert rules[INFERENCE_METRICS_ABSENT]["labels"]["severity"] == "critical"
    alertmanager.post([alert(ENDPOINT_DOWN), alert("DpdTtftSloBreach"), alert("DpdErrorRatioHigh"),
                       alert(INFERENCE_METRICS_ABSENT)])
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        found = {a["labels"]["alertname"]: a["status"] for a in alertmanager.alerts(namespace=namespace)}
        if len(found) == 4 and found[ENDPOINT_DOWN]["silencedBy"] and found["DpdTtftSloBreach"]["inhibitedBy"]:
            break
        time.sleep(0.2)
    assert found[ENDPOINT_DOWN]["silencedBy"], "the silence mutes the endpoint-down alert itself"
    assert found["DpdTtftSloBreach"]["inhibitedBy"], "a warning pd alert stays inhibited (the runbook says so)"
    assert found["DpdErrorRatioHigh"] == {"state": "active", "silencedBy": [], "inhibitedBy": []}
    assert found[INFERENCE_METRICS_ABSENT] == {"state": "active", "silencedBy": [], "inhibitedBy": []}
