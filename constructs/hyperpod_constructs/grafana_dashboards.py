"""Dashboards and the Amazon Managed Prometheus data source in an existing Amazon Managed Grafana workspace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from hyperpod_constructs import lambda_provider

HANDLER_DIR = Path(__file__).parent / "grafana_dashboards_handler"
RESOURCE_TYPE = "Custom::GrafanaDashboards"
BUNDLED_DISTRIBUTIONS = ("grafana-client", "requests", "idna", "certifi", "verlib2")
"""Pure-Python distributions copied from the installed environment into the function (pinned in
pyproject.toml). ``urllib3`` is the Lambda runtime's (botocore's); ``charset-normalizer`` is optional for
requests and ships compiled modules, so it is left out."""
_WORKSPACE_ID_PREFIX = "g-"


@dataclass(frozen=True, kw_only=True)
class GrafanaDashboardsProps:
    """Props of :class:`GrafanaDashboards`."""

    workspace_id: str
    """The Amazon Managed Grafana workspace (``g-`` and 10 hex digits), in this stack's region."""
    prometheus_query_url: str
    """The AMP workspace's Prometheus endpoint (``.../workspaces/ws-.../``), the data source's URL."""
    dashboards: Mapping[str, str]
    """Dashboard JSON text by uid (what Grafana's import accepts)."""
    folder_title: str = "HyperPod DPD"
    """Folder of the dashboards. Default: ``HyperPod DPD``."""
    folder_uid: str = "hyperpod-dpd"
    """Folder uid. Default: ``hyperpod-dpd``."""
    datasource_uid: str = "hyperpod-dpd-amp"
    """Data source uid (and name), set as the dashboards' data-source variable. Default: ``hyperpod-dpd-amp``."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the handler's and the provider's log groups. Default: one month."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(5))
    """Lambda timeout. Default: 5 minutes."""


class GrafanaDashboards(Construct):
    """One custom resource that upserts the AMP data source, the folder and the dashboards in the workspace
    (and removes them on delete), through the Grafana HTTP API with the ``grafana-client`` library and a
    15-minute service-account token the workspace API mints. AMG has no CloudFormation resource for either.

    The workspace's own IAM role must be allowed to query the AMP workspace (AMG's "Amazon Managed Service
    for Prometheus" data source permission); the data source signs with it (SigV4, ``ec2_iam_role`` auth type).
    Its type follows the workspace's Grafana version, which the handler reads with ``grafana:DescribeWorkspace``:
    core ``prometheus`` before 12, the ``grafana-amazonprometheus-datasource`` plugin from 12 on.
    """

    function: lambda_.Function
    provider: cr.Provider
    custom_resource: CustomResource

    def __init__(self, scope: Construct, construct_id: str, *, props: GrafanaDashboardsProps) -> None:
        super().__init__(scope, construct_id)
        _validate(props)
        stack = Stack.of(self)
        workspace_arn = stack.format_arn(service="grafana", resource="/workspaces", resource_name=props.workspace_id)
        self.function = lambda_provider.handler_function(
            self, "Handler", handler="index.on_event",
            code=lambda_provider.handler_code(HANDLER_DIR, distributions=BUNDLED_DISTRIBUTIONS),
            timeout=props.timeout, memory_size=256, log_retention=props.log_retention,
            description="GrafanaDashboards: AMP data source and dashboards in Amazon Managed Grafana")
        self.function.add_to_role_policy(iam.PolicyStatement(
            actions=["grafana:DescribeWorkspace", "grafana:ListWorkspaceServiceAccounts",
                     "grafana:CreateWorkspaceServiceAccount", "grafana:CreateWorkspaceServiceAccountToken",
                     "grafana:DeleteWorkspaceServiceAccountToken"],
            resources=[workspace_arn]))
        self.provider = lambda_provider.provider(self, on_event=self.function, log_retention=props.log_retention)
        self.custom_resource = lambda_provider.custom_resource(
            self, provider=self.provider, resource_type=RESOURCE_TYPE,
            properties={
                "WorkspaceId": props.workspace_id, "Region": stack.region,
                "PrometheusUrl": props.prometheus_query_url,
                "DatasourceUid": props.datasource_uid, "DatasourceName": props.datasource_uid,
                "FolderUid": props.folder_uid, "FolderTitle": props.folder_title,
                "Dashboards": [props.dashboards[uid] for uid in sorted(props.dashboards)],
            },
            depends_on=[self.function.role or self.function])


def _validate(props: GrafanaDashboardsProps) -> None:
    wid = props.workspace_id
    if not (wid.startswith(_WORKSPACE_ID_PREFIX) and len(wid) == 12
            and all(c in "0123456789abcdef" for c in wid[2:])):
        raise ValueError(f"workspace_id must be 'g-' and 10 hex digits, got {wid!r}")
    if not props.dashboards:
        raise ValueError("dashboards must hold at least one dashboard, got none")
