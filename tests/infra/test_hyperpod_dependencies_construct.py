"""HyperPodDependencies alone (a bare stack, a stand-in cluster with a real kubectl provider): both device plugins run
on the HyperPod instance types only, through the deep-health-check taint, and a chart set-up could not fetch makes
the stack refuse every deploy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.chart_assets import NOT_FETCHED_PARAMETER, NOT_FETCHED_RULE
from hyperpod_constructs.hyperpod_dependencies import (
    HEALTH_TAINT_TOLERATION,
    INSTANCE_TYPE_LABEL,
    ChartSource,
    HyperPodDependencies,
    HyperPodDependenciesProps,
)
from hyperpod_core import pins

GPU_TYPES = ("ml.p5en.48xlarge", "ml.p5.48xlarge", "ml.p5en.48xlarge")
KUBECTL_LAYER = f"arn:aws:lambda:{stand_ins.REGION}:{stand_ins.ACCOUNT}:layer:kubectl:1"


def _cluster(stack: Any) -> eks.ICluster:
    """The cluster by name, with a kubectl provider of this stack: the charts' asset read is acknowledged on the
    provider construct, which an imported provider (``from_kubectl_provider_attributes``) is not in Python."""
    bare = eks.Cluster.from_cluster_attributes(stack, "Bare", cluster_name=stand_ins.CLUSTER_NAME)
    provider = eks.KubectlProvider(stack, "KubectlProvider", cluster=bare, kubectl_layer=(
        lambda_.LayerVersion.from_layer_version_arn(stack, "KubectlLayer", KUBECTL_LAYER)))
    return eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name=stand_ins.CLUSTER_NAME,
                                               kubectl_provider=provider)


def _source(pin: pins.HelmChartPin, directory: Path | None) -> ChartSource:
    return ChartSource(chart=pin.chart, version=pin.version, directory=directory, source="owner/name@commit")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``fetched``: both charts given as directories; ``offline``: neither fetched."""
    chart = tmp_path_factory.mktemp("chart")
    (chart / "Chart.yaml").write_text("name: stand-in\nversion: 0.0.0\n", encoding="utf-8")
    app = stand_ins.app()
    stacks = {name: stand_ins.stack(app, name) for name in ("fetched", "offline")}
    for name, stack in stacks.items():
        directory = chart if name == "fetched" else None
        HyperPodDependencies(stack, "Dependencies", props=HyperPodDependenciesProps(
            cluster=_cluster(stack), gpu_instance_types=GPU_TYPES,
            nvidia_device_plugin=_source(pins.NVIDIA_DEVICE_PLUGIN, directory),
            efa_device_plugin=_source(pins.EFA_DEVICE_PLUGIN, directory)))
    return {name: Template.from_stack(stack).to_json() for name, stack in stacks.items()}


def test_device_plugins_run_on_the_hyperpod_types_through_the_health_check_taint(templates) -> None:
    charts = {r["Properties"]["Release"]: r["Properties"] for r in templates["fetched"]["Resources"].values()
              if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    assert set(charts) == {pins.NVIDIA_DEVICE_PLUGIN.chart, pins.EFA_DEVICE_PLUGIN.chart}
    types = sorted(set(GPU_TYPES))  # HyperPod labels its nodes with the ml. names
    # Kubernetes docs, "Well-Known Labels, Annotations and Taints": node.kubernetes.io/instance-type
    assert INSTANCE_TYPE_LABEL == "node.kubernetes.io/instance-type"
    nvidia = json.loads(charts[pins.NVIDIA_DEVICE_PLUGIN.chart]["Values"])
    assert nvidia["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": types}]}]}
    efa = json.loads(charts[pins.EFA_DEVICE_PLUGIN.chart]["Values"])
    assert efa["supportedInstanceLabels"] == {"keys": [INSTANCE_TYPE_LABEL], "values": types}
    # HyperPod EKS prerequisites: nodes under deep health checks carry
    # sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule; the plugins must still run there.
    assert HEALTH_TAINT_TOLERATION == {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal",
                                       "value": "Unschedulable", "effect": "NoSchedule"}
    for values in (nvidia, efa):
        assert HEALTH_TAINT_TOLERATION in values["tolerations"]
    assert {c["Namespace"] for c in charts.values()} == {"kube-system"}


def test_a_chart_set_up_could_not_fetch_makes_every_deploy_fail(templates) -> None:
    assert NOT_FETCHED_RULE not in templates["fetched"].get("Rules", {})
    rule = templates["offline"]["Rules"][NOT_FETCHED_RULE]
    # The parameter allows only "no" and the rule asserts "yes": CloudFormation fails the create or update before
    # it touches a resource (CloudFormation User Guide, "Rules").
    assert templates["offline"]["Parameters"][NOT_FETCHED_PARAMETER]["AllowedValues"] == ["no"]
    assert [a["Assert"] for a in rule["Assertions"]] == [
        {"Fn::Equals": [{"Ref": NOT_FETCHED_PARAMETER}, "yes"]}] * 2
    assert [pin.chart in a["AssertDescription"] for pin, a in zip(
        (pins.NVIDIA_DEVICE_PLUGIN, pins.EFA_DEVICE_PLUGIN), rule["Assertions"], strict=True)] == [True, True]
