"""``hyperpod-dpd status``: moto for SageMaker (DescribeCluster, ListClusterNodes, DescribeClusterNode), botocore
``Stubber`` with the real EKS service model for ListAddons/DescribeAddon (moto 5.2 implements no EKS add-on API),
and the local Kubernetes API server whose InferenceEndpointConfig objects validate against the operator CRD.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from day2_fakes import (
    EKS_CLUSTER,
    HYPERPOD_CLUSTER,
    NAME,
    NAMESPACE,
    FakeCluster,
    dead_kubeconfig,
    endpoint_object,
    one_line_error,
    pod,
)
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sagemaker.models import sagemaker_backends

from hyperpod_core import pins
from hyperpod_dpd import aws
from hyperpod_dpd.commands.status import ADDON_PINS

pytest_plugins = ("day2_fixtures",)


# --- the fake API server follows the real CRD's status schema ------------------------------------------------


@pytest.mark.parametrize("state", ["DeploymentComplete", "DeploymentInProgress", "DeploymentFailed"])
def test_fake_endpoint_objects_validate_against_the_operator_crd(state: str) -> None:
    from hyperpod_k8s.crd_source import resolve_crd
    from hyperpod_k8s.endpoint.crd_schema import CrdValidator

    validator = CrdValidator.from_file(resolve_crd())
    obj = endpoint_object(state)
    assert validator.knows(obj)
    assert validator.errors(obj) == []
    broken = endpoint_object(state)
    broken["status"]["state"] = "Ready"  # not in the CRD's enum: the validator must see it
    assert validator.errors(broken)


# --- AWS doubles -------------------------------------------------------------------------------------------------


def _addons(overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    addons = {p.name: {"addonName": p.name, "clusterName": EKS_CLUSTER, "status": "ACTIVE",
                       "addonVersion": p.version, "health": {"issues": []}, "createdAt": now, "modifiedAt": now}
              for p in ADDON_PINS}
    for name, change in (overrides or {}).items():
        addons[name] = addons[name] | change
    return addons


@pytest.fixture
def eks_addons(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    """The EKS client of the command, stubbed with the real service model; tests edit the add-ons first."""
    addons = _addons()
    real_client = aws.client

    def client(service: str, region: str, session: Any = None) -> Any:
        if service != "eks":
            return real_client(service, region, session)
        eks = boto3.client("eks", region_name=region)
        stub = Stubber(eks)
        stub.add_response("list_addons", {"addons": list(addons)}, {"clusterName": EKS_CLUSTER})
        for name, addon in addons.items():
            stub.add_response("describe_addon", {"addon": addon}, {"clusterName": EKS_CLUSTER, "addonName": name})
        stub.activate()
        return eks

    monkeypatch.setattr(aws, "client", client)
    yield addons


def _hyperpod_cluster() -> None:
    sm = boto3.client("sagemaker", region_name="us-west-2")
    groups = [{"InstanceGroupName": g, "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "ThreadsPerCore": 1,
               "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
               "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/", "OnCreate": "on_create.sh"}}
              for g in ("prefill", "decode")]
    sm.create_cluster(ClusterName=HYPERPOD_CLUSTER, InstanceGroups=groups,
                      VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]})


@pytest.fixture
def healthy(eks_addons, cluster: FakeCluster, moto_isolated) -> Iterator[FakeCluster]:  # type: ignore[no-untyped-def]
    _hyperpod_cluster()
    cluster.dpd_endpoint()
    ec2 = boto3.client("ec2", region_name="us-west-2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-west-2{z}")
               ["Subnet"]["SubnetId"] for i, z in enumerate("ab")]
    lb = boto3.client("elbv2", region_name="us-west-2").create_load_balancer(
        Name="k8s-default-llama-abc", Subnets=subnets)["LoadBalancers"][0]
    cluster.alb(lb["DNSName"])
    yield cluster


def _status(cli, config_file, kubeconfig, *args: str):  # type: ignore[no-untyped-def]
    return cli("status", "--config", str(config_file), "--kubeconfig", str(kubeconfig), *args)


def _rows(out: str) -> dict[str, dict[str, Any]]:
    return {f"{c['section']}:{c['name']}": c for c in json.loads(out)["checks"]}


# --- behaviour -------------------------------------------------------------------------------------------------


def test_healthy_endpoint_can_serve(cli, config_file, kubeconfig, healthy) -> None:
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    rows = _rows(result.out)
    assert report["serving"] is True
    assert rows[f"hyperpod:cluster {HYPERPOD_CLUSTER}"]["detail"] == "InService"
    assert rows["hyperpod:instance group prefill"]["detail"] == "ml.p5.48xlarge 1/1 Running"
    assert rows["eks:amazon-sagemaker-hyperpod-inference"]["detail"] == f"{pins.INFERENCE_OPERATOR.version} ACTIVE"
    assert rows["endpoint:state"]["detail"].startswith(
        "DeploymentComplete (DeploymentReady=True Ready: DPD prefill and decode deployments are ready)")
    assert rows["endpoint:prefill pods"]["detail"] == f"Ready 1/1 (prefill-{NAME}-7d9f8-abcde)"
    assert rows["endpoint:decode pods"]["detail"] == f"Ready 1/1 (decode-{NAME}-5c6b7-fghij)"
    assert rows["endpoint:router"]["detail"] == f"Ready 1/1 ({NAME}-{NAMESPACE}-routing-service:443)"
    lb = boto3.client("elbv2", region_name="us-west-2").describe_load_balancers()["LoadBalancers"][0]
    assert rows["endpoint:load balancer"]["detail"] == f"{lb['DNSName']} (active)"
    assert rows["endpoint:TLS certificate"]["detail"] == f"s3://hyperpod-tls-test/{NAMESPACE}/{NAME}.pem (Valid)"
    assert all(c["state"] == "ok" for c in report["checks"] if c["section"] != "observability")


def test_says_in_one_line_whom_the_alerts_reach(cli, config_file, kubeconfig, healthy) -> None:
    """observability.alerts names no receiver in the test config: one warning row that does not block serving."""
    result = _status(cli, config_file, kubeconfig, "--json")
    alerts = _rows(result.out)["observability:alerts"]
    assert alerts["state"] == "warn" and alerts["blocks_serving"] is False
    assert alerts["detail"].startswith("alerts reach no one: observability.alerts names no email_addresses")
    assert result.code == 0


def test_table_is_one_screen_with_a_verdict(cli, config_file, kubeconfig, healthy) -> None:
    result = _status(cli, config_file, kubeconfig)
    assert result.code == 0, result.err
    assert "the endpoint can serve" in result.out and "next step" in result.out


def test_deploying_endpoint_cannot_serve_and_says_what_to_wait_for(cli, config_file, kubeconfig, healthy) -> None:
    healthy.endpoints[(NAMESPACE, NAME)] = endpoint_object("DeploymentInProgress")
    for p in healthy.pods:
        if p["metadata"]["name"].startswith(("prefill-", "decode-")):
            p["status"]["conditions"][0]["status"] = "False"
    result = _status(cli, config_file, kubeconfig)
    assert result.code == 1
    line = one_line_error(result)
    assert line.startswith("error: the endpoint cannot serve: state: DeploymentInProgress")
    assert "pods load the weights from S3 (5-10 minutes" in line
    assert "Ready 0/1" in result.out


def test_missing_endpoint_names_the_manifest_to_apply(cli, config_file, kubeconfig, healthy) -> None:
    healthy.endpoints.clear()
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)[f"endpoint:{NAMESPACE}/{NAME}"]
    assert row["next_step"] == f"kubectl apply -f {config_file.with_suffix('.out')}/dist/endpoint/"


def test_colocated_baseline_is_recognised(cli, config_file, kubeconfig, healthy) -> None:
    """The rollback manifest has the same name and no pdSpec (docs/endpoint.md): no roles, no router."""
    obj = endpoint_object()
    del obj["spec"]["pdSpec"]
    obj["spec"]["replicas"] = 2
    healthy.endpoints[(NAMESPACE, NAME)] = obj
    healthy.pods = [pod(f"{NAME}-6b8c9-{i}", NAMESPACE, {"app": NAME}) for i in "ab"]
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    assert rows["endpoint:mode"]["state"] == "warn"
    assert rows["endpoint:mode"]["next_step"] == (
        f"to serve disaggregated, kubectl apply -f {config_file.with_suffix('.out')}/dist/endpoint/{NAME}-dpd.k8s.yaml")
    assert rows["endpoint:pods"]["detail"] == f"Ready 2/2 ({NAME}-6b8c9-a, {NAME}-6b8c9-b)"
    assert "endpoint:router" not in rows


def test_ingress_hostname_without_a_load_balancer_is_a_warning(cli, config_file, kubeconfig, healthy) -> None:
    healthy.ingresses.clear()
    healthy.alb("k8s-gone-123.us-west-2.elb.amazonaws.com")
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err  # the router still serves through a port-forward
    row = _rows(result.out)["endpoint:load balancer"]
    assert row["state"] == "warn" and row["detail"].endswith("(not found in ELBv2)")


@pytest.mark.parametrize(("name", "namespace"), [
    (f"alb-{NAME}", "default"),  # the endpoint's namespace: where this command used to look
    (f"alb-{NAME}-test-default", "hyperpod-inference-system"),  # another endpoint whose name starts with ours
])
def test_only_the_operators_ingress_for_this_endpoint_counts(cli, config_file, kubeconfig, healthy, name,
                                                             namespace) -> None:
    """The operator's Ingress is ``alb-<name>-<namespace>`` in hyperpod-inference-system (endpoint_names)."""
    healthy.ingresses.clear()
    healthy.alb("k8s-other-123.us-west-2.elb.amazonaws.com", name=name, namespace=namespace)
    result = _status(cli, config_file, kubeconfig, "--json")
    row = _rows(result.out)["endpoint:load balancer"]
    assert row["state"] == "warn" and "k8s-other" not in row["detail"], row


