"""Custom resource handler: dashboards and the Amazon Managed Prometheus data source in Amazon Managed Grafana.

Amazon Managed Grafana has no CloudFormation resource for dashboards or data sources; its own API
(boto3 ``grafana``) mints a short-lived service-account token, and the Grafana HTTP API, through the
maintained ``grafana-client`` library, does the rest:

* Create / Update: upsert the data source (uid ``DatasourceUid``, SigV4 with the workspace's IAM role), the
  folder, and every dashboard (``overwrite``), with the dashboards' data-source variable pointing at it;
  on Update, dashboards that are no longer shipped are deleted.
* The data source follows the workspace's Grafana version (``DescribeWorkspace`` -> ``grafanaVersion``): before 12
  the core ``prometheus`` type with SigV4; from 12 on, SigV4 is gone from the core plugin (AMG user guide, "Manually
  adding the Prometheus data source"), so it is the Amazon Managed Service for Prometheus plugin's type, with that
  plugin's provisioning fields (grafana/grafana-amazonprometheus-datasource, ``docs/sources/configure.md``). A data
  source of the other type under our uid is updated in place to the new type. Either way it signs as the
  workspace's IAM role:
  ``sigV4AuthType: ec2_iam_role`` (grafana-aws-sdk ``pkg/awsds/settings.go`` ``ToAuthType`` rejects anything else
  it does not list, such as ``ec2``). The dashboards name the data source by uid only; their data-source variable
  lists the type created.
* Delete: delete our dashboards and data source, and the folder only if nothing else is left in it (a
  dashboard a user saved there is theirs).
* Only this deployment's objects are ever deleted. Their uids carry the deployment's name (the caller makes them:
  ``<name>_amp``, ``<name>_folder``, ``<name>_<endpoint>_<kind>``), so another deployment's differ, short of two
  uids shortened to 40 characters whose 8-hex-digit hashes agree; and the objects a set of properties names count
  as this deployment's only while the data source under their uid queries this deployment's own AMP workspace
  (:func:`owned`). That second rule is for the uids of before (``hyperpod-dpd-amp``, folder ``hyperpod-dpd``,
  ``dpd-overview-<endpoint>``; then ``<name>-amp``, folder ``<name>``), which a deployment not yet upgraded still
  writes and which every deployment of the default name shared: they belong to whichever deployed last, and the
  Delete CloudFormation sends for them once a deployment moves to its own uids leaves them alone otherwise. It
  guards deletes only: a deploy under a uid another deployment holds repoints that data source.

The token lives 15 minutes and is deleted when the request ends, whatever happens.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SERVICE_ACCOUNT = "hyperpod-dpd-dashboards"
TOKEN_SECONDS = 900
DATASOURCE_VARIABLE = "datasource"
CORE_PROMETHEUS = "prometheus"
AMP_PLUGIN = "grafana-amazonprometheus-datasource"
#: The first Grafana major version of AMG without SigV4 in the core Prometheus plugin.
AMP_PLUGIN_FROM_MAJOR = 12
#: Sign with the workspace's IAM role (AMG: "Workspace IAM role").
SIGV4_AUTH_TYPE = "ec2_iam_role"

log = logging.getLogger()
log.setLevel(logging.INFO)

ApiFactory = Callable[[str, str], Any]
"""(workspace endpoint host, token) -> ``grafana_client.GrafanaApi``."""


def _https_api(endpoint: str, token: str) -> Any:
    from grafana_client import GrafanaApi

    return GrafanaApi.from_url(f"https://{endpoint}", credential=token, timeout=30.0)


@dataclass(frozen=True)
class Workspace:
    api: Any
    """``grafana_client.GrafanaApi`` for the workspace."""
    grafana_version: str
    """``DescribeWorkspace`` -> ``workspace.grafanaVersion``, e.g. ``10.4`` or ``12.4``."""


def datasource_type(grafana_version: str) -> str:
    """The data source type that queries AMP with SigV4 on this Grafana version."""
    major = grafana_version.split(".", 1)[0]
    if not major.isdigit():
        raise ValueError(f"workspace grafanaVersion must start with a major version number, got {grafana_version!r}")
    return AMP_PLUGIN if int(major) >= AMP_PLUGIN_FROM_MAJOR else CORE_PROMETHEUS


@contextmanager
def workspace_api(grafana: Any, workspace_id: str, api_factory: ApiFactory) -> Iterator[Workspace]:
    """A Grafana API client for the workspace, authenticated by a token that is deleted on exit."""
    workspace = grafana.describe_workspace(workspaceId=workspace_id)["workspace"]
    endpoint = workspace["endpoint"]
    # Every page: the workspace is the user's and may hold other service accounts before ours.
    pages = grafana.get_paginator("list_workspace_service_accounts").paginate(workspaceId=workspace_id)
    account = next((a for page in pages for a in page["serviceAccounts"] if a["name"] == SERVICE_ACCOUNT), None)
    if account is None:
        # Admin: creating data sources needs it (Grafana role-based access, "datasources:create").
        account = grafana.create_workspace_service_account(
            workspaceId=workspace_id, name=SERVICE_ACCOUNT, grafanaRole="ADMIN")
    token = grafana.create_workspace_service_account_token(
        workspaceId=workspace_id, serviceAccountId=account["id"], name=f"cfn-{uuid.uuid4().hex[:16]}",
        secondsToLive=TOKEN_SECONDS)["serviceAccountToken"]
    try:
        yield Workspace(api=api_factory(endpoint, token["key"]), grafana_version=workspace["grafanaVersion"])
    finally:
        grafana.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account["id"], tokenId=token["id"])


def _not_found(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) == 404


def datasource(props: dict[str, Any], kind: str) -> dict[str, Any]:
    """The AMP data source of type ``kind`` (:func:`datasource_type`), signing as the workspace's IAM role."""
    json_data: dict[str, Any] = {"httpMethod": "POST", "sigV4Auth": True, "sigV4AuthType": SIGV4_AUTH_TYPE,
                                 "sigV4Region": props["Region"]}
    if kind == AMP_PLUGIN:
        json_data["sigv4Service"] = "aps"  # the plugin's spelling (its provisioning docs); "aps" is its default
    return {"uid": props["DatasourceUid"], "name": props["DatasourceName"], "type": kind, "access": "proxy",
            "url": props["PrometheusUrl"].rstrip("/"), "isDefault": False, "jsonData": json_data}


