"""GrafanaDashboards alone (a bare stack, explicit workspace, URL and dashboards): one custom resource carrying every
dashboard in uid order, and a function that may mint tokens in that one workspace only."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.grafana_dashboards import RESOURCE_TYPE, GrafanaDashboards, GrafanaDashboardsProps

WORKSPACE = "g-0123456789"
QUERY_URL = f"https://aps-workspaces.{stand_ins.REGION}.amazonaws.com/workspaces/ws-example/"
DASHBOARDS = {"dpd-overview": '{"uid": "dpd-overview"}', "dpd-cost": '{"uid": "dpd-cost"}'}


def _props(**extra: Any) -> GrafanaDashboardsProps:
    return GrafanaDashboardsProps(**{"workspace_id": WORKSPACE, "prometheus_query_url": QUERY_URL,
                                     "datasource_uid": "team-a_amp", "folder_uid": "team-a_folder",
                                     "folder_title": "HyperPod DPD (team-a)", "dashboards": DASHBOARDS, **extra})


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    GrafanaDashboards(stack, "Grafana", props=_props())
    return {"stack": stack, "template": Template.from_stack(stack)}


def test_one_resource_upserts_the_data_source_and_every_dashboard(built: dict[str, Any]) -> None:
    (resource,) = built["template"].find_resources(RESOURCE_TYPE).values()
    props = resource["Properties"]
    assert (props["WorkspaceId"], props["Region"], props["PrometheusUrl"]) == (WORKSPACE, stand_ins.REGION, QUERY_URL)
    assert props["Dashboards"] == [DASHBOARDS["dpd-cost"], DASHBOARDS["dpd-overview"]]  # by uid: a stable template
    # The uids and title as given: the caller makes them (hyperpod_infra.app_builder.grafana_delivery).
    assert (props["DatasourceUid"], props["DatasourceName"], props["FolderUid"], props["FolderTitle"]) == (
        "team-a_amp", "team-a_amp", "team-a_folder", "HyperPod DPD (team-a)")


def test_the_function_acts_on_the_one_workspace(built: dict[str, Any]) -> None:
    # Service authorization reference (Amazon Managed Grafana): the workspace resource is
    # arn:${Partition}:grafana:${Region}:${Account}:/workspaces/${ResourceId}.
    workspace = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":grafana:{stand_ins.REGION}:",
                                   {"Ref": "AWS::AccountId"}, f":/workspaces/{WORKSPACE}"]]}
    statements = [s for p in built["template"].find_resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    grafana = [s for s in statements if "grafana:" in str(s["Action"])]
    assert [s["Resource"] for s in grafana] == [workspace]
    assert "grafana:CreateWorkspaceServiceAccountToken" in grafana[0]["Action"]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("workspace_id", "ws-0123456789", "workspace_id must be 'g-' and 10 hex digits, got 'ws-0123456789'"),
    ("dashboards", {}, "dashboards must hold at least one dashboard, got none"),
])
def test_fails_when_a_prop_is_out_of_range(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        GrafanaDashboards(stand_ins.stack(), "Grafana", props=_props(**{field: value}))
