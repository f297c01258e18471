"""The observability stack (the managed Prometheus workspace) and the observability add-on stack (the HyperPod
observability add-on, which writes to a workspace) alone (root conftest ``observability_alone``,
``platform_alone``). How the app wires them to each other and to the platform: test_platform_app.py."""

from __future__ import annotations

import json

from tests.infra import stand_ins

from hyperpod_core import outputs, pins


def _addon(template) -> tuple[str, dict]:
    (lid, addon), = template.find_resources("AWS::EKS::Addon").items()
    return lid, addon


def test_workspace_is_created_and_deleted_with_the_stack(observability) -> None:
    ws = observability.find_resources("AWS::APS::Workspace")
    assert list(ws) == ["PrometheusWorkspaceF3098DB6"]
    assert ws["PrometheusWorkspaceF3098DB6"]["Properties"]["Alias"] == stand_ins.WORKSPACE_ALIAS
    assert ws["PrometheusWorkspaceF3098DB6"]["DeletionPolicy"] == "Delete"


def test_addon_pinned_and_associated_with_the_collector_role(observability_addon) -> None:
    _, addon = _addon(observability_addon)
    p = addon["Properties"]
    assert (p["AddonName"], p["AddonVersion"]) == (pins.OBSERVABILITY.name, pins.OBSERVABILITY.version)
    assert p["PodIdentityAssociations"] == [{
        "RoleArn": {"Fn::GetAtt": [next(k for k in observability_addon.find_resources("AWS::IAM::Role")
                                        if k.startswith("HyperPodObservabilityCollectorRole")), "Arn"]},
        "ServiceAccount": "hyperpod-observability-operator-otel-collector"}]


def test_addon_waits_for_its_role_policy_and_the_pod_identity_agent(observability_addon, platform_alone) -> None:
    _, addon = _addon(observability_addon)
    policy = next(k for k in observability_addon.find_resources("AWS::IAM::Policy")
                  if k.startswith("HyperPodObservabilityCollectorPolicy"))
    assert policy in addon["DependsOn"]
    # The agent lives in another stack (in the app: the cluster stack): the dependency becomes a stack dependency.
    assert platform_alone["Given"].stack in platform_alone["ObservabilityAddon"].stack.dependencies


def test_addon_configuration_passes_every_metrics_category(observability_addon, platform_alone) -> None:
    _, addon = _addon(observability_addon)
    parts = addon["Properties"]["ConfigurationValues"]["Fn::Join"][1]
    given = platform_alone["Given"].template

    def name(token: dict) -> str:
        if "Ref" in token:
            return token["Ref"]
        if "Fn::GetAtt" in token:
            return ".".join(token["Fn::GetAtt"])
        if "Fn::ImportValue" in token:  # the workspace is another stack's: an export, read by value
            return "given-workspace." + stand_ins.given_workspace_attribute(given, token)
        return "<" + json.dumps(token) + ">"

    cfg = json.loads("".join(p if isinstance(p, str) else name(p) for p in parts))
    # Every category of AWS's console template (observability-template.yaml), DCGM and kube-state-metrics on.
    assert set(cfg["metricsProvider"]) == {"trainingMetrics", "inferenceMetrics", "taskGovernanceMetrics",
                                           "scalingMetrics", "clusterMetrics", "nodeMetrics",
                                           "acceleratedComputeMetrics", "networkMetrics"}
    for category in ("inferenceMetrics", "clusterMetrics", "acceleratedComputeMetrics"):
        assert cfg["metricsProvider"][category] == {"level": "BASIC",
                                                    "scrapeInterval": stand_ins.SCRAPE_INTERVAL_SECONDS}
    assert cfg["logging"] == {"enabled": True}
    assert cfg["ampWorkspace"]["arn"] == "given-workspace.Arn"
    assert cfg["ampWorkspace"]["prometheusEndpoint"] == (
        "https://aps-workspaces.AWS::Region.AWS::URLSuffix/workspaces/given-workspace.WorkspaceId")


def test_outputs_for_the_workspace(observability) -> None:
    found = observability.find_outputs("*")
    assert found[outputs.AMP_WORKSPACE_ENDPOINT]["Value"] == {
        "Fn::GetAtt": ["PrometheusWorkspaceF3098DB6", "PrometheusEndpoint"]}
    assert found[outputs.AMP_WORKSPACE_ARN]["Value"] == {"Fn::GetAtt": ["PrometheusWorkspaceF3098DB6", "Arn"]}


# --- the collector's CloudWatch Logs scope (lifecycle-review.md #10) --------------------------------------------

#: AWS's troubleshooting page for the add-on (hyperpod-observability-addon-troubleshooting, "Verify Pod Identity
#: association") and AWS's console template (aws/sagemaker-hyperpod-cluster-setup,
#: eks/cloudformation/observability-template.yaml @ 0ab564d78aa5a16eceebdbb981db5f432f8cf25e,
#: HyperPodObservabilityAddonRole, Sid CloudwatchLogsAccess) give the collector role exactly these actions on
#: ``log-group:/aws/sagemaker/Clusters/*`` and ``log-group:/aws/sagemaker/Clusters/*:log-stream:*``.
AWS_COLLECTOR_LOG_ACTIONS = {
    "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
    "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery",
    "logs:StopQuery", "logs:GetQueryResults"}


def test_the_collector_gets_aws_s_log_actions_on_aws_s_scope_and_no_delete(observability_addon) -> None:
    (policy,) = [r for k, r in observability_addon.find_resources("AWS::IAM::Policy").items()
                 if k.startswith("HyperPodObservabilityCollectorPolicy")]
    (logs,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Sid"] == "ClusterLogs"]
    assert set(logs["Action"]) == AWS_COLLECTOR_LOG_ACTIONS
    assert not any("Delete" in a or "Retention" in a for a in logs["Action"])
    assert logs["Resource"] == [
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":logs:", {"Ref": "AWS::Region"}, ":",
                           {"Ref": "AWS::AccountId"}, f":log-group:/aws/sagemaker/Clusters/*{suffix}"]]}
        for suffix in ("", ":log-stream:*")]


def test_the_wider_log_scope_is_acknowledged_with_the_aws_source_that_sets_it(platform_alone) -> None:
    """No AWS source names the log groups the collector writes, so the scope stays AWS's
    ``/aws/sagemaker/Clusters/*`` rather than this cluster's groups; each of its two cdk-nag findings is
    acknowledged with the sources that prescribe it and why narrowing is not safe. Fails on main: the reason
    named no source ("the scope the observability add-on guide prescribes")."""
    from hyperpod_constructs.nag import recorded_acknowledgements

    policy = platform_alone["ObservabilityAddon"].stack.addon.collector_policy
    reasons = {a.rule_id.split("log-group:", 1)[1]: a.reason for a in recorded_acknowledgements()
               if a.scope is policy and "log-group:" in a.rule_id}
    assert set(reasons) == {"/aws/sagemaker/Clusters/*]", "/aws/sagemaker/Clusters/*:log-stream:*]"}
    for reason in reasons.values():
        assert "hyperpod-observability-addon-troubleshooting" in reason and "Verify Pod Identity" in reason
        assert "observability-template.yaml @ 0ab564d78aa5a16eceebdbb981db5f432f8cf25e" in reason
        assert "no AWS source names the groups the collector writes" in reason and "no delete" in reason
