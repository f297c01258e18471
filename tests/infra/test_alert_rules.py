"""The alert rules reach Amazon Managed Prometheus as a rule groups namespace, from the same definitions as
the PrometheusRule manifest, and the delivered file passes promtool. The observability stack alone (root conftest
``observability_alone``, given the default config's rule groups); no namespace when observability is off:
tests/platform/test_platform_app.py (the config matrix)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from tests.infra import stand_ins

from hyperpod_constructs.alert_rules import AlertRules, AlertRulesProps
from hyperpod_core.telemetry.alerts import alert_rule_groups


@pytest.fixture(scope="module")
def namespace(observability_alone) -> dict:
    (ns,) = observability_alone.template.find_resources("AWS::APS::RuleGroupsNamespace").values()
    return ns["Properties"]


def test_namespace_targets_our_workspace(namespace, observability_alone) -> None:
    (workspace,) = observability_alone.template.find_resources("AWS::APS::Workspace")
    assert namespace["Workspace"] == {"Fn::GetAtt": [workspace, "Arn"]}
    assert namespace["Name"] == f"{stand_ins.WORKSPACE_ALIAS}-dpd-alerts"


def test_namespace_holds_exactly_the_shared_alert_definitions(namespace, default_config) -> None:
    assert yaml.safe_load(namespace["Data"]) == alert_rule_groups(default_config.specs())
    alerts = [r["alert"] for g in yaml.safe_load(namespace["Data"])["groups"] for r in g["rules"] if "alert" in r]
    assert "DpdDecodeKvCacheSaturated" in alerts and "DpdTtftSloBreach" in alerts


def test_delivered_rule_file_passes_promtool(namespace, tmp_path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: apt-get install prometheus"
    rules = tmp_path / "amp-rules.yaml"
    rules.write_text(namespace["Data"])
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


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
