"""Prometheus alerting rules delivered to Amazon Managed Service for Prometheus as a rule groups namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from aws_cdk import aws_aps as aps
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class AlertRulesProps:
    """Props of :class:`AlertRules`."""

    workspace_arn: str
    """The AMP workspace the rules are evaluated in."""
    namespace_name: str
    """Rule groups namespace name (1-64 characters: letters, digits, '-', '_')."""
    rule_groups: dict[str, Any]
    """A Prometheus rule file, ``{"groups": [...]}``: the same definitions the PrometheusRule manifest carries."""


class AlertRules(Construct):
    """One ``AWS::APS::RuleGroupsNamespace`` holding the alert rule file, so the alerts fire in AMP (Alertmanager
    routes them) without an in-cluster Prometheus."""

    namespace: aps.CfnRuleGroupsNamespace

    def __init__(self, scope: Construct, construct_id: str, *, props: AlertRulesProps) -> None:
        super().__init__(scope, construct_id)
        groups = props.rule_groups.get("groups")
        if not isinstance(groups, list) or not groups:
            raise ValueError("rule_groups must be a Prometheus rule file with at least one group, "
                             f"got keys {sorted(props.rule_groups)}")
        if not 1 <= len(props.namespace_name) <= 64:
            raise ValueError(f"namespace_name must be 1-64 characters, got {props.namespace_name!r}")
        self.namespace = aps.CfnRuleGroupsNamespace(
            self, "Namespace", workspace=props.workspace_arn, name=props.namespace_name,
            data=yaml.safe_dump(props.rule_groups, sort_keys=True))
