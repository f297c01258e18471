"""The SageMaker HyperPod observability EKS add-on, writing to a managed Prometheus workspace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from hyperpod_constructs.managed_prometheus import ManagedPrometheus

ADDON_NAME = "amazon-sagemaker-hyperpod-observability"
NAMESPACE = "hyperpod-observability"
COLLECTOR_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
#: Log groups the collector may use: AWS prescribes the collector role's CloudWatch Logs permissions on
#: ``log-group:/aws/sagemaker/Clusters/*`` and ``...:log-stream:*`` (:data:`LOG_SCOPE_SOURCE`).
CLUSTER_LOG_GROUP_PREFIX = "/aws/sagemaker/Clusters/"
#: Where AWS states the collector role's log permissions, word for word the same actions and resources.
LOG_SCOPE_SOURCE = (
    "AWS's troubleshooting page for the add-on (docs.aws.amazon.com/sagemaker/latest/dg/"
    "hyperpod-observability-addon-troubleshooting.html, 'Verify Pod Identity association') and AWS's console "
    "template (aws/sagemaker-hyperpod-cluster-setup, eks/cloudformation/observability-template.yaml @ "
    "0ab564d78aa5a16eceebdbb981db5f432f8cf25e, HyperPodObservabilityAddonRole) grant these actions on "
    "log-group:/aws/sagemaker/Clusters/* and its log streams")
#: The actions of :data:`LOG_SCOPE_SOURCE`: read and write, no delete.
CLUSTER_LOG_ACTIONS = (
    "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
    "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery",
    "logs:StopQuery", "logs:GetQueryResults",
)
#: Why the scope is not narrowed to this cluster's ``/aws/sagemaker/Clusters/<cluster name>/*``.
WIDE_LOG_SCOPE_REASON = (
    f"{LOG_SCOPE_SOURCE}; no AWS source names the groups the collector writes (the add-on's configuration "
    "carries no HyperPod cluster name), so a scope narrowed to this cluster's groups is unverified and would "
    "fail silently (AccessDenied in the collector, logs missing). Read and write only, no delete; this "
    "account and region.")
#: ``metricsProvider`` levels AWS's console template offers (observability-template.yaml parameters).
LEVELS = ("DISABLED", "BASIC", "ADVANCED")


@dataclass(frozen=True, kw_only=True)
class ObservabilityAddonProps:
    """Props of :class:`ObservabilityAddon`."""

    cluster: eks.ICluster
    version: str
    """Exact add-on version; the caller takes it from the one pin module."""
    prometheus: ManagedPrometheus
    metrics_provider: Mapping[str, Mapping[str, Any]]
    """The ``metricsProvider`` value: every category (``inferenceMetrics``, ``acceleratedComputeMetrics``,
    ``clusterMetrics``, ...) with ``level`` and ``scrapeInterval``. AWS's console template passes every category:
    which ones the add-on collects when a category is left out is not published."""
    logging: bool = True
    """Ship HyperPod node and pod logs to CloudWatch Logs. Default: on."""
    depends_on: Sequence[IConstruct] = field(default_factory=tuple)
    """Install after these, e.g. the ``eks-pod-identity-agent`` add-on the association needs. Default: none."""


class ObservabilityAddon(Construct):
    """The add-on with the given metrics categories on, and its collector's role through EKS Pod Identity.

    The role trusts ``pods.eks.amazonaws.com`` for this cluster only (``aws:SourceArn``/``aws:SourceAccount``)
    and may remote-write to the one workspace and read and write the ``/aws/sagemaker/Clusters/*`` log groups,
    the scope AWS prescribes (:data:`LOG_SCOPE_SOURCE`; why not narrower: :data:`WIDE_LOG_SCOPE_REASON`).
    """

    addon: eks.CfnAddon
    collector_role: iam.Role

    def __init__(self, scope: Construct, construct_id: str, *, props: ObservabilityAddonProps) -> None:
        super().__init__(scope, construct_id)
        if not props.metrics_provider:
            raise ValueError("metrics_provider must name at least one category, got none")
        for category, settings in props.metrics_provider.items():
            if settings.get("level") not in LEVELS:
                raise ValueError(f"metrics_provider.{category}.level must be one of {', '.join(LEVELS)}, "
                                 f"got {settings.get('level')!r}")
            interval = settings.get("scrapeInterval")
            if not isinstance(interval, int) or not 5 <= interval <= 300:
                raise ValueError(f"metrics_provider.{category}.scrapeInterval must be 5-300, got {interval!r}")
        self.collector_role = iam.Role(
            self, "CollectorRole",
            description="HyperPod observability add-on: OpenTelemetry collector (EKS Pod Identity)",
            # Pod Identity assumes the role and tags the session with the pod's attributes.
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com").with_conditions({
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID,
                                 "aws:SourceArn": props.cluster.cluster_arn}})),
        )
        statements = [iam.PolicyStatement(
            sid="PrometheusRemoteWrite", actions=["aps:RemoteWrite"], resources=[props.prometheus.workspace_arn])]
        if props.logging:
            log_group = f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:{CLUSTER_LOG_GROUP_PREFIX}*"
            # AWS's scope (LOG_SCOPE_SOURCE), kept wide on purpose: WIDE_LOG_SCOPE_REASON.
            statements.append(iam.PolicyStatement(
                sid="ClusterLogs", resources=[log_group, f"{log_group}:log-stream:*"],
                actions=list(CLUSTER_LOG_ACTIONS)))
        self.collector_policy = iam.Policy(self, "CollectorPolicy", roles=[self.collector_role],
                                           statements=statements)

        self.configuration_values = {
            "ampWorkspace": {"prometheusEndpoint": props.prometheus.remote_write_base,
                             "arn": props.prometheus.workspace_arn},
            "metricsProvider": {k: dict(v) for k, v in props.metrics_provider.items()},
            "logging": {"enabled": props.logging},
        }
        self.addon = eks.CfnAddon(
            self, "Addon", addon_name=ADDON_NAME, addon_version=props.version,
            cluster_name=props.cluster.cluster_name, resolve_conflicts="OVERWRITE",
            configuration_values=Stack.of(self).to_json_string(self.configuration_values),
            pod_identity_associations=[eks.CfnAddon.PodIdentityAssociationProperty(
                role_arn=self.collector_role.role_arn, service_account=COLLECTOR_SERVICE_ACCOUNT)],
        )
        # The association is created with the add-on, so the role and its policy must exist first.
        self.addon.node.add_dependency(self.collector_policy)
        for dependency in props.depends_on:
            self.addon.node.add_dependency(dependency)
