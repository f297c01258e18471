"""The alert rules reach Amazon Managed Prometheus as a rule groups namespace, from the same definitions as
the PrometheusRule manifest, and the delivered file passes promtool."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from aws_cdk.assertions import Template

from hyperpod_constructs.alert_rules import AlertRules, AlertRulesProps
from hyperpod_core.telemetry.alerts import alert_rule_groups


@pytest.fixture(scope="module")
def namespace(templates) -> dict:
    (ns,) = Template.find_resources(templates["Observability"], "AWS::APS::RuleGroupsNamespace").values()
    return ns["Properties"]


def test_namespace_targets_our_workspace(namespace, templates) -> None:
    (workspace,) = templates["Observability"].find_resources("AWS::APS::Workspace")
    assert namespace["Workspace"] == {"Fn::GetAtt": [workspace, "Arn"]}
    assert namespace["Name"] == "hyperpod-dpd-dpd-alerts"


def test_namespace_holds_exactly_the_shared_alert_definitions(namespace, default_config) -> None:
    assert yaml.safe_load(namespace["Data"]) == alert_rule_groups(default_config)
    alerts = [r["alert"] for g in yaml.safe_load(namespace["Data"])["groups"] for r in g["rules"] if "alert" in r]
    assert "DpdDecodeKvCacheSaturated" in alerts and "DpdTtftSloBreach" in alerts


def test_delivered_rule_file_passes_promtool(namespace, tmp_path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: apt-get install prometheus"
    rules = tmp_path / "amp-rules.yaml"
    rules.write_text(namespace["Data"])
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_namespace_without_observability(default_config_dict) -> None:
    import copy

    import aws_cdk as cdk

    from hyperpod_core.config import parse_config
    from hyperpod_infra.app_builder import build

    data = copy.deepcopy(default_config_dict)
    data["observability"]["enabled"] = False
    stacks = build(cdk.App(context={"aws:cdk:disable-asset-staging": True}), parse_config(data))
    assert stacks.observability is None
    assert all(Template.from_stack(s).find_resources("AWS::APS::RuleGroupsNamespace") == {} for s in stacks.all())


@pytest.mark.parametrize(("rule_groups", "name", "message"), [
    ({"groups": []}, "ok", "at least one group"),
    ({"rules": []}, "ok", "at least one group"),
    ({"groups": [{"name": "g", "rules": []}]}, "", "namespace_name must be 1-64"),
])
def test_fails_when_alert_rules_props_are_invalid(rule_groups, name, message) -> None:
    import aws_cdk as cdk

    stack = cdk.Stack(cdk.App())
    with pytest.raises(ValueError, match=message):
        AlertRules(stack, "Rules", props=AlertRulesProps(workspace_arn="arn", namespace_name=name,
                                                         rule_groups=rule_groups))
