"""The chart's rule groups as the ``PrometheusRule`` class ``cdk8s import`` generates from prometheus-operator's CRD.

The CRD (``monitoring.coreos.com/v1``, prometheus-operator v0.93.0) is vendored byte for byte in ``k8s/crds/`` (its
source and blob id in ``k8s/crds/SOURCES.md``); ``./scripts/setup`` generates the binding from it into
``hyperpod_k8s.imports`` (git-ignored, never edited). The props stay plain dataclasses (``props.py``, no jsii); this
maps them onto the generated structs field by field.
"""

from __future__ import annotations

import cdk8s
from constructs import Construct

from hyperpod_k8s.imports.com.coreos import monitoring
from hyperpod_k8s.observability.props import PrometheusRuleSpec, Rule, RuleGroup


def _rule(rule: Rule) -> monitoring.PrometheusRuleSpecGroupsRules:
    # The CRD types ``expr`` as int-or-string; ours is always PromQL text. Empty label and annotation maps are left
    # out, as before.
    return monitoring.PrometheusRuleSpecGroupsRules(
        alert=rule.alert, expr=monitoring.PrometheusRuleSpecGroupsRulesExpr.from_string(rule.expr), for_=rule.for_,
        labels=dict(rule.labels) or None, annotations=dict(rule.annotations) or None)


def _group(group: RuleGroup) -> monitoring.PrometheusRuleSpecGroups:
    return monitoring.PrometheusRuleSpecGroups(
        name=group.name, interval=group.interval, rules=[_rule(rule) for rule in group.rules])


def prometheus_rule(scope: Construct, construct_id: str, *, metadata: cdk8s.ApiObjectMetadata,
                    spec: PrometheusRuleSpec) -> monitoring.PrometheusRule:
    """A prometheus-operator PrometheusRule: ``metadata`` and the rule groups, through the generated class."""
    return monitoring.PrometheusRule(
        scope, construct_id, metadata=metadata,
        spec=monitoring.PrometheusRuleSpec(groups=[_group(group) for group in spec.groups]))
