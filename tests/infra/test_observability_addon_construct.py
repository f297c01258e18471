"""ObservabilityAddon alone (a bare stack, the stand-in cluster, a workspace of its own): the collector's role is
reached through EKS Pod Identity from this cluster only and may write to this workspace only."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.managed_prometheus import ManagedPrometheus, ManagedPrometheusProps
from hyperpod_constructs.observability_addon import (
    ObservabilityAddon,
    ObservabilityAddonProps,
)
from hyperpod_core import pins

METRICS = {"inferenceMetrics": {"level": "BASIC", "scrapeInterval": 30},
           "clusterMetrics": {"level": "ADVANCED", "scrapeInterval": 60}}


def _props(stack: Any, prometheus: ManagedPrometheus, **extra: Any) -> ObservabilityAddonProps:
    return ObservabilityAddonProps(**{
        "cluster": stand_ins.cluster(stack), "version": pins.OBSERVABILITY.version, "metrics_provider": METRICS,
        "prometheus": prometheus, **extra})


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    prometheus = ManagedPrometheus(stack, "Prometheus", props=ManagedPrometheusProps(alias="alone"))
    addon = ObservabilityAddon(stack, "Observability", props=_props(stack, prometheus, logging=False))
    return {"stack": stack, "resources": Template.from_stack(stack).to_json()["Resources"],
            "role": stack.resolve(stack.get_logical_id(addon.collector_role.node.default_child)),
            "workspace": stack.resolve(stack.get_logical_id(prometheus.workspace))}


def _one(built: dict[str, Any], resource_type: str) -> dict[str, Any]:
    (found,) = [r for r in built["resources"].values() if r["Type"] == resource_type]
    return found


def test_the_collector_assumes_its_role_through_pod_identity_from_this_cluster_only(built: dict[str, Any]) -> None:
    # EKS user guide, "Create an IAM role for EKS Pod Identity": trust pods.eks.amazonaws.com with sts:AssumeRole
    # and sts:TagSession; aws:SourceArn/aws:SourceAccount bind it to one cluster (shared/reference/operator.md).
    addon = _one(built, "AWS::EKS::Addon")["Properties"]
    # ../shared/reference/operator.md (S9, S14): add-on amazon-sagemaker-hyperpod-observability, Pod Identity
    # association on the service account hyperpod-observability-operator-otel-collector
    assert (addon["AddonName"], addon["AddonVersion"]) == ("amazon-sagemaker-hyperpod-observability",
                                                           pins.OBSERVABILITY.version)
    assert addon["PodIdentityAssociations"] == [{"RoleArn": {"Fn::GetAtt": [built["role"], "Arn"]},
                                                 "ServiceAccount": "hyperpod-observability-operator-otel-collector"}]
    (trust,) = built["resources"][built["role"]]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert (sorted(trust["Action"]), trust["Principal"]) == (["sts:AssumeRole", "sts:TagSession"],
                                                             {"Service": "pods.eks.amazonaws.com"})
    assert trust["Condition"]["StringEquals"]["aws:SourceArn"] == stand_ins.arn(
        built["stack"], "eks", "cluster", stand_ins.CLUSTER_NAME)


def test_the_collector_writes_to_this_workspace_only(built: dict[str, Any]) -> None:
    (statement,) = _one(built, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]  # logging off
    assert (statement["Action"], statement["Resource"]) == ("aps:RemoteWrite",
                                                           {"Fn::GetAtt": [built["workspace"], "Arn"]})


def test_fails_when_a_scrape_interval_is_out_of_range() -> None:
    stack = stand_ins.stack()
    prometheus = ManagedPrometheus(stack, "Prometheus", props=ManagedPrometheusProps(alias="alone"))
    too_often = {**METRICS, "clusterMetrics": {"level": "BASIC", "scrapeInterval": 4}}
    with pytest.raises(ValueError, match=r"^metrics_provider.clusterMetrics.scrapeInterval must be 5-300, got 4$"):
        ObservabilityAddon(stack, "Observability", props=_props(stack, prometheus, metrics_provider=too_often))
