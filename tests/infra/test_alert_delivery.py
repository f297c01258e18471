"""Alerts reach a person: the workspace's alert manager definition publishes to an encrypted SNS topic that AMP
may publish to, with the receivers of ``observability.alerts``; with none, synth says so in one line.

Expected values:
* AMP user guide, "Giving Amazon Managed Service for Prometheus permission to send alert messages to your Amazon
  SNS topic": principal ``aps.amazonaws.com``, actions ``sns:Publish`` and ``sns:GetTopicAttributes``, conditions
  ``ArnEquals aws:SourceArn`` = the workspace and ``StringEquals AWS:SourceAccount``;
* SNS developer guide, "Configuring AWS KMS permissions" (event sources from AWS services and encrypted topics):
  the key policy lets the service principal ``kms:GenerateDataKey*`` and ``kms:Decrypt``;
* CloudFormation: ``AWS::APS::Workspace.AlertManagerDefinition``; CloudWatch ``AWS/SNS``
  ``NumberOfMessagesPublished`` (dimension ``TopicName``); Period x EvaluationPeriods at most 7 days;
* SNS developer guide, message filtering: "String value matching" (``anything-but`` matches values not listed and
  "can be combined with "exists": false"), "Key matching" (``"exists": false`` matches messages without the key,
  and only when at least one attribute is present), "AND/OR logic" (the values of one key are ORed),
  "Subscription filter policies" (each key of the policy must match an attribute) and "Subscription filter
  policy scope" (``MessageAttributes`` by default).
"""

from __future__ import annotations

import subprocess

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk.assertions import Template

from hyperpod_constructs.alert_topic import AlertTopic, AlertTopicProps
from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_core.config import parse_config
from hyperpod_core.telemetry.alertmanager import alert_manager_definition
from hyperpod_core.telemetry.notices import alerts_notice

TOPIC_LOGICAL_ID = "AlertTopic3B8349F7"


def _one(template: Template, kind: str) -> tuple[str, dict]:
    (item,) = template.find_resources(kind).items()
    return item


@pytest.fixture(scope="module")
def obs(observability_alone) -> Template:
    """The observability stack alone (root conftest), no receivers given."""
    return observability_alone.template


def test_the_workspace_sends_every_alert_to_the_stack_topic(obs) -> None:
    _, ws = _one(obs, "AWS::APS::Workspace")
    parts = ws["Properties"]["AlertManagerDefinition"]["Fn::Join"][1]
    assert {"Ref": TOPIC_LOGICAL_ID} in parts, "the topic's logical ID is pinned: a new ID is a new topic"
    text = "".join(p if isinstance(p, str) else "arn:aws:sns:us-west-2:111122223333:t" for p in parts)
    config = yaml.safe_load(yaml.safe_load(text)["alertmanager_config"])
    (sns,) = config["receivers"][0]["sns_configs"]
    assert sns["topic_arn"] == "arn:aws:sns:us-west-2:111122223333:t" and sns["sigv4"] == {"region": "us-west-2"}
    assert config["route"]["receiver"] == config["receivers"][0]["name"]


def test_the_definition_in_the_template_passes_amtool(obs, tmp_path) -> None:
    import shutil

    amtool = shutil.which("amtool")
    assert amtool, "amtool missing: apt-get install prometheus-alertmanager"
    (_, ws), = obs.find_resources("AWS::APS::Workspace").items()
    parts = ws["Properties"]["AlertManagerDefinition"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "arn:aws:sns:us-west-2:111122223333:t" for p in parts)
    path = tmp_path / "am.yml"
    path.write_text(yaml.safe_load(text)["alertmanager_config"])
    out = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_topic_is_encrypted_with_a_key_aps_and_cloudwatch_may_use(obs) -> None:
    key_id, key = _one(obs, "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    services = {s["Principal"]["Service"]: s["Action"] for s in key["Properties"]["KeyPolicy"]["Statement"]
                if "Service" in s.get("Principal", {})}
    assert services == {"aps.amazonaws.com": ["kms:GenerateDataKey*", "kms:Decrypt"],
                        "cloudwatch.amazonaws.com": ["kms:GenerateDataKey*", "kms:Decrypt"]}
    topic = obs.find_resources("AWS::SNS::Topic")[TOPIC_LOGICAL_ID]
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def _policy_of(template: Template, topic_id: str) -> dict:
    (policy,) = [p for p in template.find_resources("AWS::SNS::TopicPolicy").values()
                 if p["Properties"]["Topics"] == [{"Ref": topic_id}]]
    return policy


