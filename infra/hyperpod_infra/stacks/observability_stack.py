"""Observability: the managed Prometheus workspace, its alert rules and alert manager, the alert topic and, when
configured, the Grafana dashboards.

A stack of its own so that ``observability.enabled: false`` simply leaves it out, and so that metrics
(short-lived, deleted on destroy) and the inference platform have separate lifecycles. It needs nothing from the
other stacks, so it deploys in parallel with the network (``deploy --concurrency``). The platform stack takes the
workspace to scope KEDA's Prometheus queries to it; the HyperPod observability add-on, which needs GPU nodes,
writes to it from its own stack (:mod:`hyperpod_infra.stacks.observability_addon_stack`), so that nothing the
platform needs waits for GPU nodes (docs/deploy.md, "Critical path").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from hyperpod_constructs.alert_rules import AlertRules, AlertRulesProps
from hyperpod_constructs.alert_topic import AlertTopic, AlertTopicProps
from hyperpod_constructs.grafana_dashboards import GrafanaDashboards, GrafanaDashboardsProps
from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_core import outputs


@dataclass(frozen=True, kw_only=True)
class GrafanaDelivery:
    """Where the dashboards go in an existing Amazon Managed Grafana workspace (:class:`GrafanaDashboardsProps`
    without the data source's URL, which is this stack's Prometheus workspace)."""

    workspace_id: str
    """The Amazon Managed Grafana workspace that receives ``dashboards`` and the AMP data source."""
    datasource_uid: str
    """Uid and name of the AMP data source: the deployment's own."""
    folder_uid: str
    """Uid of the dashboards' folder: the deployment's own."""
    folder_title: str
    """Title of that folder: the deployment's own (Grafana refuses two folders of one title)."""
    dashboards: Mapping[str, str]
    """Dashboard JSON text by uid."""


@dataclass(frozen=True, kw_only=True)
class ObservabilityStackProps:
    workspace_alias: str
    alert_rule_groups: dict[str, Any] | None = None
    """Prometheus rule file evaluated in the workspace. Default: no alert rules."""
    alert_manager_definition: Callable[[Sequence[str]], str] | None = None
    """The workspace's alert manager definition for the given SNS topic ARNs (the stack's alert topic first,
    then ``alert_topic_arns``). Default: none (no alert topic, no alert manager: the rules notify no one)."""
    alert_emails: Sequence[str] = ()
    """E-mail addresses subscribed to the alert topic. Default: none."""
    alert_topic_arns: Sequence[str] = ()
    """Existing SNS topics that receive every alert too (their policies are their owners'). Default: none."""
    grafana: GrafanaDelivery | None = None
    """The dashboards and the AMP data source into Amazon Managed Grafana.
    Default: none (dashboards ship only as sidecar ConfigMaps and JSON files from the cdk8s app)."""


class ObservabilityStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: ObservabilityStackProps,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.prometheus = ManagedPrometheus(self, "Prometheus",
                                            props=ManagedPrometheusProps(alias=props.workspace_alias))
        self.alert_rules = None
        if props.alert_rule_groups is not None:
            self.alert_rules = AlertRules(self, "AlertRules", props=AlertRulesProps(
                workspace_arn=self.prometheus.workspace_arn, namespace_name=f"{props.workspace_alias}-dpd-alerts",
                rule_groups=props.alert_rule_groups))
        self.alert_topic = None
        if props.alert_manager_definition is not None:
            self.alert_topic = AlertTopic(self, "AlertTopic", props=AlertTopicProps(
                workspace_arn=self.prometheus.workspace_arn, display_name=f"{props.workspace_alias} DPD alerts",
                email_addresses=tuple(props.alert_emails)))
            self.prometheus.set_alert_manager_definition(
                props.alert_manager_definition([self.alert_topic.topic_arn, *props.alert_topic_arns]))
            CfnOutput(self, outputs.ALERT_TOPIC_ARN, value=self.alert_topic.topic_arn,
                      description="SNS topic of every alert (AMP alert manager receiver)")
        self.grafana = None
        if props.grafana is not None:
            g = props.grafana
            self.grafana = GrafanaDashboards(self, "GrafanaDashboards", props=GrafanaDashboardsProps(
                workspace_id=g.workspace_id, prometheus_query_url=self.prometheus.prometheus_endpoint,
                datasource_uid=g.datasource_uid, folder_uid=g.folder_uid, folder_title=g.folder_title,
                dashboards=g.dashboards))

        CfnOutput(self, outputs.AMP_WORKSPACE_ENDPOINT, value=self.prometheus.prometheus_endpoint,
                  description="Managed Prometheus endpoint (KEDA prometheusTrigger serverAddress base)")
        CfnOutput(self, outputs.AMP_WORKSPACE_ARN, value=self.prometheus.workspace_arn)
