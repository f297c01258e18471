"""Dashboards reach Amazon Managed Grafana: the custom resource's handler against a local Grafana HTTP API,
its bundle in a clean interpreter, and the synthesized resource.

The AWS side (workspace endpoint, service account, token) is botocore's ``Stubber`` on a real ``grafana``
client: moto has no Amazon Managed Grafana service-account APIs, and the Stubber validates every request and
response against botocore's service model. The Grafana side is a small HTTP server on 127.0.0.1 that
implements the Grafana HTTP API endpoints the handler uses (``/api/datasources``, ``/api/folders``,
``/api/dashboards``, ``/api/search``, as documented at grafana.com/docs/grafana/latest/developers/http_api),
driven by the real ``grafana-client`` library.

What the data source must be comes from Grafana's own sources, not from our constants:
* grafana/grafana-aws-sdk @ bffb8adb3b848a9fe6ea3a79cb8f1697b8003856 (2026-08-06), ``pkg/awsds/settings.go``
  ``ToAuthType``: the auth types it accepts (anything else: ``invalid auth type``);
* grafana/grafana-amazonprometheus-datasource @ 7abea3cb5a81df52dff4f516683348d5a80b0c71 (2026-08-20),
  ``src/plugin.json`` (``"id": "grafana-amazonprometheus-datasource"``) and ``docs/sources/configure.md``,
  "Provision the data source": the plugin's ``jsonData`` fields;
* the workspace's Grafana version: ``DescribeWorkspace`` -> ``workspace.grafanaVersion`` (a required member of
  ``WorkspaceDescription`` in botocore's ``grafana`` service model, ``botocore/data/grafana/2020-08-18/
  service-2.json``; moto implements no Amazon Managed Grafana API, so botocore's ``Stubber`` answers with that
  model); AMG 12 dropped SigV4 from the core Prometheus plugin (AMG user guide, "Manually adding the Prometheus
  data source").
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from hyperpod_constructs.grafana_dashboards import BUNDLED_DISTRIBUTIONS, HANDLER_DIR
from hyperpod_constructs.grafana_dashboards_handler import index
from hyperpod_constructs.lambda_provider import staged_handler
from hyperpod_core.config import Config, parse_config
from hyperpod_core.telemetry.dashboards import dashboards
from hyperpod_core.telemetry.render import render, to_json_text

WORKSPACE = "g-0123456789"
#: grafana-aws-sdk @ bffb8ad, pkg/awsds/settings.go ToAuthType: the accepted auth types.
AWS_SDK_AUTH_TYPES = ("credentials", "sharedCreds", "keys", "default", "ec2_iam_role", "arn", "grafana_assume_role")
#: grafana-amazonprometheus-datasource @ 7abea3c, src/plugin.json "id".
AMP_PLUGIN_ID = "grafana-amazonprometheus-datasource"
#: The same repository's docs/sources/configure.md, "Provision the data source": every jsonData key its examples
#: provision (YAML and Terraform), with the spelling they use (``sigv4Service``, lower-case v).
AMP_PLUGIN_JSON_DATA = {"httpMethod", "sigV4Auth", "sigV4AuthType", "sigV4Region", "sigv4Service", "defaultEditor",
                        "manageAlerts", "queryStatsEnabled", "assumeRoleArn", "externalId"}
TOKEN = "glsa_secret_token"
#: The deployment ``name`` of the observability stack built alone.
DEPLOYMENT = "team-a"
ACCOUNT_ID = "7"


class FakeGrafana:
    """The Grafana HTTP API endpoints the handler uses, in memory; every request must carry the token."""

    def __init__(self) -> None:
        self.datasources: dict[str, dict] = {}
        self.folders: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}
        self.unauthorized = 0
        self.ids = 0

    def _next_id(self) -> int:
        self.ids += 1
        return self.ids

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        routes = [
            ("GET", r"/api/datasources/uid/([^/]+)", lambda u: self._get(self.datasources, u)),
            # Grafana updates the row of the data source's id (pkg/api/datasources.go UpdateDataSourceByUID), and
            # gives a created one the next id.
            ("PUT", r"/api/datasources/uid/([^/]+)",
             lambda u: self._put(self.datasources, u, {**body, "id": self.datasources.get(u, {}).get("id")})),
            ("DELETE", r"/api/datasources/uid/([^/]+)", lambda u: self._delete(self.datasources, u)),
            ("POST", r"/api/datasources", lambda: self._unique_name(self.datasources, "name", body) or self._post(
                self.datasources, body["uid"], {**body, "id": self._next_id()})),
            ("GET", r"/api/folders/([^/]+)", lambda u: self._get(self.folders, u)),
            ("PUT", r"/api/folders/([^/]+)", lambda u: self._unique_name(self.folders, "title", {**body, "uid": u})
             or self._put(self.folders, u, {**self.folders.get(u, {}), **body})),
            ("DELETE", r"/api/folders/([^/]+)", lambda u: self._delete_folder(u)),
            ("POST", r"/api/folders", lambda: self._unique_name(self.folders, "title", body) or self._post(
                self.folders, body["uid"], {**body, "id": self._next_id()})),
            ("POST", r"/api/dashboards/db", lambda: self._save_dashboard(body)),
            ("DELETE", r"/api/dashboards/uid/([^/]+)", lambda u: self._delete(self.dashboards, u)),
            ("GET", r"/api/search", lambda: (200, [])),
        ]
        route = path.split("?", 1)[0]
        for verb, pattern, action in routes:
            match = re.fullmatch(pattern, route)
            if verb == method and match:
                if route == "/api/search":
                    ids = re.findall(r"folderIds=(\d+)", path)
                    return 200, [{"uid": u} for u, d in self.dashboards.items() if str(d["folderId"]) in ids]
                return action(*match.groups())
        return 404, {"message": f"no route {method} {path}"}

    def _unique_name(self, store: dict, key: str, body: dict) -> tuple[int, Any] | None:
        """Grafana refuses a second data source of a name (``ErrDataSourceNameExists``) and a second folder of a
        title (grafana/grafana ``pkg/services/folder/folderimpl/folder.go``: a same-name save is
        ``ErrFolderSameNameExists``, HTTP 409)."""
        if any(v.get(key) == body[key] and u != body["uid"] for u, v in store.items()):
            return 409, {"message": f"a {key} {body[key]!r} already exists"}
        return None

    def _get(self, store: dict, uid: str) -> tuple[int, Any]:
        return (200, store[uid]) if uid in store else (404, {"message": "not found"})

    def _put(self, store: dict, uid: str, body: dict) -> tuple[int, Any]:
        if uid not in store:
            return 404, {"message": "not found"}
        store[uid] = body
        return 200, body

    def _post(self, store: dict, uid: str, body: dict) -> tuple[int, Any]:
        if uid in store:
            return 409, {"message": "exists"}
        store[uid] = body
        return 200, body

    def _delete(self, store: dict, uid: str) -> tuple[int, Any]:
        return (200, store.pop(uid)) if uid in store else (404, {"message": "not found"})

    def _delete_folder(self, uid: str) -> tuple[int, Any]:
        if uid not in self.folders:
            return 404, {"message": "not found"}
        folder = self.folders.pop(uid)
        for key in [k for k, d in self.dashboards.items() if d["folderId"] == folder["id"]]:
            del self.dashboards[key]
        return 200, folder

    def _save_dashboard(self, body: dict) -> tuple[int, Any]:
        folder = self.folders.get(body.get("folderUid", ""))
        if folder is None:
            return 400, {"message": "folder not found"}
        uid = body["dashboard"]["uid"]
        if uid in self.dashboards and not body.get("overwrite"):
            return 412, {"message": "exists"}
        self.dashboards[uid] = {"model": body["dashboard"], "folderId": folder["id"]}
        return 200, {"uid": uid, "status": "success"}


@pytest.fixture()
def grafana_server() -> Iterator[tuple[FakeGrafana, str]]:
    fake = FakeGrafana()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                fake.unauthorized += 1
                status, payload = 401, {"message": "unauthorized"}
            else:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                status, payload = fake.handle(self.command, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _api_factory(endpoint: str, token: str) -> Any:
    from grafana_client import GrafanaApi

    return GrafanaApi.from_url(f"http://{endpoint}", credential=token, timeout=10.0)


def _stubbed(endpoint: str, *, account_exists: bool, grafana_version: str = "10.4",
             other_accounts_first: bool = False) -> tuple[Any, Stubber]:
    client = boto3.client("grafana", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    stub.add_response("describe_workspace", {"workspace": {
        "id": WORKSPACE, "endpoint": endpoint, "status": "ACTIVE", "created": now, "modified": now,
        "dataSources": ["PROMETHEUS"], "grafanaVersion": grafana_version,
        "authentication": {"providers": ["AWS_SSO"]}}},
        {"workspaceId": WORKSPACE})
    account = {"id": ACCOUNT_ID, "name": index.SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "isDisabled": "false"}
    if other_accounts_first:  # a page of someone else's accounts, then ours behind nextToken
        other = {"id": "9", "name": "someone-elses", "grafanaRole": "VIEWER", "isDisabled": "false"}
        stub.add_response("list_workspace_service_accounts", {
            "workspaceId": WORKSPACE, "serviceAccounts": [other], "nextToken": "page-2"}, {"workspaceId": WORKSPACE})
        stub.add_response("list_workspace_service_accounts", {
            "workspaceId": WORKSPACE, "serviceAccounts": [account] if account_exists else []},
            {"workspaceId": WORKSPACE, "nextToken": "page-2"})
    else:
        stub.add_response("list_workspace_service_accounts", {
            "workspaceId": WORKSPACE, "serviceAccounts": [account] if account_exists else []},
            {"workspaceId": WORKSPACE})
    if not account_exists:
        stub.add_response("create_workspace_service_account", {
            "id": ACCOUNT_ID, "name": index.SERVICE_ACCOUNT, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
            {"workspaceId": WORKSPACE, "name": index.SERVICE_ACCOUNT, "grafanaRole": "ADMIN"})
    stub.add_response("create_workspace_service_account_token", {
        "serviceAccountToken": {"id": "42", "name": "cfn", "key": TOKEN},
        "serviceAccountId": ACCOUNT_ID, "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE, "serviceAccountId": ACCOUNT_ID, "name": ANY,
         "secondsToLive": index.TOKEN_SECONDS})
    stub.add_response("delete_workspace_service_account_token", {
        "serviceAccountId": ACCOUNT_ID, "tokenId": "42", "workspaceId": WORKSPACE},
        {"workspaceId": WORKSPACE, "serviceAccountId": ACCOUNT_ID, "tokenId": "42"})
    stub.activate()
    return client, stub


def _props(config: Config) -> dict[str, Any]:
    return {"WorkspaceId": WORKSPACE, "Region": "us-west-2",
            "PrometheusUrl": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-abc/",
            "DatasourceUid": "hyperpod-dpd-amp", "DatasourceName": "hyperpod-dpd-amp",
            "FolderUid": "hyperpod-dpd", "FolderTitle": "HyperPod DPD",
            "Dashboards": [to_json_text(render(d)) for d in dashboards(config.spec())]}


def _run(request_type: str, props: dict, endpoint: str, *, old: dict | None = None,
         account_exists: bool = True, grafana_version: str = "10.4") -> dict:
    client, stub = _stubbed(endpoint, account_exists=account_exists, grafana_version=grafana_version)
    event = {"RequestType": request_type, "ResourceProperties": props}
    if old is not None:
        event["OldResourceProperties"] = old
    result = index.on_event(event, None, grafana=client, api_factory=_api_factory)
    stub.assert_no_pending_responses()  # the token was deleted
    return result


def test_create_deploys_the_data_source_folder_and_every_dashboard(grafana_server, default_config) -> None:
    fake, endpoint = grafana_server
    props = _props(default_config)
    result = _run("Create", props, endpoint, account_exists=False)
    assert result["PhysicalResourceId"] == f"{WORKSPACE}/hyperpod-dpd"
    ds = fake.datasources["hyperpod-dpd-amp"]
    assert ds["type"] == "prometheus" and ds["url"] == props["PrometheusUrl"].rstrip("/")
    assert fake.folders["hyperpod-dpd"]["title"] == "HyperPod DPD"
    assert set(fake.dashboards) == {d.uid for d in dashboards(default_config.spec())}
    for stored in fake.dashboards.values():
        variables = {v["name"]: v for v in stored["model"]["templating"]["list"]}
        assert variables["datasource"]["current"]["value"] == "hyperpod-dpd-amp"
    assert fake.unauthorized == 0


def _datasource_refs(node: Any) -> list[dict]:
    """Every ``"datasource": {...}`` reference in a dashboard model (panels, targets, variables)."""
    if isinstance(node, dict):
        own = [node["datasource"]] if isinstance(node.get("datasource"), dict) else []
        return own + [r for v in node.values() for r in _datasource_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _datasource_refs(v)]
    return []


@pytest.mark.parametrize(("grafana_version", "expected_type"), [("10.4", "prometheus"), ("9.4", "prometheus"),
                                                                ("12.4", AMP_PLUGIN_ID)])
def test_the_data_source_can_sign_its_queries_on_the_workspaces_grafana(
        grafana_server, default_config, grafana_version: str, expected_type: str) -> None:
    """Before Grafana 12 the core Prometheus type with SigV4; from 12 on the Amazon Managed Service for Prometheus
    plugin's type and provisioning fields. Either way an auth type grafana-aws-sdk accepts (``ec2`` is not one),
    the workspace's IAM role, and dashboards whose data-source variable lists that type and whose refs name the
    data source by uid only (or by that type)."""
    fake, endpoint = grafana_server
    _run("Create", _props(default_config), endpoint, grafana_version=grafana_version)
    ds = fake.datasources["hyperpod-dpd-amp"]
    assert ds["type"] == expected_type and ds["access"] == "proxy"
    assert ds["jsonData"]["sigV4AuthType"] in AWS_SDK_AUTH_TYPES
    assert ds["jsonData"]["sigV4AuthType"] == "ec2_iam_role", "AMG's workspace IAM role"
    assert ds["jsonData"]["sigV4Auth"] is True and ds["jsonData"]["sigV4Region"] == "us-west-2"
    assert set(ds["jsonData"]) <= AMP_PLUGIN_JSON_DATA, "fields the plugin documents (shared with core Prometheus)"
    if expected_type == AMP_PLUGIN_ID:
        assert ds["jsonData"]["sigv4Service"] == "aps"
    for stored in fake.dashboards.values():
        variables = {v["name"]: v for v in stored["model"]["templating"]["list"]}
        assert variables["datasource"]["query"] == expected_type
        refs = _datasource_refs(stored["model"])
        assert refs and all(r.get("type", expected_type) == expected_type for r in refs if r.get("uid") ==
                            "${datasource}")


def test_an_upgrade_to_grafana_12_changes_the_data_sources_type_in_place(grafana_server, default_config) -> None:
    """A workspace upgraded from 10 to 12 keeps our old core-Prometheus data source, which can no longer sign: the
    next deploy gives it the plugin's type by updating it (same uid and id, so the dashboards keep pointing at it and
    its permissions stay). Grafana's PUT /api/datasources/uid/:uid takes the type with the rest and rewrites the
    existing row (grafana/grafana @ db64da7, pkg/api/datasources.go UpdateDataSourceByUID; @ ea500b8,
    pkg/services/datasources/service/store.go UpdateDataSource: ``Type: cmd.Type``). Here Grafana refuses to create
    data sources after the first deploy: deleting and re-creating would leave none."""
    fake, endpoint = grafana_server
    props = _props(default_config)
    _run("Create", props, endpoint, grafana_version="10.4")
    before = fake.datasources["hyperpod-dpd-amp"]
    assert before["type"] == "prometheus"
    serve = fake.handle

    def refuse_creates(method: str, path: str, body: Any) -> tuple[int, Any]:
        if (method, path.split("?", 1)[0]) == ("POST", "/api/datasources"):
            return 500, {"message": "data source quota reached"}
        return serve(method, path, body)

    fake.handle = refuse_creates  # type: ignore[method-assign]
    _run("Update", props, endpoint, old=props, grafana_version="12.4")
    after = fake.datasources["hyperpod-dpd-amp"]
    assert after["type"] == AMP_PLUGIN_ID and after["id"] == before["id"]


def test_grafana_version_is_a_required_member_of_describe_workspace() -> None:
    """botocore's grafana model (2020-08-18): DescribeWorkspace's ``workspace`` always carries ``grafanaVersion``."""
    model = boto3.client("grafana", region_name="us-west-2").meta.service_model
    shape = model.operation_model("DescribeWorkspace").output_shape.members["workspace"]
    assert "grafanaVersion" in shape.required_members


def test_update_is_idempotent_and_drops_dashboards_no_longer_shipped(grafana_server, default_config) -> None:
    fake, endpoint = grafana_server
    old = _props(default_config)
    _run("Create", old, endpoint)
    new = copy.deepcopy(old)
    new["Dashboards"] = new["Dashboards"][:1]
    _run("Update", new, endpoint, old=old)
    assert set(fake.dashboards) == {json.loads(new["Dashboards"][0])["uid"]}
    assert set(fake.datasources) == {"hyperpod-dpd-amp"}


def test_delete_removes_ours_and_keeps_a_folder_a_user_saved_into(grafana_server, default_config) -> None:
    fake, endpoint = grafana_server
    props = _props(default_config)
    _run("Create", props, endpoint)
    folder_id = fake.folders["hyperpod-dpd"]["id"]
    fake.dashboards["users-own"] = {"model": {"uid": "users-own"}, "folderId": folder_id}
    _run("Delete", props, endpoint)
    assert set(fake.dashboards) == {"users-own"} and "hyperpod-dpd" in fake.folders
    assert fake.datasources == {}
    del fake.dashboards["users-own"]
    _run("Delete", props, endpoint)  # nothing left of ours: the folder goes too; 404s are not errors
    assert fake.folders == {}


def test_the_token_is_deleted_when_grafana_fails(grafana_server, default_config) -> None:
    fake, endpoint = grafana_server
    props = _props(default_config)
    props["Dashboards"] = [json.dumps({"uid": "x", "title": "x"})]
    fake.folders["hyperpod-dpd"] = {"uid": "hyperpod-dpd", "title": "t", "id": 1}
    fake.handle = lambda method, path, body: (500, {"message": "boom"})  # type: ignore[method-assign]
    client, stub = _stubbed(endpoint, account_exists=True)
    with pytest.raises(Exception, match="500"):
        index.on_event({"RequestType": "Create", "ResourceProperties": props}, None, grafana=client,
                       api_factory=_api_factory)
    stub.assert_no_pending_responses()


# --- several deployments in one workspace (issue 34 item 4; k8s-review defect 8: fixed uids made two deployments
# overwrite, then delete, each other's data source, folder and dashboards) ------------------------------------

def _with_workspace(config_dict: dict, name: str | None = None) -> Config:
    """The config of ``config_dict`` (renamed ``name``) with a Grafana workspace."""
    data = copy.deepcopy(config_dict)
    data["observability"]["grafana_workspace"] = {"workspace_id": WORKSPACE}
    if name is not None:
        data["name"] = name
    return parse_config(data)


def test_the_default_deployment_does_not_take_the_uids_every_deployment_wrote_before(default_config_dict) -> None:
    """Every deployment before wrote the data source ``hyperpod-dpd-amp`` and the folder ``hyperpod-dpd``, whatever
    its name; ``hyperpod-dpd`` is also the default ``name``. A deployment of that name must not take them over: a
    not-yet-upgraded deployment in the same workspace would repoint its data source and, on destroy, delete it.
    (Before, the construct's ``deployment_uid("hyperpod-dpd")`` gave exactly those two uids.)"""
    from hyperpod_infra.app_builder import grafana_delivery

    config = _with_workspace(default_config_dict)
    assert config.name == "hyperpod-dpd"
    delivery = grafana_delivery(config)
    assert delivery is not None
    assert (delivery.folder_uid, delivery.datasource_uid) == ("hyperpod-dpd_folder", "hyperpod-dpd_amp")
    assert {delivery.folder_uid, delivery.datasource_uid}.isdisjoint({"hyperpod-dpd", "hyperpod-dpd-amp"})
    assert delivery.folder_title == "HyperPod DPD (hyperpod-dpd)"


def test_uids_are_the_deployments_own_and_fit_grafanas_40_characters(default_config_dict) -> None:
    """Grafana HTTP API (Folder API, Dashboard API): "The uid can have a maximum length of 40 characters"; letters,
    digits, '-' and '_' only (grafana/grafana ``pkg/util/shortid_generator.go``). A deployment ``name`` has at most
    40 characters (``DeploymentName``); its uids (``hyperpod_core.telemetry.dashboards.grafana_uid``) are shortened
    with a hash of the whole where too long, so two long names that share a prefix keep apart."""
    from hyperpod_infra.app_builder import grafana_delivery

    one, two = "a" * 36 + "-one", "a" * 36 + "-two"
    deliveries = [grafana_delivery(_with_workspace(default_config_dict, n)) for n in (one, two)]
    uids = [u for d in deliveries if d is not None for u in (d.folder_uid, d.datasource_uid)]
    assert len(set(uids)) == 4
    assert all(len(u) <= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", u) for u in uids), uids
    assert all(u.startswith("a" * 20) for u in uids)


def _workspace_url(deployment: str) -> str:
    return f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-{deployment}/"


def _resource_properties(config: Config, prometheus_query_url: str) -> dict[str, Any]:
    """What the ``GrafanaDashboards`` construct of ``config`` (a bare stack, uids, title and dashboards as the app
    makes them: ``hyperpod_infra.app_builder.grafana_delivery``) hands its handler."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_constructs.grafana_dashboards import GrafanaDashboards, GrafanaDashboardsProps
    from hyperpod_infra.app_builder import grafana_delivery

    delivery = grafana_delivery(config)
    assert delivery is not None
    stack = cdk.Stack(cdk.App(context={"aws:cdk:disable-asset-staging": True}), config.name,
                      env=cdk.Environment(region="us-west-2"))
    GrafanaDashboards(stack, "Dashboards", props=GrafanaDashboardsProps(
        workspace_id=delivery.workspace_id, prometheus_query_url=prometheus_query_url,
        datasource_uid=delivery.datasource_uid, folder_uid=delivery.folder_uid, folder_title=delivery.folder_title,
        dashboards=delivery.dashboards))
    (resource,) = Template.from_stack(stack).find_resources("Custom::GrafanaDashboards").values()
    return {k: v for k, v in resource["Properties"].items() if k != "ServiceToken"}


@pytest.fixture(scope="module")
def two_deployments(default_config_dict) -> dict[str, dict[str, Any]]:
    """What the ``GrafanaDashboards`` construct of deployments ``dev`` and ``prod`` hands its handler, each with its
    own AMP workspace and the default config's endpoint."""
    return {name: _resource_properties(_with_workspace(default_config_dict, name), _workspace_url(name))
            for name in ("dev", "prod")}


def test_two_deployments_share_a_workspace_and_destroying_one_leaves_the_other(grafana_server, two_deployments) -> None:
    """Both keep their own data source (querying their own AMP workspace), folder (Grafana refuses a second folder
    of one title: the fake does too) and dashboards; destroying ``dev`` leaves every object of ``prod``."""
    fake, endpoint = grafana_server
    dev, prod = two_deployments["dev"], two_deployments["prod"]
    _run("Create", dev, endpoint)
    _run("Create", prod, endpoint)
    assert {uid: ds["url"] for uid, ds in fake.datasources.items()} == {
        "dev_amp": _workspace_url("dev").rstrip("/"), "prod_amp": _workspace_url("prod").rstrip("/")}
    assert {uid: f["title"] for uid, f in fake.folders.items()} == {"dev_folder": "HyperPod DPD (dev)",
                                                                   "prod_folder": "HyperPod DPD (prod)"}
    assert set(fake.dashboards) == index._uids(dev) | index._uids(prod) and not index._uids(dev) & index._uids(prod)
    _run("Delete", dev, endpoint)
    assert set(fake.datasources) == {"prod_amp"} and set(fake.folders) == {"prod_folder"}
    assert set(fake.dashboards) == index._uids(prod)
    for stored in fake.dashboards.values():
        variables = {v["name"]: v for v in stored["model"]["templating"]["list"]}
        assert variables["datasource"]["current"]["value"] == "prod_amp"


def test_the_uids_shared_before_go_only_with_the_deployment_that_wrote_them_last(grafana_server, two_deployments,
                                                                                   default_config) -> None:
    """Before, every deployment wrote ``hyperpod-dpd-amp``, folder ``hyperpod-dpd`` and the same dashboard uids: they
    are the last writer's. A deployment moving to its own uids gets a new physical ID, so CloudFormation deletes the
    old resource with its old properties after the update: that Delete removes the shared objects only when their
    data source queries this deployment's own workspace."""
    fake, endpoint = grafana_server
    legacy = {n: {**_props(default_config), "PrometheusUrl": _workspace_url(n)} for n in ("dev", "prod")}
    _run("Create", legacy["dev"], endpoint)
    _run("Create", legacy["prod"], endpoint)  # prod deployed last: the shared objects query its workspace
    moved = _run("Update", two_deployments["dev"], endpoint, old=legacy["dev"])
    assert moved["PhysicalResourceId"] == f"{WORKSPACE}/dev_folder"
    _run("Delete", legacy["dev"], endpoint)
    assert fake.datasources["hyperpod-dpd-amp"]["url"] == _workspace_url("prod").rstrip("/")
    assert index._uids(legacy["prod"]) <= set(fake.dashboards) and "hyperpod-dpd" in fake.folders
    _run("Update", two_deployments["prod"], endpoint, old=legacy["prod"])
    _run("Delete", legacy["prod"], endpoint)  # prod's own: they go
    assert set(fake.datasources) == {"dev_amp", "prod_amp"} and set(fake.folders) == {"dev_folder", "prod_folder"}
    assert set(fake.dashboards) == index._uids(two_deployments["dev"]) | index._uids(two_deployments["prod"])


def test_a_default_named_deployment_and_one_not_yet_upgraded_keep_apart(grafana_server, default_config,
                                                                         default_config_dict) -> None:
    """A deployment not yet upgraded (``prod``) still writes ``hyperpod-dpd-amp`` and folder ``hyperpod-dpd``; a new
    deployment of the default name (``hyperpod-dpd``) shares the workspace. Neither's deploys repoint the other's
    data source, and destroying either leaves the other's data source, folder and dashboards."""
    fake, endpoint = grafana_server
    spec = default_config.spec()
    before = [json.dumps({**json.loads(to_json_text(render(d))), "uid": f"dpd-{d.kind}-{spec.name}"})
              for d in dashboards(spec)]  # the dashboards' uids of before: dpd-<kind>-<endpoint>
    legacy = {**_props(default_config), "PrometheusUrl": _workspace_url("prod"), "Dashboards": before}
    ours = _resource_properties(_with_workspace(default_config_dict), _workspace_url("hyperpod-dpd"))
    _run("Create", legacy, endpoint)
    _run("Create", ours, endpoint)
    _run("Update", legacy, endpoint, old=legacy)  # the other deployment deploys again after ours
    assert fake.datasources[ours["DatasourceUid"]]["url"] == _workspace_url("hyperpod-dpd").rstrip("/")
    assert fake.datasources["hyperpod-dpd-amp"]["url"] == _workspace_url("prod").rstrip("/")
    _run("Delete", ours, endpoint)
    assert set(fake.datasources) == {"hyperpod-dpd-amp"} and set(fake.folders) == {"hyperpod-dpd"}
    assert set(fake.dashboards) == index._uids(legacy)
    _run("Create", ours, endpoint)
    _run("Delete", legacy, endpoint)
    assert set(fake.datasources) == {ours["DatasourceUid"]} and set(fake.folders) == {ours["FolderUid"]}
    assert set(fake.dashboards) == index._uids(ours)


@pytest.mark.parametrize(("change", "message"), [
    ({"datasource_uid": "team a"}, "datasource_uid must be 1-40 letters, digits"),
    ({"folder_uid": "f" * 41}, "folder_uid must be 1-40 letters, digits"),
    ({"dashboards": {"x": json.dumps({"uid": "y"})}}, r"dashboards\['x'\] must carry the uid it is keyed by"),
    ({"dashboards": {"d" * 41: json.dumps({"uid": "d" * 41})}}, "uid must be 1-40 letters"),
    ({"dashboards": {"team-a_folder": json.dumps({"uid": "team-a_folder"})}},
     "uid must differ from the folder's uid 'team-a_folder'"),
])
def test_fails_when_a_uid_breaks_grafanas_rules(change: dict, message: str) -> None:
    import aws_cdk as cdk

    from hyperpod_constructs.grafana_dashboards import GrafanaDashboards, GrafanaDashboardsProps

    props = {"workspace_id": WORKSPACE, "prometheus_query_url": _workspace_url("a"), "datasource_uid": "team-a_amp",
             "folder_uid": "team-a_folder", "folder_title": "HyperPod DPD (team-a)",
             "dashboards": {"team-a-overview": json.dumps({"uid": "team-a-overview"})}, **change}
    with pytest.raises(ValueError, match=message):
        GrafanaDashboards(cdk.Stack(cdk.App()), "D", props=GrafanaDashboardsProps(**props))


def test_bundle_is_pure_python_and_imports_in_a_clean_interpreter(tmp_path: Path) -> None:
    """What the function runs: the handler plus grafana-client and its pure-Python dependencies; urllib3 comes
    from the runtime (botocore's), nothing else from this machine."""
    code = tmp_path / "asset"  # what the asset holds (no bytecode), copied: running it writes bytecode
    shutil.copytree(staged_handler(HANDLER_DIR, distributions=BUNDLED_DISTRIBUTIONS), code,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert not [p for p in code.rglob("*") if p.suffix in (".so", ".pyd")]
    runtime = tmp_path / "runtime"
    import urllib3

    shutil.copytree(Path(urllib3.__file__).parent, runtime / "urllib3")
    probe = ("import index, grafana_client; api = grafana_client.GrafanaApi.from_url('https://g.example', "
             "credential='t'); print(type(api).__name__, grafana_client.__file__)")
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=60,
                         cwd=code, env={"PYTHONPATH": f"{code}:{runtime}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("GrafanaApi") and str(code) in out.stdout


@pytest.fixture(scope="module")
def with_grafana(default_config) -> tuple[Any, dict[str, str]]:
    """The observability stack alone with a Grafana workspace, given the default config's dashboards."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    from hyperpod_infra.stacks.observability_stack import GrafanaDelivery, ObservabilityStack, ObservabilityStackProps

    shipped = {spec.uid: to_json_text(render(spec)) for spec in dashboards(default_config.spec())}
    grafana = GrafanaDelivery(workspace_id=WORKSPACE, datasource_uid=f"{DEPLOYMENT}_amp",
                              folder_uid=f"{DEPLOYMENT}_folder", folder_title=f"HyperPod DPD ({DEPLOYMENT})",
                              dashboards=shipped)
    stack = ObservabilityStack(stand_ins.app(), "Observability", env=cdk.Environment(region=stand_ins.REGION),
                               props=ObservabilityStackProps(workspace_alias=stand_ins.WORKSPACE_ALIAS,
                                                             grafana=grafana))
    return Template.from_stack(stack), shipped


def test_synth_deploys_the_dashboards_into_the_given_workspace(with_grafana) -> None:
    from aws_cdk.assertions import Match

    template, shipped = with_grafana
    (resource,) = template.find_resources("Custom::GrafanaDashboards").values()
    props = resource["Properties"]
    assert props["WorkspaceId"] == WORKSPACE and props["FolderTitle"] == f"HyperPod DPD ({DEPLOYMENT})"
    assert (props["DatasourceUid"], props["DatasourceName"], props["FolderUid"]) == (
        f"{DEPLOYMENT}_amp", f"{DEPLOYMENT}_amp", f"{DEPLOYMENT}_folder")
    assert props["Dashboards"] == [shipped[uid] for uid in sorted(shipped)]
    (workspace,) = template.find_resources("AWS::APS::Workspace")
    assert props["PrometheusUrl"] == {"Fn::GetAtt": [workspace, "PrometheusEndpoint"]}
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": Match.array_with(["grafana:CreateWorkspaceServiceAccountToken"]),
                           "Resource": {"Fn::Join": ["", Match.array_with([Match.string_like_regexp(
                               f"/workspaces/{WORKSPACE}$")])]}})])}})


def test_no_grafana_resources_unless_a_workspace_is_given(observability_alone) -> None:
    assert observability_alone.template.find_resources("Custom::GrafanaDashboards") == {}


#: The config of the matrix that names a Grafana workspace (config/examples/).
WITH_GRAFANA = "kvaware-redis-evaluation.yaml"


def test_the_config_matrix_delivers_the_configured_dashboards_to_the_configured_workspace(synthesize_matrix) -> None:
    """Whole app: ``observability.grafana_workspace`` reaches the resource (workspace, folder, every dashboard of
    the config). That config's templates pass cdk-nag and cfn-lint with every other matrix config
    (tests/infra/test_validation.py)."""
    s = synthesize_matrix(WITH_GRAFANA).require()
    grafana = s.config.observability.grafana_workspace
    assert grafana is not None
    (props,) = [r["Properties"] for r in s.templates[f"{s.config.name}-observability"]["Resources"].values()
                if r["Type"] == "Custom::GrafanaDashboards"]
    assert (props["WorkspaceId"], props["FolderTitle"]) == (grafana.workspace_id, f"{grafana.folder} ({s.config.name})")
    assert (props["DatasourceUid"], props["FolderUid"]) == (f"{s.config.name}_amp", f"{s.config.name}_folder")
    shipped = sorted(d.uid for e in s.config.specs() for d in dashboards(e))
    assert [json.loads(t)["uid"] for t in props["Dashboards"]] == shipped


@pytest.mark.parametrize("workspace_id", ["ws-0123456789", "g-012345678", "g-0123456789X"])
def test_fails_when_the_workspace_id_is_malformed(default_config_dict: dict, workspace_id: str) -> None:
    from hyperpod_core.errors import ConfigError

    data = copy.deepcopy(default_config_dict)
    data["observability"]["grafana_workspace"] = {"workspace_id": workspace_id}
    with pytest.raises(ConfigError, match=r"observability\.grafana_workspace\.workspace_id"):
        parse_config(data)


def test_our_service_account_is_found_on_a_later_page() -> None:
    """The workspace is the user's: its service accounts may fill a first page (ListWorkspaceServiceAccounts returns
    ``nextToken`` when more remain, Amazon Managed Grafana API reference). Ours on page 2 is reused, never created
    again (a duplicate name fails the custom resource). Fails before: only the first page was read, so the handler
    called CreateWorkspaceServiceAccount, which the Stubber refuses here. Stubber on the real Grafana service model
    (moto implements no workspace service accounts)."""
    client, stub = _stubbed("grafana.example", account_exists=True, other_accounts_first=True)
    with index.workspace_api(client, WORKSPACE, lambda endpoint, token: (endpoint, token)) as workspace:
        assert workspace.api == ("grafana.example", TOKEN)
    stub.assert_no_pending_responses()