def test_the_topic_policy_admits_this_workspace_only(obs) -> None:
    ws_id, _ = _one(obs, "AWS::APS::Workspace")
    policy = _policy_of(obs, TOPIC_LOGICAL_ID)
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (aps,) = [s for s in statements if s.get("Principal") == {"Service": "aps.amazonaws.com"}]
    assert aps["Effect"] == "Allow" and aps["Action"] == ["sns:Publish", "sns:GetTopicAttributes"]
    assert aps["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [ws_id, "Arn"]}},
                                "StringEquals": {"AWS:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert aps["Resource"] == {"Ref": TOPIC_LOGICAL_ID}
    (tls,) = [s for s in statements if s["Effect"] == "Deny"]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # Only the alert manager publishes here: the silence alarm has a topic of its own.
    assert not [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]


def test_a_silent_topic_raises_an_alarm_on_a_topic_of_its_own(obs) -> None:
    """The heartbeat reaches the topic daily; two days without any message mean the path broke. The alarm must not
    publish to the topic it watches: its own message would count in NumberOfMessagesPublished, end the silence
    and make the alarm flap every 2-3 days while the path stays broken."""
    alarm_id, alarm = _one(obs, "AWS::CloudWatch::Alarm")
    p = alarm["Properties"]
    assert (p["Namespace"], p["MetricName"], p["Statistic"]) == ("AWS/SNS", "NumberOfMessagesPublished", "Sum")
    assert p["Dimensions"] == [{"Name": "TopicName", "Value": {"Fn::GetAtt": [TOPIC_LOGICAL_ID, "TopicName"]}}]
    assert (p["ComparisonOperator"], p["Threshold"], p["TreatMissingData"]) == ("LessThanThreshold", 1, "breaching")
    assert p["Period"] * p["EvaluationPeriods"] <= 7 * 86400 and p["Period"] >= 3600
    (action,) = p["AlarmActions"]
    assert p["OKActions"] == [action] and action != {"Ref": TOPIC_LOGICAL_ID}
    silence_id = action["Ref"]
    topics = obs.find_resources("AWS::SNS::Topic")
    assert set(topics) == {TOPIC_LOGICAL_ID, silence_id}
    key_id, _ = _one(obs, "AWS::KMS::Key")  # the same key (its policy admits CloudWatch)
    assert topics[silence_id]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    statements = _policy_of(obs, silence_id)["Properties"]["PolicyDocument"]["Statement"]
    (cw,) = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert cw["Action"] == "sns:Publish" and cw["Resource"] == {"Ref": silence_id}
    assert cw["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [alarm_id, "Arn"]}},
                               "StringEquals": {"AWS:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_default_config_has_no_receiver_and_synth_says_so(obs, default_config) -> None:
    assert obs.find_resources("AWS::SNS::Subscription") == {}
    assert alerts_notice(default_config.observability) == (
        "alerts reach no one: observability.alerts names no email_addresses and no topic_arn (the alert manager "
        "publishes to the alert topic, which nobody subscribes to)")
    from hyperpod_core.telemetry.notices import notices

    assert len(notices(default_config.observability)) == 2, "alerts and dashboards: one line each"


RECEIVERS = {"email_addresses": ["oncall@example.com", "lead@example.com"],
             "topic_arn": "arn:aws:sns:us-west-2:111122223333:pager"}


@pytest.fixture(scope="module")
def with_receivers(default_config_dict) -> tuple[Template, object]:
    """One synthesis of the alert path with ``observability.alerts`` set, shared by the tests below."""
    import copy

    data = copy.deepcopy(default_config_dict)
    data["observability"]["alerts"] = copy.deepcopy(RECEIVERS)
    config = parse_config(data)
    app = cdk.App()
    stack = cdk.Stack(app, "Obs", env=cdk.Environment(region="us-west-2"))
    prometheus = ManagedPrometheus(stack, "Prometheus", props=ManagedPrometheusProps(alias="x"))
    topic = AlertTopic(stack, "AlertTopic", props=AlertTopicProps(
        workspace_arn=prometheus.workspace_arn, display_name="x alerts",
        email_addresses=config.observability.alerts.email_addresses))
    prometheus.set_alert_manager_definition(alert_manager_definition(
        config.region, [topic.topic_arn, config.observability.alerts.topic_arn or ""]))
    return Template.from_stack(stack), config


def _subscriptions(t: Template, topic_id: str) -> dict[str, dict]:
    return {s["Properties"]["Endpoint"]: s["Properties"] for s in t.find_resources("AWS::SNS::Subscription").values()
            if s["Properties"]["TopicArn"] == {"Ref": topic_id}}


def test_receivers_subscribe_and_an_existing_topic_joins_the_receiver(with_receivers) -> None:
    t, config = with_receivers
    assert alerts_notice(config.observability) is None
    subs = _subscriptions(t, TOPIC_LOGICAL_ID)
    assert sorted(subs) == ["lead@example.com", "oncall@example.com"]
    assert all(s["Protocol"] == "email" for s in subs.values())
    (_, ws), = t.find_resources("AWS::APS::Workspace").items()
    parts = ws["Properties"]["AlertManagerDefinition"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<ours>" for p in parts)
    configs = yaml.safe_load(yaml.safe_load(text)["alertmanager_config"])["receivers"][0]["sns_configs"]
    assert [c["topic_arn"] for c in configs] == ["<ours>", "arn:aws:sns:us-west-2:111122223333:pager"]


def _sns_delivers(policy: dict, attributes: dict[str, str]) -> bool:
    """SNS's documented attribute filtering (module docstring): every key of the policy must match; the
    conditions of one key are ORed; a string matches itself, ``anything-but`` any present value not listed,
    ``exists`` the presence (true) or absence (false) of the key, absence only when some attribute is present."""
    def matches(cond: object, key: str) -> bool:
        if isinstance(cond, str):
            return attributes.get(key) == cond
        assert isinstance(cond, dict) and len(cond) == 1, cond
        ((op, arg),) = cond.items()
        if op == "anything-but":
            return key in attributes and attributes[key] not in arg
        if op == "exists":
            return (key in attributes) if arg else (key not in attributes and bool(attributes))
        raise AssertionError(f"operator {op!r} not modelled")
    return all(any(matches(c, key) for c in conds) for key, conds in policy.items())


def test_email_subscriptions_drop_the_heartbeat_and_keep_the_alerts(with_receivers) -> None:
    """A person gets the alerts, not the daily heartbeat (a pager's dead man's switch subscribes without a filter).
    The attributes are what the alert manager sets (alertmanager.ATTRIBUTES: alert_kind, alertname)."""
    from hyperpod_constructs.alert_topic import HEARTBEAT_KIND, KIND_ATTRIBUTE
    from hyperpod_core.telemetry.alertmanager import ATTRIBUTES
    from hyperpod_core.telemetry.alerts import HEARTBEAT, KIND_LABEL, cluster_alerts
    from hyperpod_core.telemetry.targets import collector_labels

    t, config = with_receivers
    # The construct repeats the names (constructs import nothing of ours): they must be the alerts' own.
    heartbeat = [a.kind for a in cluster_alerts(collector_labels(config.observability)) if a.name == HEARTBEAT]
    assert KIND_ATTRIBUTE == KIND_LABEL and heartbeat == [HEARTBEAT_KIND]
    subs = _subscriptions(t, TOPIC_LOGICAL_ID)
    assert subs
    for sub in subs.values():
        policy = sub["FilterPolicy"]
        assert policy == {"alert_kind": [{"anything-but": ["heartbeat"]}, {"exists": False}]}
        assert "FilterPolicyScope" not in sub  # the default scope: message attributes
        assert set(policy) <= set(ATTRIBUTES)
        assert not _sns_delivers(policy, {"alert_kind": "heartbeat", "alertname": "DpdAlertingHeartbeat"})
        assert _sns_delivers(policy, {"alert_kind": "pd", "alertname": "DpdTtftSloBreach"})
        assert _sns_delivers(policy, {"alert_kind": "availability", "alertname": "DpdEndpointDown"})
        assert _sns_delivers(policy, {"alertname": "SomethingElse"})  # no alert_kind: kept


def test_the_silence_alarm_reaches_the_same_people(with_receivers) -> None:
    t, _ = with_receivers
    (alarm,) = t.find_resources("AWS::CloudWatch::Alarm").values()
    (action,) = alarm["Properties"]["AlarmActions"]
    silence = _subscriptions(t, action["Ref"])
    assert sorted(silence) == sorted(RECEIVERS["email_addresses"])
    assert all(s["Protocol"] == "email" and "FilterPolicy" not in s for s in silence.values())


@pytest.mark.parametrize(("field", "value", "message"), [
    ("email_addresses", ["not-an-address"], "observability.alerts.email_addresses"),
    ("email_addresses", ["a@example.com", "a@example.com"], "must not repeat an address"),
    ("topic_arn", "arn:aws:sns:us-west-2:111122223333:alerts.fifo", "Standard SNS topic ARN"),
])
def test_fails_when_a_receiver_is_malformed(field, value, message, default_config_dict) -> None:
    import copy

    from hyperpod_core.config import ConfigError

    data = copy.deepcopy(default_config_dict)
    data["observability"]["alerts"] = {field: value}
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_fails_when_the_definition_has_no_alertmanager_config() -> None:
    stack = cdk.Stack(cdk.App(), "S")
    prometheus = ManagedPrometheus(stack, "P", props=ManagedPrometheusProps(alias="x"))
    with pytest.raises(ValueError, match="alertmanager_config"):
        prometheus.set_alert_manager_definition("route: {}")
