"""NodeReadiness alone (a bare stack, the stand-in cluster): the wait carries each pool's requirement, starts after
what it is told to wait for, and reads nodes through a Kubernetes group that may only get and list them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import CfnWaitConditionHandle, Duration
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.node_readiness import (
    HANDLER_DIR,
    KUBERNETES_GROUP,
    RESOURCE_TYPE,
    NodeReadiness,
    NodeReadinessProps,
    NodeRequirement,
)
from hyperpod_infra.bundle import imported_by

BUNDLED = imported_by(HANDLER_DIR / "index.py")
REQUIREMENTS = (NodeRequirement(label_key="sagemaker.amazonaws.com/instance-group-name", label_value="prefill",
                                min_registered=2, description="instance group prefill"),
                NodeRequirement(label_key="sagemaker.amazonaws.com/instance-group-name", label_value="decode"))


def _props(stack: Any, **extra: Any) -> NodeReadinessProps:
    return NodeReadinessProps(**{"cluster": stand_ins.cluster(stack), "requirements": REQUIREMENTS,
                                 "waiting_for": "the observability add-on", "bundled_modules": BUNDLED, **extra})


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    hyperpod_cluster = CfnWaitConditionHandle(stack, "HyperPodCluster")  # a resource the wait starts after
    NodeReadiness(stack, "Readiness", props=_props(stack, depends_on=(hyperpod_cluster,),
                                                   hyperpod_cluster_name=stand_ins.HYPERPOD_CLUSTER_NAME,
                                                   timeout=Duration.minutes(30)))
    resources = Template.from_stack(stack).to_json()["Resources"]
    (wait,) = [r for r in resources.values() if r["Type"] == RESOURCE_TYPE]
    return {"resources": resources, "wait": wait, "after": stack.resolve(stack.get_logical_id(hyperpod_cluster))}


def test_the_wait_carries_each_pool_and_its_budget(built: dict[str, Any]) -> None:
    props = built["wait"]["Properties"]
    assert json.loads(props["Requirements"]) == [
        {"LabelKey": "sagemaker.amazonaws.com/instance-group-name", "LabelValue": "prefill", "MinRegistered": 2,
         "Description": "instance group prefill"},
        {"LabelKey": "sagemaker.amazonaws.com/instance-group-name", "LabelValue": "decode", "MinRegistered": 1,
         "Description": "sagemaker.amazonaws.com/instance-group-name=decode"}]
    assert (props["ClusterName"], props["HyperPodClusterName"]) == (stand_ins.CLUSTER_NAME,
                                                                    stand_ins.HYPERPOD_CLUSTER_NAME)
    # ServiceTimeout is the wait plus 5 minutes, below CloudFormation's hour (aws/aws-cdk#33837).
    assert props["ServiceTimeout"] == str((30 + 5) * 60)
    # With NodeProvisioningMode Continuous the HyperPod cluster is complete before any node exists
    # (shared/reference/deploy-facts.md, "Ordering and readiness"): the wait starts after it.
    assert built["after"] in built["wait"]["DependsOn"]


def test_the_waiter_may_only_get_and_list_nodes(built: dict[str, Any]) -> None:
    (entry,) = [r for r in built["resources"].values() if r["Type"] == "AWS::EKS::AccessEntry"]
    assert entry["Properties"]["KubernetesGroups"] == [KUBERNETES_GROUP]
    (rbac,) = [r for r in built["resources"].values() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"]
    role, binding = json.loads(rbac["Properties"]["Manifest"])
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": KUBERNETES_GROUP}]
    # The wait starts only once Kubernetes lets the role in.
    entry_id = next(k for k, r in built["resources"].items() if r is entry)
    assert entry_id in built["wait"]["DependsOn"]


def test_fails_when_a_pool_asks_for_no_node() -> None:
    stack = stand_ins.stack()
    none = (NodeRequirement(label_key="pool", label_value="decode", min_registered=0),)
    with pytest.raises(ValueError, match=r"^requirements\[0\].min_registered must be >= 1, got 0$"):
        NodeReadiness(stack, "Readiness", props=_props(stack, requirements=none))
