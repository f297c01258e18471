"""Observability: the managed Prometheus workspace, its alert rules and alert manager, the alert topic, the
HyperPod observability add-on and, when configured, the dashboards in Amazon Managed Grafana.

A stack of its own so that ``observability.enabled: false`` simply leaves it out, and so that metrics
(short-lived, deleted on destroy) and the inference platform have separate lifecycles. The platform stack
takes the workspace to scope KEDA's Prometheus queries to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from hyperpod_constructs import node_readiness
from hyperpod_constructs.alert_rules import AlertRules, AlertRulesProps
from hyperpod_constructs.alert_topic import AlertTopic, AlertTopicProps
from hyperpod_constructs.grafana_dashboards import GrafanaDashboards, GrafanaDashboardsProps
from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_constructs.nag import acknowledge
from hyperpod_constructs.node_readiness import NodeReadiness, NodeReadinessProps, NodeRequirement
from hyperpod_constructs.observability_addon import ObservabilityAddon, ObservabilityAddonProps
from hyperpod_core import bundle, outputs, pins


@dataclass(frozen=True, kw_only=True)
class ObservabilityStackProps:
    cluster: eks.ICluster
    workspace_alias: str
    metrics_provider: Mapping[str, Mapping[str, Any]]
    """The observability add-on's ``metricsProvider`` (every category with level and scrape interval)."""
    addon_depends_on: Sequence[IConstruct] = field(default_factory=tuple)
    """The ``eks-pod-identity-agent`` add-on (Pod Identity must run before the association is used)."""
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
    """Grafana folder of the dashboards. Default: ``HyperPod DPD``."""
    dashboards: Mapping[str, str] = field(default_factory=dict)
    """Dashboard JSON text by uid, for ``grafana_workspace_id``. Default: none."""
    wait_for_nodes: tuple[NodeRequirement, ...] = ()
    """Ready nodes the add-on needs (it needs a 4xlarge or larger node: the HyperPod nodes). The add-on is
    created only once they are Ready, after a bounded wait. Default: no wait."""
    wait_after: Sequence[IConstruct] = field(default_factory=tuple)
    """Start the node wait after these (the HyperPod cluster). Default: none."""
    hyperpod_cluster_name: str | None = None
    """Named in the wait's failure message. Default: none."""
    kube_api_vpc: ec2.IVpc | None = None
    """Run the wait's functions in this VPC (API endpoint not open to the internet). Default: outside."""


class ObservabilityStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: ObservabilityStackProps,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.prometheus = ManagedPrometheus(self, "Prometheus",
                                            props=ManagedPrometheusProps(alias=props.workspace_alias))
        self.node_readiness = None
        addon_depends_on = list(props.addon_depends_on)
        if props.wait_for_nodes:
            self.node_readiness = NodeReadiness(self, "NodeReadiness", props=NodeReadinessProps(
                cluster=props.cluster, requirements=props.wait_for_nodes,
                waiting_for="the HyperPod observability add-on", depends_on=tuple(props.wait_after),
                hyperpod_cluster_name=props.hyperpod_cluster_name, vpc=props.kube_api_vpc,
                bundled_modules=bundle.imported_by(node_readiness.HANDLER_DIR / "index.py")))
            addon_depends_on.append(self.node_readiness.resource)
        self.addon = ObservabilityAddon(self, "HyperPodObservability", props=ObservabilityAddonProps(
            cluster=props.cluster, version=pins.OBSERVABILITY.version, prometheus=self.prometheus,
            metrics_provider=props.metrics_provider, depends_on=tuple(addon_depends_on)))
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
            self.grafana = GrafanaDashboards(self, "GrafanaDashboards", props=GrafanaDashboardsProps(
                workspace_id=props.grafana_workspace_id, prometheus_query_url=self.prometheus.prometheus_endpoint,
                dashboards=props.dashboards, folder_title=props.grafana_folder))
        acknowledge(
            self.addon.collector_policy, "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
            "<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*]",
            "The collector writes one log group per HyperPod cluster under /aws/sagemaker/Clusters/, named by "
            "the service; this is the scope the observability add-on guide prescribes.")
        acknowledge(
            self.addon.collector_policy, "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
            "<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/*:log-stream:*]",
            "Log streams are created per node and pod at run time inside the HyperPod cluster log groups.")

        CfnOutput(self, outputs.AMP_WORKSPACE_ENDPOINT, value=self.prometheus.prometheus_endpoint,
                  description="Managed Prometheus endpoint (KEDA prometheusTrigger serverAddress base)")
        CfnOutput(self, outputs.AMP_WORKSPACE_ARN, value=self.prometheus.workspace_arn)