def test_addon_version_drift_warns_but_serves(cli, config_file, kubeconfig, healthy, eks_addons) -> None:
    eks_addons["coredns"]["addonVersion"] = "v1.11.0-eksbuild.1"
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    row = _rows(result.out)["eks:coredns"]
    assert row["state"] == "warn" and row["next_step"].startswith(f"pinned {pins.COREDNS.version}")


def test_degraded_operator_addon_blocks_serving(cli, config_file, kubeconfig, healthy, eks_addons) -> None:
    eks_addons[pins.INFERENCE_OPERATOR.name] |= {
        "status": "DEGRADED", "health": {"issues": [{"code": "InsufficientNumberOfReplicas",
                                                     "message": "The add-on is unhealthy"}]}}
    result = _status(cli, config_file, kubeconfig)
    assert result.code == 1
    assert "amazon-sagemaker-hyperpod-inference: v1.3.0-eksbuild.1 DEGRADED (InsufficientNumberOfReplicas" \
        in one_line_error(result)


def test_failed_node_is_named(cli, config_file, kubeconfig, healthy) -> None:
    backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-west-2"]
    backend.clusters[HYPERPOD_CLUSTER].nodes["decode-0"].status = "Failure"
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)["hyperpod:instance group decode"]
    assert row["state"] == "fail" and row["detail"] == "ml.p5.48xlarge 0/1 Running; decode-0 Failure"


