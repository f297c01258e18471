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
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from hyperpod_constructs.alert_rules import AlertRules, AlertRulesProps
from hyperpod_constructs.alert_topic import AlertTopic, AlertTopicProps
from hyperpod_constructs.grafana_dashboards import GrafanaDashboards, GrafanaDashboardsProps
from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_core import outputs


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
    grafana_workspace_id: str | None = None
    """Amazon Managed Grafana workspace that receives ``dashboards`` and the AMP data source.
    Default: none (dashboards ship only as sidecar ConfigMaps and JSON files from the cdk8s app)."""
    grafana_folder: str = "HyperPod DPD"
    """Grafana folder of the dashboards (titled ``<grafana_folder> (<deployment_name>)``). Default: ``HyperPod DPD``."""
    deployment_name: str | None = None
    """The deployment's name: the Grafana data source, folder and folder title are this deployment's own
    (``GrafanaDashboardsProps.deployment``), so that deployments share a workspace. Required with
    ``grafana_workspace_id``. Default: none."""
    dashboards: Mapping[str, str] = field(default_factory=dict)
    """Dashboard JSON text by uid, for ``grafana_workspace_id``. Default: none."""


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
        if props.grafana_workspace_id is not None:
            if props.deployment_name is None:
                raise ValueError("deployment_name is required with grafana_workspace_id (the workspace's data source "
                                 "and folder are the deployment's own), got None")
            self.grafana = GrafanaDashboards(self, "GrafanaDashboards", props=GrafanaDashboardsProps(
                workspace_id=props.grafana_workspace_id, deployment=props.deployment_name,
                prometheus_query_url=self.prometheus.prometheus_endpoint, dashboards=props.dashboards,
                folder_title=props.grafana_folder))

        CfnOutput(self, outputs.AMP_WORKSPACE_ENDPOINT, value=self.prometheus.prometheus_endpoint,
                  description="Managed Prometheus endpoint (KEDA prometheusTrigger serverAddress base)")
        CfnOutput(self, outputs.AMP_WORKSPACE_ARN, value=self.prometheus.workspace_arn)
