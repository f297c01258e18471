"""The observability add-on waits for registered HyperPod nodes, not for the HyperPod cluster resource, and not for
the end of their deep health checks.

Source: with NodeProvisioningMode Continuous, CloudFormation reports the HyperPod cluster complete before any
node exists, and the HyperPod observability add-on needs a node of 4xlarge or larger (the system nodes are
xlarge), so an add-on created then sits DEGRADED (deploy-facts.md, "Ordering and readiness";
terraform-aws-eks#3001 for the same failure with CoreDNS). Fails on main: the add-on depended on the
HyperPod cluster only, and nothing polled for nodes. Deep health checks keep a new node tainted
``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`` (HyperPod EKS prerequisites) for what can
be hours (lifecycle-facts.md), beyond CloudFormation's hour: the wait ends at registration (issue 20 item 6).
"""

from __future__ import annotations

import json
import urllib.parse

import pytest
from tests.infra import stand_ins

from hyperpod_constructs.hyperpod_cluster import POOL_LABEL
from hyperpod_constructs.node_readiness_handler import index
from hyperpod_runtime.eks.kube import Response


class FakeNodesApi:
    """``GET /api/v1/nodes?labelSelector=k=v`` over an in-memory node list (kube.Transport)."""

    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.fail_next = 0

    def add(self, name: str, pool: str, *, ready: bool, health_checks: bool = False) -> None:
        """A node as the API lists it; ``health_checks``: deep health checks still running (HyperPod's taint)."""
        taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}] if not ready else []
        if health_checks:
            taints.append({"key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable",
                           "effect": "NoSchedule"})
        self.nodes.append({"metadata": {"name": name, "labels": {POOL_LABEL: pool}},
                           "spec": {"taints": taints} if taints else {},
                           "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}})

    def request(self, method: str, path: str, body: bytes | None = None) -> Response:
        if self.fail_next:
            self.fail_next -= 1
            return Response(503, b"unavailable")
        url = urllib.parse.urlsplit(path)
        assert (method, url.path) == ("GET", "/api/v1/nodes")
        key, value = urllib.parse.parse_qs(url.query)["labelSelector"][0].split("=")
        items = [n for n in self.nodes if n["metadata"]["labels"].get(key) == value]
        return Response(200, json.dumps({"items": items}).encode())


REQUIREMENTS = [{"LabelKey": POOL_LABEL, "LabelValue": p, "MinRegistered": 1, "Description": f"pool {p}"}
                for p in ("prefill", "decode")]


def _event(request: str = "Create") -> dict:
    return {"RequestType": request, "ResourceProperties": {
        "ClusterName": "eks", "HyperPodClusterName": "hp", "WaitingFor": "the HyperPod observability add-on",
        "WaitSeconds": "2580", "Requirements": json.dumps(REQUIREMENTS)}}


def _started(clock: list[float]) -> dict:
    return {**_event(), **index.on_event(_event(), clock=lambda: clock[0])}


def test_waits_until_every_pool_has_a_registered_node() -> None:
    api, clock = FakeNodesApi(), [1000.0]
    event = _started(clock)
    check = lambda: index.is_complete(event, factory=lambda _: api, clock=lambda: clock[0])  # noqa: E731

    assert check() == {"IsComplete": False}  # the HyperPod cluster is "complete", no node registered yet
    api.add("hyperpod-i-1", "prefill", ready=True)
    assert check() == {"IsComplete": False}  # no decode node yet
    api.add("hyperpod-i-2", "decode", ready=False)
    assert check() == {"IsComplete": True}  # registered: NotReady is enough


def test_a_node_still_in_deep_health_checks_does_not_hold_the_deploy() -> None:
    """Ready but tainted node-health-status=Unschedulable (deep health checks, up to hours): the wait ends anyway;
    ``hyperpod-dpd status`` names such nodes."""
    api, clock = FakeNodesApi(), [1000.0]
    api.add("hyperpod-i-1", "prefill", ready=True, health_checks=True)
    api.add("hyperpod-i-2", "decode", ready=True, health_checks=True)
    event = _started(clock)
    assert index.is_complete(event, factory=lambda _: api, clock=lambda: clock[0]) == {"IsComplete": True}


def test_api_errors_are_retried_on_the_next_poll() -> None:
    api, clock = FakeNodesApi(), [1000.0]
    api.fail_next = 1
    event = _started(clock)
    assert index.is_complete(event, factory=lambda _: api, clock=lambda: clock[0]) == {"IsComplete": False}


def test_at_the_deadline_it_fails_naming_what_is_missing() -> None:
    api, clock = FakeNodesApi(), [1000.0]
    api.add("hyperpod-i-1", "prefill", ready=False)
    event = _started(clock)
    clock[0] += 2580

    with pytest.raises(RuntimeError) as failure:
        index.is_complete(event, factory=lambda _: api, clock=lambda: clock[0])
    message = str(failure.value)
    assert message.startswith("NodeReadiness: the HyperPod observability add-on needs registered nodes, and after "
                              "43 min")
    assert "pool decode: 0 of 1 registered node(s) with label hyperpod-dpd/pool=decode" in message
    assert "pool prefill" not in message
    assert "aws sagemaker list-cluster-events --cluster-name hp" in message


def test_delete_never_waits() -> None:
    assert index.is_complete(_event("Delete"), factory=lambda _: pytest.fail("no API call")) == {"IsComplete": True}


# -- the observability add-on stack alone (root conftest ``platform_alone``); the app's wiring of it to the
# HyperPod stack and the config's pools: tests/infra/test_app_wiring.py ------------------------------------------

def test_the_addon_waits_for_registered_nodes_of_every_pool_after_the_hyperpod_cluster(platform_alone) -> None:
    alone = platform_alone["ObservabilityAddon"]
    t = alone.template
    resources = t.to_json()["Resources"]
    (wait_id,) = t.find_resources("Custom::NodeReadiness")
    wait = resources[wait_id]
    requirements = json.loads(wait["Properties"]["Requirements"])
    assert {(r["LabelKey"], r["LabelValue"]) for r in requirements} == {(POOL_LABEL, p) for p in stand_ins.POOLS}
    (addon,) = t.find_resources("AWS::EKS::Addon").values()
    assert wait_id in addon["DependsOn"]
    assert {r["MinRegistered"] for r in requirements} == {1}
    assert wait["Properties"]["HyperPodClusterName"] == stand_ins.HYPERPOD_CLUSTER_NAME
    # The wait starts after the HyperPod cluster (in the app: another stack, so a stack dependency).
    assert alone.given.hyperpod_cluster in alone.stack.node_readiness.props.depends_on
    assert int(wait["Properties"]["ServiceTimeout"]) < 3600


def test_the_wait_reads_nodes_only(platform_alone) -> None:
    t = platform_alone["ObservabilityAddon"].template
    t.has_resource_properties("AWS::EKS::AccessEntry", {"Type": "STANDARD",
                                                        "KubernetesGroups": ["hyperpod-dpd:node-readiness"]})
    from hyperpod_constructs.node_readiness import rbac_manifests

    role = rbac_manifests()[0]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
