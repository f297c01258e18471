"""Dashboards and the Amazon Managed Prometheus data source in an existing Amazon Managed Grafana workspace."""

from __future__ import annotations

import json
import re
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
#: A Grafana uid (data source, folder, dashboard): 1 to 40 letters, digits, '-' and '_' (Grafana HTTP API, Folder API
#: and Dashboard API: "The uid can have a maximum length of 40 characters"; Amazon Managed Grafana user guide, "Folder
#: API", the same; grafana/grafana ``pkg/util/shortid_generator.go``: ``MaxUIDLength = 40``, "Only letters, numbers,
#: '-' and '_' are allowed"). Checked here; the uids are made by the caller.
_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True, kw_only=True)
class GrafanaDashboardsProps:
    """Props of :class:`GrafanaDashboards`."""

    workspace_id: str
    """The Amazon Managed Grafana workspace (``g-`` and 10 hex digits), in this stack's region."""
    prometheus_query_url: str
    """The AMP workspace's Prometheus endpoint (``.../workspaces/ws-.../``), the data source's URL."""
    datasource_uid: str
    """Uid and name of the AMP data source. What this resource creates in the workspace is one deployment's own, so
    that several deployments share one workspace and destroying one leaves the others': this uid, ``folder_uid`` and
    ``folder_title`` must differ from every other deployment's (the caller derives them from the deployment's name).
    A Grafana uid: 1 to 40 letters, digits, '-' or '_'."""
    folder_uid: str
    """Uid of the dashboards' folder: the deployment's own (``datasource_uid``), a Grafana uid, none of the
    dashboards'."""
    folder_title: str
    """Title of the folder: the deployment's own too, because Grafana refuses a second folder of a title
    (grafana/grafana ``pkg/services/folder/folderimpl/folder.go`` turns a same-name save into
    ``ErrFolderSameNameExists``, HTTP 409)."""
    dashboards: Mapping[str, str]
    """Dashboard JSON text by uid (what Grafana's import accepts), each uid the one its JSON carries: the dashboards'
    definitions choose them (``hyperpod_core.telemetry.dashboards``), this construct only checks them."""
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
        self.folder_uid = props.folder_uid
        self.datasource_uid = props.datasource_uid
        self.folder_title = props.folder_title
        self.provider = lambda_provider.provider(self, on_event=self.function, log_retention=props.log_retention)
        self.custom_resource = lambda_provider.custom_resource(
            self, provider=self.provider, resource_type=RESOURCE_TYPE,
            properties={
                "WorkspaceId": props.workspace_id, "Region": stack.region,
                "PrometheusUrl": props.prometheus_query_url,
                "DatasourceUid": self.datasource_uid, "DatasourceName": self.datasource_uid,
                "FolderUid": self.folder_uid, "FolderTitle": self.folder_title,
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
    for name, uid in (("datasource_uid", props.datasource_uid), ("folder_uid", props.folder_uid)):
        if not _UID.match(uid):
            raise ValueError(f"{name} must be 1-40 letters, digits, '-' or '_' (Grafana's uid rule), got {uid!r}")
    folder = props.folder_uid
    for uid, text in props.dashboards.items():
        carried = json.loads(text).get("uid")
        if carried != uid:
            raise ValueError(f"dashboards[{uid!r}] must carry the uid it is keyed by, got {carried!r}")
        if not _UID.match(uid):
            raise ValueError(f"dashboards[{uid!r}] uid must be 1-40 letters, digits, '-' or '_' (Grafana's uid rule)")
        if uid == folder:
            # Before nested folders, a Grafana folder is a row of the dashboards' table under its uid: saving a
            # dashboard under a folder's uid is refused (grafana/grafana pkg/services/dashboards/errors.go,
            # ErrDashboardTypeMismatch, "Dashboard cannot be changed to a folder").
            raise ValueError(f"dashboards[{uid!r}] uid must differ from the folder's uid {folder!r}")