def _placed(monkeypatch: pytest.MonkeyPatch, zones: dict[str, str]) -> None:
    """moto's DescribeClusterNode has no ``Placement``; the SageMaker API model has
    ``NodeDetails.Placement{AvailabilityZone, AvailabilityZoneId}``: add it as the service returns it."""
    from moto.sagemaker.models import ClusterNode

    plain = ClusterNode.describe

    def describe(self: ClusterNode) -> dict[str, Any]:
        zone_id = zones[self.instance_group_name]
        return plain(self) | {"Placement": {"AvailabilityZone": "us-west-2x", "AvailabilityZoneId": zone_id}}

    monkeypatch.setattr(ClusterNode, "describe", describe)


def test_node_az_ids_are_shown(cli, config_file, kubeconfig, healthy, monkeypatch) -> None:
    _placed(monkeypatch, {"prefill": "usw2-az2", "decode": "usw2-az2"})
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    assert _rows(result.out)["hyperpod:instance group decode"]["detail"] == "ml.p5.48xlarge 1/1 Running, AZ usw2-az2"


def test_nodes_outside_the_configured_az_cannot_serve_dpd(cli, config_file, kubeconfig, healthy, monkeypatch) -> None:
    _placed(monkeypatch, {"prefill": "usw2-az2", "decode": "usw2-az1"})
    result = _status(cli, config_file, kubeconfig)
    assert result.code == 1
    assert "nodes in usw2-az1, config says usw2-az2: DPD needs every GPU node in one AZ" in one_line_error(result)


def test_unknown_hyperpod_cluster_is_a_failed_row(cli, config_file, kubeconfig, eks_addons, cluster,
                                                  moto_isolated) -> None:
    cluster.dpd_endpoint()
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)[f"hyperpod:cluster {HYPERPOD_CLUSTER}"]
    assert row["state"] == "fail" and "describing HyperPod cluster" in row["detail"]


def test_unreachable_kubernetes_is_one_line(cli, config_file, tmp_path, healthy) -> None:
    dead = dead_kubeconfig(tmp_path / "dead")
    result = _status(cli, config_file, dead)
    assert result.code == 1
    assert "Kubernetes API unreachable" in one_line_error(result)


def test_watch_refreshes(cli, config_file, kubeconfig, healthy) -> None:
    result = _status(cli, config_file, kubeconfig, "--watch", "--interval", "2", "--refreshes", "2")
    assert result.code == 0, result.err
    assert result.out.count("the endpoint can serve") == 2


@pytest.mark.parametrize(("args", "message"), [
    (("--interval", "1"), "error: --interval must be between 2 and 3600 seconds, got 1"),
    (("--watch", "--json"), "error: --watch prints a screen; use --json without --watch"),
])
def test_bad_input_is_exit_2(cli, config_file, kubeconfig, args, message) -> None:
    result = _status(cli, config_file, kubeconfig, *args)
    assert result.code == 2
    assert one_line_error(result) == message


def test_unreachable_aws_is_a_failed_row_and_one_line(cli, config_file, kubeconfig, cluster, monkeypatch) -> None:
    from botocore.config import Config as BotoConfig
    from day2_fakes import free_port

    cluster.dpd_endpoint()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(aws, "RETRIES", BotoConfig(retries={"max_attempts": 1}, connect_timeout=2))
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)[f"hyperpod:cluster {HYPERPOD_CLUSTER}"]
    assert row["state"] == "fail" and "Could not connect to the endpoint URL" in row["detail"]
    assert _rows(result.out)["endpoint:state"]["state"] == "ok"  # the Kubernetes side is still read
    assert one_line_error(result).startswith("error: the endpoint cannot serve: cluster hyperpod-dpd")