def _dashboard(text: str, props: dict[str, Any], kind: str) -> dict[str, Any]:
    model = json.loads(text)
    model.pop("id", None)
    for variable in model.get("templating", {}).get("list", []):
        if variable.get("name") == DATASOURCE_VARIABLE:
            variable["query"] = kind
            variable["current"] = {"selected": True, "text": props["DatasourceName"], "value": props["DatasourceUid"]}
    return model


def _uids(props: dict[str, Any] | None) -> set[str]:
    return {json.loads(t)["uid"] for t in (props or {}).get("Dashboards", [])}


def owned(api: Any, props: dict[str, Any]) -> bool:
    """Whether the objects ``props`` names are this deployment's: the data source under its uid is absent or
    queries ``props``' own AMP workspace (each deployment has its own)."""
    try:
        existing = api.datasource.get_datasource_by_uid(props["DatasourceUid"])
    except Exception as exc:
        if not _not_found(exc):
            raise
        return True
    return str(existing.get("url", "")).rstrip("/") == props["PrometheusUrl"].rstrip("/")


def deploy(api: Any, props: dict[str, Any], old: dict[str, Any] | None = None, *,
           kind: str = CORE_PROMETHEUS) -> None:
    # Asked before the upsert below, which may take over a data source of the shared uid of before.
    old_is_ours = old is not None and owned(api, old)
    ds = datasource(props, kind)
    try:
        existing = api.datasource.get_datasource_by_uid(ds["uid"])
    except Exception as exc:
        if not _not_found(exc):
            raise
        api.datasource.create_datasource(ds)
    else:
        # Updated in place, also when the type changes (the workspace moved to Grafana 12: the core type cannot sign
        # any more). PUT /api/datasources/uid/:uid binds the whole UpdateDataSourceCommand, type included, onto the
        # existing data source's id (grafana/grafana @ db64da7, pkg/api/datasources.go UpdateDataSourceByUID), and
        # the store rewrites that row with ``Type: cmd.Type`` (@ ea500b8, pkg/services/datasources/service/store.go
        # UpdateDataSource), so id, uid and permissions stay. Delete-then-create would drop the permissions (@ 78b7697,
        # service/datasource.go DeleteDataSource: DeleteResourcePermissions) and leave no data source at all if the
        # create failed.
        if existing.get("type") != kind:
            log.info("data source %s: type %s -> %s", ds["uid"], existing.get("type"), kind)
        api.datasource.update_datasource_by_uid(ds["uid"], ds)
    folder = props["FolderUid"]
    try:
        api.folder.get_folder(folder)
        api.folder.update_folder(folder, title=props["FolderTitle"], overwrite=True)
    except Exception as exc:
        if not _not_found(exc):
            raise
        api.folder.create_folder(props["FolderTitle"], uid=folder)
    for text in props["Dashboards"]:
        api.dashboard.update_dashboard({"dashboard": _dashboard(text, props, kind), "folderUid": folder,
                                        "overwrite": True, "message": "hyperpod-dpd deploy"})
    if old_is_ours:
        for uid in sorted(_uids(old) - _uids(props)):
            _delete_dashboard(api, uid)


def _delete_dashboard(api: Any, uid: str) -> None:
    try:
        api.dashboard.delete_dashboard(uid)
    except Exception as exc:
        if not _not_found(exc):
            raise


def remove(api: Any, props: dict[str, Any]) -> None:
    if not owned(api, props):
        log.info("data source %s queries another deployment's workspace: nothing of it is ours to delete",
                 props["DatasourceUid"])
        return
    for uid in sorted(_uids(props)):
        _delete_dashboard(api, uid)
    try:
        folder = api.folder.get_folder(props["FolderUid"])
    except Exception as exc:
        if not _not_found(exc):
            raise
    else:
        if not api.search.search_dashboards(folder_ids=folder["id"]):
            api.folder.delete_folder(props["FolderUid"])
    try:
        api.datasource.delete_datasource_by_uid(props["DatasourceUid"])
    except Exception as exc:
        if not _not_found(exc):
            raise


def on_event(event: dict[str, Any], context: Any, *, grafana: Any = None,
             api_factory: ApiFactory = _https_api) -> dict[str, Any]:
    props = event["ResourceProperties"]
    workspace = props["WorkspaceId"]
    if grafana is None:
        import boto3

        grafana = boto3.client("grafana", region_name=props["Region"])
    log.info("%s dashboards %s in %s", event["RequestType"], sorted(_uids(props)), workspace)
    with workspace_api(grafana, workspace, api_factory) as ws:
        if event["RequestType"] == "Delete":
            remove(ws.api, props)
        else:
            kind = datasource_type(ws.grafana_version)
            log.info("Grafana %s: data source type %s", ws.grafana_version, kind)
            deploy(ws.api, props, event.get("OldResourceProperties"), kind=kind)
    return {"PhysicalResourceId": f"{workspace}/{props['FolderUid']}",
            "Data": {"DatasourceUid": props["DatasourceUid"], "FolderUid": props["FolderUid"]}}
