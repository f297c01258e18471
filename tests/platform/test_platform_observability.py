"""Observability stack (the managed Prometheus workspace) and the observability add-on stack (the HyperPod
observability add-on, which writes to the workspace)."""

from __future__ import annotations

import json
import re

from hyperpod_core import outputs, pins


def _addon(template) -> tuple[str, dict]:
    (lid, addon), = template.find_resources("AWS::EKS::Addon").items()
    return lid, addon


def test_workspace_is_created_and_deleted_with_the_stack(observability) -> None:
    ws = observability.find_resources("AWS::APS::Workspace")
    assert list(ws) == ["PrometheusWorkspaceF3098DB6"]
    assert ws["PrometheusWorkspaceF3098DB6"]["Properties"] == {"Alias": "test-dpd"}
    assert ws["PrometheusWorkspaceF3098DB6"]["DeletionPolicy"] == "Delete"


def test_addon_pinned_and_associated_with_the_collector_role(observability_addon) -> None:
    _, addon = _addon(observability_addon)
    p = addon["Properties"]
    assert (p["AddonName"], p["AddonVersion"]) == (pins.OBSERVABILITY.name, pins.OBSERVABILITY.version)
    assert p["PodIdentityAssociations"] == [{
        "RoleArn": {"Fn::GetAtt": [next(k for k in observability_addon.find_resources("AWS::IAM::Role")
                                        if k.startswith("HyperPodObservabilityCollectorRole")), "Arn"]},
        "ServiceAccount": "hyperpod-observability-operator-otel-collector"}]


def test_addon_waits_for_its_role_policy_and_the_pod_identity_agent(observability_addon, platform_app) -> None:
    _, addon = _addon(observability_addon)
    policy = next(k for k in observability_addon.find_resources("AWS::IAM::Policy")
                  if k.startswith("HyperPodObservabilityCollectorPolicy"))
    assert policy in addon["DependsOn"]
    # The agent lives in the cluster stack: the dependency becomes a stack dependency.
    assert platform_app.cluster_stack in platform_app.observability_addon.dependencies


def test_addon_configuration_passes_every_metrics_category(observability_addon) -> None:
    _, addon = _addon(observability_addon)
    parts = addon["Properties"]["ConfigurationValues"]["Fn::Join"][1]

    def name(token: dict) -> str:
        if "Ref" in token:
            return token["Ref"]
        if "Fn::GetAtt" in token:
            return ".".join(token["Fn::GetAtt"])
        if "Fn::ImportValue" in token:  # the workspace is the observability stack's: an export
            return "import:" + token["Fn::ImportValue"]
        return "<" + json.dumps(token) + ">"

    cfg = json.loads("".join(p if isinstance(p, str) else name(p) for p in parts))
    # Every category of AWS's console template (observability-template.yaml), DCGM and kube-state-metrics on.
    assert set(cfg["metricsProvider"]) == {"trainingMetrics", "inferenceMetrics", "taskGovernanceMetrics",
                                           "scalingMetrics", "clusterMetrics", "nodeMetrics",
                                           "acceleratedComputeMetrics", "networkMetrics"}
    for category in ("inferenceMetrics", "clusterMetrics", "acceleratedComputeMetrics"):
        assert cfg["metricsProvider"][category] == {"level": "BASIC", "scrapeInterval": 30}
    assert cfg["logging"] == {"enabled": True}
    assert cfg["ampWorkspace"]["arn"].startswith("import:Observability:ExportsOutputFnGetAttPrometheusWorkspace")
    assert "Arn" in cfg["ampWorkspace"]["arn"]
    endpoint = cfg["ampWorkspace"]["prometheusEndpoint"]
    assert endpoint.startswith("https://aps-workspaces.AWS::Region.AWS::URLSuffix/workspaces/")
    assert re.search(r"import:Observability:ExportsOutputFnGetAttPrometheusWorkspace\w*WorkspaceId\w*$", endpoint)


def test_outputs_for_the_workspace(observability) -> None:
    found = observability.find_outputs("*")
    assert found[outputs.AMP_WORKSPACE_ENDPOINT]["Value"] == {
        "Fn::GetAtt": ["PrometheusWorkspaceF3098DB6", "PrometheusEndpoint"]}
    assert found[outputs.AMP_WORKSPACE_ARN]["Value"] == {"Fn::GetAtt": ["PrometheusWorkspaceF3098DB6", "Arn"]}


def test_platform_depends_on_observability_not_the_reverse(platform_app) -> None:
    assert platform_app.observability in platform_app.platform.dependencies
    assert platform_app.platform not in platform_app.observability.dependencies


def test_the_workspace_stack_needs_nothing_and_the_platform_not_the_addon(platform_app) -> None:
    """Issue 20 item 6: the platform needs no GPU node, so nothing it needs sits behind the node wait."""
    assert platform_app.observability.dependencies == []
    assert platform_app.observability_addon not in platform_app.platform.dependencies
    assert platform_app.platform not in platform_app.observability_addon.dependencies
