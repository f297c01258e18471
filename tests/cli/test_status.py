"""``hyperpod-dpd status``: moto for SageMaker (DescribeCluster, ListClusterNodes, DescribeClusterNode), botocore
``Stubber`` with the real EKS service model for ListAddons/DescribeAddon (moto 5.2 implements no EKS add-on API),
and the local Kubernetes API server whose InferenceEndpointConfig objects validate against the operator CRD.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from day2_fakes import (
    EKS_CLUSTER,
    HYPERPOD_CLUSTER,
    MODEL_PATH,
    NAME,
    NAMESPACE,
    SERVED_NAME,
    FakeCluster,
    alloc_failed_line,
    dead_kubeconfig,
    deployed_at,
    endpoint_object,
    node,
    one_line_error,
    pod,
    retrieved_line,
    role_pod,
    rolled_out,
    server_of,
    weights_cache_object,
    worker_line,
    worker_startup,
)
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sagemaker.models import sagemaker_backends

from hyperpod_core import pins
from hyperpod_core.dist_layout import DistLayout
from hyperpod_dpd import aws
from hyperpod_dpd.status.cluster import ADDON_PINS

pytest_plugins = ("day2_fixtures",)


# --- the fake API server follows the real CRD's status schema ------------------------------------------------


def test_fake_weights_cache_objects_validate_against_the_v33_crd() -> None:
    from tests.k8s.crd_schema import CrdValidator

    from hyperpod_core import pins
    from hyperpod_k8s.crd_source import resolve_crd

    validator = CrdValidator.from_file(resolve_crd(pins.MODEL_WEIGHTS_CACHE_CONFIG_CRD))
    for obj in (weights_cache_object(), weights_cache_object("Failed", ready=0, message="no space left on device")):
        assert validator.knows(obj) and validator.errors(obj) == []
    broken = weights_cache_object()
    del broken["spec"]["modelSourceConfig"]  # required by the CRD
    assert validator.errors(broken)


@pytest.mark.parametrize("state", ["DeploymentComplete", "DeploymentInProgress", "DeploymentFailed"])
def test_fake_endpoint_objects_validate_against_the_operator_crd(state: str) -> None:
    from tests.k8s.crd_schema import CrdValidator

    from hyperpod_k8s.crd_source import resolve_crd

    validator = CrdValidator.from_file(resolve_crd())
    obj = endpoint_object(state)
    assert validator.knows(obj)
    assert validator.errors(obj) == []
    broken = endpoint_object(state)
    broken["status"]["state"] = "Ready"  # not in the CRD's enum: the validator must see it
    assert validator.errors(broken)
    cache = endpoint_object(state, image_cache={"state": "Warm", "readyNodes": 1, "targetNodes": 2})
    assert any("imageCacheStatus.state" in e for e in validator.errors(cache))  # v3.3 enum: Pending ... Ready


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


PREFILL_POD, DECODE_POD = f"prefill-{NAME}-7d9f8-abcde", f"decode-{NAME}-5c6b7-fghij"


def _worker_logs(cluster: FakeCluster, *, prefill: list[str] | None = None, decode: list[str] | None = None,
                 decode_transfers: list[str] | None = None) -> None:
    """Start-up lines of both workers (every rank's LMCache set-up) and the decoder's recent transfers."""
    for pod_name, role, lines in ((PREFILL_POD, "prefill", prefill), (DECODE_POD, "decode", decode)):
        for line in lines if lines is not None else worker_startup(role):
            cluster.log(NAMESPACE, pod_name, f"{role}-{NAME}", line, when=time.time() - 3600)
    for rank in range(8) if decode_transfers is None else ():
        cluster.log(NAMESPACE, DECODE_POD, f"decode-{NAME}",
                    worker_line(rank, retrieved_line(f"chatcmpl-{rank}", 8192, 8192, 8200, 20.0 + rank)))
    for line in decode_transfers or ():
        cluster.log(NAMESPACE, DECODE_POD, f"decode-{NAME}", line)


@pytest.fixture
def healthy(eks_addons, cluster: FakeCluster, moto_isolated) -> Iterator[FakeCluster]:  # type: ignore[no-untyped-def]
    _hyperpod_cluster()
    cluster.gpu_nodes()
    cluster.dpd_endpoint()
    _worker_logs(cluster)
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
    # The skew guard (issue 33 item 2): what each role runs, on the screen and as data in --json.
    prefill, decode = rows["endpoint:prefill revision"], rows["endpoint:decode revision"]
    assert prefill["detail"] == f"image lmcache/vllm-openai:v0.4.3, model {MODEL_PATH}, revision 1 (7d9f8): 1/1 Ready"
    assert decode["detail"] == f"image lmcache/vllm-openai:v0.4.3, model {MODEL_PATH}, revision 1 (5c6b7): 1/1 Ready"
    assert prefill["facts"] == {
        "deployment": f"prefill-{NAME}", "found": True, "revision": "1", "images": ["lmcache/vllm-openai:v0.4.3"],
        "models": [MODEL_PATH], "served_names": [SERVED_NAME],
        "templates": [{"pod_template_hash": "7d9f8", "revision": "1", "pods": 1, "ready": 1}]}
    assert rows["endpoint:prefill/decode skew"]["facts"] == {"skewed": False, "findings": []}


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


def test_the_verdict_is_said_once(cli, config_file, kubeconfig, healthy) -> None:
    """A screen that cannot serve ends with the table; the verdict is the error line on stderr, with what blocks it
    and the next step. Fails on main: stdout ended "the endpoint cannot serve" above the same words on stderr
    (newcomer friction 18). (A --watch screen keeps its verdict line: test_watch_refreshes.)"""
    healthy.endpoints[(NAMESPACE, NAME)] = endpoint_object("DeploymentInProgress")
    result = _status(cli, config_file, kubeconfig)
    assert result.code == 1
    assert one_line_error(result).startswith("error: the endpoint cannot serve: state: DeploymentInProgress")
    assert "the endpoint cannot serve" not in result.out and result.out.rstrip().endswith("┘")


def test_missing_endpoint_names_the_manifest_to_apply(cli, config_file, kubeconfig, healthy) -> None:
    healthy.endpoints.clear()
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)[f"endpoint:{NAMESPACE}/{NAME}"]
    layout = DistLayout.of(config_file.with_suffix(".out") / "dist", NAME, "dpd")
    assert row["next_step"] == f"kubectl apply -f {layout.endpoint_dir}/"


def test_a_synth_with_placeholders_is_never_named_to_apply(cli, config_file, kubeconfig, healthy) -> None:
    """REV34 defect 11: while the environment's synth left placeholders (``<endpoint>/placeholders/``,
    hyperpod_core.dist_layout), the missing endpoint's row and the colocated baseline's row say to resolve them
    first (the README there) and name the folder the apply will read, ``<endpoint>/endpoint/``, never the
    placeholders' manifests. Fails before: ``kubectl apply -f .../placeholders/endpoint/``."""
    dist = config_file.with_suffix(".out") / "dist"
    unresolved = DistLayout.of(dist, NAME, "dpd", unresolved=True)
    unresolved.endpoint_dir.mkdir(parents=True)
    first = (f"the synth left placeholders in {unresolved.base}/ (its README.txt says what resolves each): "
             "resolve them and synthesize again, then ")
    deployable = DistLayout.of(dist, NAME, "dpd")
    healthy.endpoints.clear()
    row = _rows(_status(cli, config_file, kubeconfig, "--json").out)[f"endpoint:{NAMESPACE}/{NAME}"]
    assert row["next_step"] == f"{first}kubectl apply -f {deployable.endpoint_dir}/"
    obj = endpoint_object()
    del obj["spec"]["pdSpec"]
    healthy.endpoints[(NAMESPACE, NAME)] = obj
    healthy.pods = [pod(f"{NAME}-6b8c9-a", NAMESPACE, {"app": NAME})]
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    assert rows["endpoint:mode"]["next_step"] == (f"to serve disaggregated: {first}hyperpod-dpd rollout --config "
                                                  f"{config_file} (endpoint.apply is dpd)")


def test_colocated_baseline_is_recognised(cli, config_file, kubeconfig, healthy) -> None:
    """The baseline manifest has the same name and no pdSpec (docs/endpoint.md): no roles, no router; back to DPD
    through rollout (issue 36: one way to change an endpoint)."""
    obj = endpoint_object()
    del obj["spec"]["pdSpec"]
    obj["spec"]["replicas"] = 2
    healthy.endpoints[(NAMESPACE, NAME)] = obj
    healthy.pods = [pod(f"{NAME}-6b8c9-{i}", NAMESPACE, {"app": NAME}) for i in "ab"]
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    assert rows["endpoint:mode"]["state"] == "warn"
    assert rows["endpoint:mode"]["next_step"] == (f"to serve disaggregated: hyperpod-dpd rollout --config "
                                                  f"{config_file} (endpoint.apply is dpd)")
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
    assert (f"amazon-sagemaker-hyperpod-inference: {pins.INFERENCE_OPERATOR.version} DEGRADED "
            "(InsufficientNumberOfReplicas") in one_line_error(result)


def test_nodes_in_deep_health_checks_are_named_and_hold_their_pool(cli, config_file, kubeconfig, healthy) -> None:
    """Issue 20 item 6: the deploy ends when the nodes have registered; a node still in deep health checks carries
    ``sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`` (HyperPod EKS prerequisites) and takes no
    pod although it may be Ready. status names it; a pool with no schedulable node cannot serve."""
    healthy.nodes[:] = [node("hyperpod-i-0prefill", "prefill"),
                        node("hyperpod-i-0decode", "decode", ready=True, health_checks=True)]
    backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-west-2"]
    backend.clusters[HYPERPOD_CLUSTER].nodes["decode-0"].status = "DeepHealthCheckInProgress"
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    rows = _rows(result.out)
    assert rows["nodes:pool prefill"]["state"] == "ok"
    decode = rows["nodes:pool decode"]
    assert decode["state"] == "fail"
    assert decode["detail"] == "0/1 schedulable; in deep health checks: hyperpod-i-0decode"
    assert decode["next_step"].startswith("deep health checks take up to hours on p5; wait")
    assert rows["hyperpod:instance group decode"]["detail"].endswith("decode-0 DeepHealthCheckInProgress")


def test_a_second_node_in_deep_health_checks_is_a_warning(cli, config_file, kubeconfig, healthy) -> None:
    healthy.nodes.append(node("hyperpod-i-1decode", "decode", health_checks=True))
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    row = _rows(result.out)["nodes:pool decode"]
    assert (row["state"], row["detail"]) == ("warn", "1/2 schedulable; in deep health checks: hyperpod-i-1decode")


def test_a_pool_without_nodes_cannot_serve(cli, config_file, kubeconfig, healthy) -> None:
    healthy.nodes[:] = [n for n in healthy.nodes if n["metadata"]["labels"]["hyperpod-dpd/pool"] != "decode"]
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    row = _rows(result.out)["nodes:pool decode"]
    assert (row["state"], row["detail"]) == ("fail", "no node registered")


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
    # A cluster that does not exist is not an access problem: the next step is to deploy it.
    assert row["next_step"].startswith(f"it is not deployed: hyperpod-dpd deploy --config {config_file} (stack "
                                       "hyperpod-dpd-hyperpod)")
    assert "access" not in row["next_step"]


def test_unreachable_kubernetes_is_one_line(cli, config_file, tmp_path, healthy) -> None:
    dead = dead_kubeconfig(tmp_path / "dead")
    deployed_at(config_file, server_of(dead))
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
    assert row["next_step"].startswith("check network access to http://127.0.0.1:")
    assert _rows(result.out)["endpoint:state"]["state"] == "ok"  # the Kubernetes side is still read
    assert one_line_error(result).startswith("error: the endpoint cannot serve: cluster hyperpod-dpd")


def test_yaml_is_the_json_document(cli, config_file, kubeconfig, healthy) -> None:
    """``--output yaml`` and ``--json`` print the same document, schema_version first."""
    import yaml

    as_json = json.loads(_status(cli, config_file, kubeconfig, "--json").out)
    as_yaml = yaml.safe_load(_status(cli, config_file, kubeconfig, "-o", "yaml").out)
    assert as_yaml == as_json and next(iter(as_json)) == "schema_version"


def test_region_sends_the_aws_calls_there(cli, config_file, kubeconfig, healthy) -> None:
    """The HyperPod cluster exists in moto's us-west-2 only: asked in eu-west-1, it is not found there."""
    result = _status(cli, config_file, kubeconfig, "--json", "--region", "eu-west-1")
    assert result.code == 1
    row = _rows(result.out)[f"hyperpod:cluster {HYPERPOD_CLUSTER}"]
    assert row["state"] == "fail" and "describing HyperPod cluster" in row["detail"]
    assert "note: --region eu-west-1: AWS calls go there, while this config deploys to us-west-2" in result.err


def test_profile_is_the_aws_profile_of_the_calls(cli, config_file, kubeconfig, healthy, monkeypatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "restored-after-the-test")
    monkeypatch.delenv("AWS_PROFILE")
    aws_config = config_file.parent / "aws-config"
    aws_config.write_text("[profile dev]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(aws_config))
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # the EKS stub's boto3.client() read the config files before
    result = _status(cli, config_file, kubeconfig, "--json", "--profile", "dev")
    assert result.code == 0, result.err
    assert os.environ["AWS_PROFILE"] == "dev"  # what boto3, the CDK CLI and `aws eks get-token` read
    unknown = _status(cli, config_file, kubeconfig, "--json", "--profile", "nosuch")
    assert unknown.code == 2
    assert one_line_error(unknown) == ("error: --profile must be a profile of the AWS config files (~/.aws/config, "
                                       "$AWS_CONFIG_FILE): dev, got 'nosuch'")


# --- cold start (operator v3.3) ---------------------------------------------------------------------------------


def test_both_caches_ready_are_shown_with_their_nodes(cli, config_file, kubeconfig, healthy) -> None:
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    assert rows["endpoint:image cache"]["detail"] == "Ready, 2/2 nodes: image cached on all target nodes"
    assert rows["endpoint:weights cache"]["detail"] == (
        f"/opt/dlami/nvme: {NAME}-weights-cache Ready, 2/2 nodes")
    assert rows["endpoint:weights cache"]["state"] == rows["endpoint:image cache"]["state"] == "ok"


@pytest.mark.parametrize(("image", "weights", "row", "detail", "next_step"), [
    ({"state": "Downloading", "readyNodes": 1, "targetNodes": 2}, None, "image cache",
     "Downloading, 1/2 nodes", "pods pull the image themselves meanwhile"),
    (None, weights_cache_object("Failed", ready=0, message="no space left on device"), "weights cache",
     f"/opt/dlami/nvme: {NAME}-weights-cache Failed, 0/2 nodes: no space left on device",
     "check that /opt/dlami/nvme is a mount point on the nodes"),
], ids=["image-downloading", "weights-failed"])
def test_a_cache_that_is_not_ready_warns_but_serves(cli, config_file, kubeconfig, healthy, image, weights, row,
                                                    detail, next_step) -> None:
    """Without a cache a pod pulls its image and loads from S3, only slower (AWS model-caching page)."""
    if image is not None:
        healthy.endpoints[(NAMESPACE, NAME)]["status"]["imageCacheStatus"] = image
    if weights is not None:
        healthy.weights_caches[:] = [weights]
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    check = _rows(result.out)[f"endpoint:{row}"]
    assert check["state"] == "warn" and check["detail"] == detail and next_step in check["next_step"]


def test_an_operator_older_than_v33_is_named_for_either_cache() -> None:
    """No ``status.imageCacheStatus`` and no ModelWeightsCacheConfig CRD: both arrived with v3.3 (add-on v1.4.0)."""
    from hyperpod_dpd.status.cold_start import _image_cache_check, _weights_cache_check

    image = _image_cache_check({"imageCache": {"enabled": True}}, None)
    assert image.state == "warn" and image.detail == "on, but the endpoint has no status.imageCacheStatus"
    assert "add-on v1.4.0" in image.next_step and not image.blocks_serving
    weights = _weights_cache_check(None, {"enabled": True}, None)  # type: ignore[arg-type]
    assert weights.state == "warn" and weights.detail == "on, but the cluster has no ModelWeightsCacheConfig CRD"
    assert "needs operator v3.3 (add-on v1.4.0)" in weights.next_step


def test_caches_switched_off_are_not_a_warning(cli, config_file, kubeconfig, healthy) -> None:
    obj = healthy.endpoints[(NAMESPACE, NAME)]
    obj["spec"]["modelCacheConfig"] = {"imageCache": {"enabled": False}, "weightsCache": {"enabled": False}}
    del obj["status"]["imageCacheStatus"]
    healthy.weights_caches.clear()
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    assert rows["endpoint:image cache"]["state"] == rows["endpoint:weights cache"]["state"] == "ok"
    assert rows["endpoint:weights cache"]["detail"].startswith("off: weights load from S3 on every pod start")


def test_weights_cache_of_another_endpoint_is_not_ours(cli, config_file, kubeconfig, healthy) -> None:
    healthy.weights_caches[:] = [weights_cache_object(owner="other-endpoint")]
    row = _rows(_status(cli, config_file, kubeconfig, "--json").out)["endpoint:weights cache"]
    assert row["state"] == "warn" and f"no ModelWeightsCacheConfig for {NAME} yet" in row["detail"]


# --- the KV path over EFA ---------------------------------------------------------------------------------------


def test_libfabric_sender_and_receiver_above_the_efa_line_prove_the_path(cli, config_file, kubeconfig,
                                                                          healthy) -> None:
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    prefill, decode = rows["endpoint:KV path (prefill)"], rows["endpoint:KV path (decode)"]
    assert prefill["state"] == decode["state"] == "ok"
    assert prefill["detail"] == f"over EFA: {PREFILL_POD}: 'pd_role': 'sender', NIXL LIBFABRIC"
    assert decode["detail"] == f"over EFA: {DECODE_POD}: 'pd_role': 'receiver', NIXL LIBFABRIC, 8 rank(s) >= 20 GB/s"


@pytest.mark.parametrize(("logs", "row", "signature", "fix"), [
    ({"prefill": worker_startup("prefill", nixl_backends=None), "decode": worker_startup("decode", nixl_backends=None),
      "decode_transfers": [worker_line(0, retrieved_line("r", 0, 6144, 6150, 0.0))]},
     "decode", "NIXL UCX (LMCache's default: nixl_backends unset)", "LMCACHE_NIXL_BACKENDS=LIBFABRIC"),
    ({"decode_transfers": [worker_line(r, retrieved_line(f"c{r}", 8192, 8192, 8200, 0.4 if r == 5 else 22.0))
                           for r in range(8)]}, "decode", "rank 5: 0.4 GB/s", "vpc.amazonaws.com/efa"),
], ids=["ucx-by-default", "one-rank-below-1-gbps"])  # every other signature: tests/cli/test_logs.py
def test_a_kv_path_not_on_efa_is_named_with_its_fix(cli, config_file, kubeconfig, cluster, eks_addons,
                                                    moto_isolated, logs, row, signature, fix) -> None:
    _hyperpod_cluster()
    cluster.gpu_nodes()
    cluster.dpd_endpoint()
    _worker_logs(cluster, **logs)
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err  # the decoder still answers (it recomputes): serving, but not over EFA
    check = _rows(result.out)[f"endpoint:KV path ({row})"]
    assert check["state"] == "fail" and check["detail"].startswith("refuted: ")
    assert signature in check["detail"] and fix in check["next_step"]


def test_a_log_without_start_up_lines_leaves_the_path_unproven(cli, config_file, kubeconfig, cluster, eks_addons,
                                                               moto_isolated) -> None:
    _hyperpod_cluster()
    cluster.gpu_nodes()
    cluster.dpd_endpoint()
    check = _rows(_status(cli, config_file, kubeconfig, "--json").out)["endpoint:KV path (decode)"]
    assert check["state"] == "warn" and check["detail"].startswith("not proven: ")
    assert "no 'LMCache Configuration' line" in check["detail"]


# --- prefill/decode skew (issue 33 item 2) -----------------------------------------------------------------------
# The pods, ReplicaSets and Deployments are in the format of day2_fakes.role_pod / replica_set / role_deployment:
# the role label (AWS DPD guide), pod-template-hash and deployment.kubernetes.io/revision (Kubernetes), [I] the rest.

NEW_IMAGE = "lmcache/vllm-openai:v0.4.4"
NEW_MODEL = f"/opt/ml/model/{SERVED_NAME}/sha256-0a1b2c3d4e5f6a7b"


@pytest.mark.parametrize(("change", "differs"), [
    ({"image": NEW_IMAGE}, f"image differs: prefill runs lmcache/vllm-openai:v0.4.3; decode runs {NEW_IMAGE}"),
    ({"model": NEW_MODEL}, f"model path (--model) differs: prefill runs {MODEL_PATH}; decode runs {NEW_MODEL}"),
], ids=["image", "model-path"])
def test_prefill_and_decode_serving_different_weights_or_engines_cannot_serve(
        cli, config_file, kubeconfig, healthy, change, differs) -> None:
    """Decode finished its rollout, prefill has not started (k8s-review defect 1: no surge room in its pool)."""
    healthy.roll("decode", "8e0a1", 2, **change)
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 1
    skew = _rows(result.out)["endpoint:prefill/decode skew"]
    assert skew["state"] == "fail" and skew["blocks_serving"] and skew["detail"] == differs
    assert skew["facts"]["findings"][0]["kind"] == next(iter(change))
    line = one_line_error(_status(cli, config_file, kubeconfig))
    assert line.startswith(f"error: the endpoint cannot serve: prefill/decode skew: {differs}; next: ")


def test_a_role_mid_rollout_is_a_warning(cli, config_file, kubeconfig, healthy) -> None:
    """Pods of two pod templates in one role: the new pod is Pending (no free GPUs), the old one serves."""
    healthy.roll("prefill", "9a8b7", 2, ready=False, finished=False)
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err  # both roles still serve one image and one model path
    rows = _rows(result.out)
    expected = "prefill rollout in progress: its pods run 2 pod templates (revision 1 (7d9f8): 1/1 Ready; revision 2 " \
               "(9a8b7): 0/1 Ready)"
    assert (rows["endpoint:prefill/decode skew"]["state"], rows["endpoint:prefill/decode skew"]["detail"]) == (
        "warn", expected)
    assert rows["endpoint:prefill revision"]["state"] == "warn"
    assert rows["endpoint:prefill revision"]["next_step"] == f"kubectl rollout status deployment/prefill-{NAME} -n " \
                                                             f"{NAMESPACE}"
    assert rows["endpoint:decode revision"]["state"] == "ok"


def test_pods_behind_their_deployments_revision_are_a_rollout() -> None:
    """The Deployment moved to revision 2 and no pod of it exists yet (the pods of revision 1 serve)."""
    from hyperpod_dpd import skew
    from hyperpod_dpd.kube import PodTarget, RoleWorkers

    def role(name: str, template: str, revision: str) -> RoleWorkers:
        pods = [PodTarget(namespace=NAMESPACE, pod=f"{name}-{template}-a", container=name, ready=True,
                          image="i", model=MODEL_PATH, template_hash=template)]
        return RoleWorkers(role="decode" if name == "decode" else "prefill", deployment=name, found=True,
                           revision=revision, revisions={template: "1"}, pods=pods)

    (finding,) = skew.findings({"prefill": role("prefill", "7d9f8", "1"), "decode": role("decode", "5c6b7", "2")})
    assert (finding.kind, finding.role, finding.message) == (
        "rollout", "decode", "decode rollout in progress: its pods run revision 1, Deployment decode is at revision 2")


def test_both_roles_rolled_to_one_new_model_are_not_skewed(cli, config_file, kubeconfig, healthy) -> None:
    """A finished rollout's old pod that is still terminating is no second pod template."""
    for role, template in (("prefill", "9a8b7"), ("decode", "8e0a1")):
        healthy.roll(role, template, 2, model=NEW_MODEL)
    healthy.pods.append(role_pod(NAME, "decode", "5c6b7", "old00", terminating=True))
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    assert rows["endpoint:prefill/decode skew"]["state"] == "ok"
    assert rows["endpoint:decode revision"]["detail"] == (
        f"image lmcache/vllm-openai:v0.4.3, model {NEW_MODEL}, revision 2 (8e0a1): 1/1 Ready")


# --- two endpoints whose names share a prefix (issue 33 item 3, k8s-review defect 6) -----------------------------


def test_status_of_llama_never_reads_the_pods_of_llama_3_3_70b(cli, llama_config, kubeconfig, healthy) -> None:
    """``healthy`` runs endpoint llama-3-3-70b; endpoint llama runs beside it in the same namespace. Its weights
    caches are owned by no InferenceEndpointConfig, so the fallback that used to take every name starting with
    ``llama`` is the one in use."""
    healthy.weights_caches[:] = [weights_cache_object(owner=NAME, owned=False)]
    healthy.dpd_endpoint(name="llama", model_location="models/Llama-3.1-8B-Instruct/")
    healthy.weights_caches[1] = weights_cache_object(owner="llama", owned=False,
                                                     model_location="models/Llama-3.1-8B-Instruct")
    for role, (template, suffix) in (("prefill", ("7d9f8", "abcde")), ("decode", ("5c6b7", "fghij"))):
        for line in worker_startup(role):
            healthy.log(NAMESPACE, f"{role}-llama-{template}-{suffix}", f"{role}-llama", line)
    # llama-3-3-70b is not in this config: the "other endpoints" rows read its pods on purpose (REV34 defect 10);
    # with the cluster-wide list forbidden they read nothing, and the endpoint's own rows are what this test is about.
    healthy.endpoint_list_forbidden = True
    healthy.requests.clear()
    result = _status(cli, llama_config, kubeconfig, "--json")
    rows = _rows(result.out)
    assert rows["endpoint:prefill pods"]["detail"] == "Ready 1/1 (prefill-llama-7d9f8-abcde)"
    assert rows["endpoint:decode pods"]["detail"] == "Ready 1/1 (decode-llama-5c6b7-fghij)"
    assert rows["endpoint:router"]["detail"] == "Ready 1/1 (llama-default-routing-service:443)"
    assert rows["endpoint:weights cache"]["detail"] == "/opt/dlami/nvme: llama-weights-cache Ready, 2/2 nodes"
    assert rows["endpoint:KV path (decode)"]["detail"] == (
        "over EFA: decode-llama-5c6b7-fghij: 'pd_role': 'receiver', NIXL LIBFABRIC")
    assert [r for r in healthy.requests if NAME in r] == []  # not one read of llama-3-3-70b's objects


def test_a_deployment_selector_is_read_whole_expressions_too() -> None:
    """apps/v1 ``spec.selector`` in the list calls' ``labelSelector`` syntax (Kubernetes docs, "Labels and
    Selectors": ``key=value``, ``key in (a,b)``, ``key notin (a)``, ``key``, ``!key``)."""
    from kubernetes.client import V1LabelSelector, V1LabelSelectorRequirement

    from hyperpod_dpd.kube import label_selector

    selector = V1LabelSelector(match_labels={"app": "llama", "b": "2"}, match_expressions=[
        V1LabelSelectorRequirement(key="tier", operator="In", values=["a", "b"]),
        V1LabelSelectorRequirement(key="zone", operator="NotIn", values=["x"]),
        V1LabelSelectorRequirement(key="role", operator="Exists"),
        V1LabelSelectorRequirement(key="old", operator="DoesNotExist")])
    assert label_selector(selector) == "app=llama,b=2,tier in (a,b),zone notin (x),role,!old"


@pytest.mark.parametrize(("command", "args", "model"), [
    (None, ["--model", "/opt/ml/model", "--port", "8000", "--model", "/opt/ml/model/m-r2"], "/opt/ml/model/m-r2"),
    (None, ["--model=/opt/ml/model/m"], "/opt/ml/model/m"),
    (["/bin/sh", "-c", "vllm serve --model '/opt/ml/model/m' --port 8000"], None, "/opt/ml/model/m"),
    (["vllm", "serve"], ["--port", "8000"], ""),
    (["vllm", "serve", "/opt/ml/model/m-r2"], ["--model", "/opt/ml/model/m", "--port", "8000"], "/opt/ml/model/m-r2"),
    (["/bin/sh", "-c", "vllm serve /opt/ml/model/p --model /opt/ml/model/m"], None, "/opt/ml/model/p"),
], ids=["last-wins", "equals", "shell-line", "none", "positional-wins", "positional-in-a-shell-line"])
def test_the_model_path_is_vllms_model_argument(command, args, model) -> None:
    """argparse takes the last ``--model`` (role args come after worker.args: CRD pdSpec); ``vllm serve <model_tag>``
    takes precedence over it (vLLM ``vllm/entrypoints/cli/serve.py``, ``ServeSubcommand.cmd``: "If model is
    specified in CLI (as positional arg), it takes precedence")."""
    from kubernetes.client import V1Container

    from hyperpod_dpd.vllm_args import model_arg

    assert model_arg(V1Container(name="decode-llama", command=command, args=args)) == model


# --- what the skew guard cannot compare is never a match (issue 33 review items 7 and 9) --------------------------


def test_a_role_whose_deployment_is_missing_is_a_warning_and_not_compared(cli, config_file, kubeconfig,
                                                                           healthy) -> None:
    """The operator's Deployment names are [I] (hyperpod_core.names): a role that is not found is said so, never
    taken for "both roles serve one model"."""
    del healthy.deployments[(NAMESPACE, f"decode-{NAME}")]
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    decode = rows["endpoint:decode revision"]
    assert decode["state"] == "warn" and decode["detail"] == (f"Deployment decode-{NAME} not found [I: the operator's "
                                                              "name for it]")
    skew = rows["endpoint:prefill/decode skew"]
    assert skew["state"] == "warn" and skew["detail"].startswith(f"not compared: Deployment decode-{NAME} not found")


def test_pods_whose_model_cannot_be_read_are_not_compared(cli, config_file, kubeconfig, healthy) -> None:
    """Two unreadable command lines are two unknowns, not one model (the guard compared "" with "")."""
    for p in healthy.pods:
        for c in p.get("spec", {}).get("containers", []):
            if "args" in c:
                c["args"] = [a for a in c["args"] if a != MODEL_PATH and a != "--model"]
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    skew = rows["endpoint:prefill/decode skew"]
    assert skew["state"] == "warn"
    unread = "cannot be read from its vLLM command line"
    assert skew["detail"] == (f"not compared: the model of prefill pod prefill-{NAME}-7d9f8-abcde {unread}; the model "
                              f"of decode pod decode-{NAME}-5c6b7-fghij {unread}")


def test_overlapping_selectors_never_mix_the_roles(cli, config_file, kubeconfig, healthy) -> None:
    """Both role Deployments select ``app=<iec>`` only (the operator's selectors are unpublished [I]), and a pod of
    another ReplicaSet carries prefill's labels: the role label (published, AWS DPD guide) and ownership by a
    ReplicaSet of the role's Deployment keep each role's pods its own."""
    from day2_fakes import pod as plain_pod

    for role in ("prefill", "decode"):
        healthy.deployments[(NAMESPACE, f"{role}-{NAME}")]["spec"]["selector"] = {"matchLabels": {"app": NAME}}
    stray = plain_pod(f"prefill-{NAME}-stray-zzzzz", NAMESPACE,
                      {"app": NAME, "inference.sagemaker.aws.amazon.com/dpd-role": "prefill"})
    stray["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "someone-else",
                                             "uid": "uid-x", "controller": True}]
    healthy.pods.append(stray)
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    assert rows["endpoint:prefill pods"]["detail"] == f"Ready 1/1 (prefill-{NAME}-7d9f8-abcde)"
    assert rows["endpoint:decode pods"]["detail"] == f"Ready 1/1 (decode-{NAME}-5c6b7-fghij)"


# --- the applied revision against the synthesized one (issue 33 review item 11) -----------------------------------


def _synthesized(config_file, model: str) -> Any:
    """A DPD manifest where the environment's synth puts it (dist/, hyperpod_core.dist_layout) whose worker.args
    carry ``--model model``."""
    path = DistLayout.of(config_file.with_suffix(".out") / "dist", NAME, "dpd").endpoint_file("dpd")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = endpoint_object()
    doc["spec"]["worker"]["args"] = ["--model", model, "--served-model-name", SERVED_NAME]
    del doc["status"]
    path.write_text(json.dumps(doc), encoding="utf-8")  # YAML is a superset of JSON
    return path


def test_an_applied_revision_other_than_the_synthesized_one_is_flagged(cli, config_file, kubeconfig,
                                                                       healthy) -> None:
    """stage-model and synth made a new revision; the live endpoint still runs the old one. Applying it in place
    changes both roles' pod templates (pods Pending without a spare node per pool), so the row names rollout, which
    picks the safe way."""
    path = _synthesized(config_file, NEW_MODEL)
    row = _rows(_status(cli, config_file, kubeconfig, "--json").out)["endpoint:revision"]
    assert row["state"] == "warn" and not row["blocks_serving"]
    assert row["detail"] == f"applied {MODEL_PATH}; synthesized {NEW_MODEL} ({path})"
    assert row["next_step"].startswith(f"apply the new revision: hyperpod-dpd rollout --config {config_file} "
                                       "(blue/green when a second copy fits")
    _synthesized(config_file, MODEL_PATH)
    same = _rows(_status(cli, config_file, kubeconfig, "--json").out)["endpoint:revision"]
    assert same["state"] == "ok" and same["detail"] == f"{MODEL_PATH}, as synthesized ({path})"


def test_a_full_buffer_while_the_roles_run_two_models_points_at_the_skew(cli, config_file, kubeconfig,
                                                                         healthy) -> None:
    """With different --model values the decoder never reads what prefill pushed and LMCache 0.4.3's PD backend
    never evicts it (pd_backend.py:283): "Failed to allocate memory object" then means skew, not a small buffer."""
    decode = healthy.roll("decode", "8e0a1", 2, model=NEW_MODEL)
    for line in worker_startup("decode"):
        healthy.log(NAMESPACE, decode, f"decode-{NAME}", line)
    healthy.log(NAMESPACE, decode, f"decode-{NAME}", alloc_failed_line())
    rows = _rows(_status(cli, config_file, kubeconfig, "--json").out)
    assert rows["endpoint:prefill/decode skew"]["state"] == "fail"
    kv = rows["endpoint:KV path (decode)"]
    assert kv["state"] == "fail" and "Failed to allocate memory object" in kv["detail"]
    # REV34 defect 11: the fix names the endpoint's folder (hyperpod_core.dist_layout); issue 36: through rollout.
    folder = DistLayout.of(config_file.with_suffix(".out") / "dist", NAME, "dpd").endpoint_dir
    assert kv["next_step"].startswith("put both roles on one revision: replace the endpoint (delete its "
                                      "InferenceEndpointConfig, then hyperpod-dpd rollout applies the synthesized one "
                                      f"({folder}/)")


# --- a fleet: several endpoints on one cluster (issue 34 item 4) ---------------------------------------------------

SMALL = "llama-3-1-8b"  # the second endpoint of config/examples/two-models.yaml


@pytest.fixture
def fleet(healthy: FakeCluster) -> FakeCluster:
    """The healthy cluster with the node of two-models.yaml's third group (``small``, pool ``shared``)."""
    healthy.nodes.append(node("hyperpod-i-0small", "shared"))
    return healthy


def test_a_fleet_shows_each_endpoint_in_a_section_of_its_own(cli, fleet_config, kubeconfig, fleet) -> None:
    """Without --endpoint, status shows the cluster once and then every endpoint of the config, each row carrying
    its endpoint; the 8B's rows are of its own objects (its Deployments' selectors), not the 70B's. Fails before:
    Config.endpoint raised TypeError on a config of several endpoints (a traceback)."""
    fleet.dpd_endpoint(name=SMALL)
    result = _status(cli, fleet_config, kubeconfig, "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["endpoints"] == [{"name": NAME, "namespace": NAMESPACE, "serving": True},
                                   {"name": SMALL, "namespace": NAMESPACE, "serving": True}]
    by_endpoint = {(c["endpoint"], c["name"]): c for c in report["checks"]}
    assert by_endpoint[(NAME, "prefill pods")]["detail"] == f"Ready 1/1 (prefill-{NAME}-7d9f8-abcde)"
    assert by_endpoint[(SMALL, "prefill pods")]["detail"] == f"Ready 1/1 (prefill-{SMALL}-7d9f8-abcde)"
    assert by_endpoint[(SMALL, "router")]["detail"] == f"Ready 1/1 ({SMALL}-{NAMESPACE}-routing-service:443)"
    assert {c["endpoint"] for c in report["checks"] if c["section"] in ("hyperpod", "eks", "nodes")} == {None}
    table = _status(cli, fleet_config, kubeconfig)
    assert table.code == 0, table.err
    assert f"endpoint {NAME} can serve" in table.out and f"endpoint {SMALL} can serve" in table.out
    assert f"endpoint {SMALL}" in table.out.split(f"endpoint {SMALL} can serve")[0]  # its section's rows


def test_a_fleet_endpoint_that_cannot_serve_is_named(cli, fleet_config, kubeconfig, fleet) -> None:
    """One endpoint missing: exit 1, the line names it; the other still can serve."""
    result = _status(cli, fleet_config, kubeconfig, "--json")
    assert result.code == 1
    assert one_line_error(result).startswith(f"error: endpoint {SMALL} cannot serve: {NAMESPACE}/{SMALL} ({SMALL}): "
                                             "InferenceEndpointConfig not found")
    serving = {e["name"]: e["serving"] for e in json.loads(result.out)["endpoints"]}
    assert serving == {NAME: True, SMALL: False}


def test_endpoint_option_shows_that_endpoint_only(cli, fleet_config, kubeconfig, fleet) -> None:
    fleet.dpd_endpoint(name=SMALL)
    result = _status(cli, fleet_config, kubeconfig, "--json", "--endpoint", SMALL)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert [e["name"] for e in report["endpoints"]] == [SMALL]
    assert {c["endpoint"] for c in report["checks"]} == {None, SMALL}


def test_an_unknown_endpoint_is_one_line_naming_the_endpoints(cli, fleet_config, kubeconfig, healthy) -> None:
    result = _status(cli, fleet_config, kubeconfig, "--endpoint", "llama-3-1-70b")
    assert (result.code, result.out) == (2, "")
    assert one_line_error(result) == (f"error: --endpoint must be one of the endpoints of {fleet_config} ({NAME}, "
                                      f"{SMALL}), got 'llama-3-1-70b'")
    assert healthy.requests == []  # refused before anything was read


# --- InferenceEndpointConfigs the config does not hold (REV34 defect 10) --------------------------------------------

PART_OF = "app.kubernetes.io/part-of"  # the label every endpoint manifest carries: the deployment's name


def test_an_endpoint_the_config_does_not_hold_is_flagged_with_the_gpus_its_pods_hold(cli, config_file, kubeconfig,
                                                                                     healthy) -> None:
    """Issue 34 ("renaming the endpoint leaves the old one holding all 16 GPUs"), REV34 defect 10: every
    InferenceEndpointConfig of the cluster (all namespaces) that the config does not hold, by name AND namespace, is
    one warn row that never blocks serving, with the GPUs its pods hold and the command that deletes it. A pod holds
    GPUs once bound to a node (``spec.nodeName``) and until it finishes: its containers' ``nvidia.com/gpu`` limits
    (Kubernetes docs, "Schedule GPUs": GPUs are given in limits). Here: ``old-llama``, renamed away from this
    deployment (its part-of label), prefill bound with 8 GPUs, decode Pending (none); and an endpoint named like ours
    in namespace ``team``, colocated, one pod of 4 GPUs, of no deployment of ours. Fails before: no such rows."""
    healthy.dpd_endpoint(name="old-llama")
    healthy.endpoints[(NAMESPACE, "old-llama")]["metadata"]["labels"] = {PART_OF: "hyperpod-dpd"}
    decode = next(p for p in healthy.pods if p["metadata"]["name"] == "decode-old-llama-5c6b7-fghij")
    del decode["spec"]["nodeName"]
    decode["status"]["phase"] = "Pending"
    other = endpoint_object(name=NAME)
    other["metadata"]["namespace"] = "team"
    del other["spec"]["pdSpec"]
    healthy.endpoints[("team", NAME)] = other
    colocated = pod(f"{NAME}-6b8c9-a", "team", {"app": NAME})
    colocated["spec"] = {"nodeName": "hyperpod-i-0decode", "containers": [
        {"name": NAME, "image": "vllm", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    healthy.pods.append(colocated)
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err  # never blocks serving
    rows = {k: r for k, r in _rows(result.out).items() if k.startswith("other endpoints:")}
    assert list(rows) == [f"other endpoints:{NAMESPACE}/old-llama", f"other endpoints:team/{NAME}"]
    old, team = rows.values()
    assert {(r["state"], r["blocks_serving"], r["endpoint"]) for r in rows.values()} == {("warn", False, None)}
    assert old["facts"] == {"namespace": NAMESPACE, "name": "old-llama", "mode": "dpd", "gpus": 8,
                            "part_of": "hyperpod-dpd"}
    assert old["detail"] == (f"not in {config_file}: DPD, DeploymentComplete, part of this deployment "
                             f"({PART_OF}=hyperpod-dpd); its pods hold 8 GPUs")
    assert old["next_step"] == (f"kubectl delete inferenceendpointconfig old-llama -n {NAMESPACE}   (an endpoint "
                                "removed or renamed in the config keeps running until deleted)")
    assert team["facts"] == {"namespace": "team", "name": NAME, "mode": "colocated", "gpus": 4, "part_of": None}
    assert team["detail"] == (f"not in {config_file}: colocated, DeploymentComplete, not of this deployment (no "
                              f"{PART_OF} label); its pods hold 4 GPUs")
    assert team["next_step"] == f"if nothing serves it any more: kubectl delete inferenceendpointconfig {NAME} -n team"
    table = _status(cli, config_file, kubeconfig)
    assert table.code == 0 and "the endpoint can serve" in table.out
    assert f"kubectl delete inferenceendpointconfig old-llama -n {NAMESPACE}" in table.out


def test_endpoints_that_cannot_be_listed_are_a_warning_only(cli, config_file, kubeconfig, healthy) -> None:
    """RBAC may forbid listing InferenceEndpointConfigs across namespaces: one warn row with the fix of a 403,
    serving unaffected (REV34 defect 10)."""
    healthy.endpoint_list_forbidden = True
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    row = _rows(result.out)["other endpoints:InferenceEndpointConfigs of every namespace"]
    assert (row["state"], row["blocks_serving"]) == ("warn", False)
    assert row["detail"].startswith("listing the InferenceEndpointConfigs of every namespace: Kubernetes API 403 "
                                    "Forbidden: inferenceendpointconfigs.inference.sagemaker.aws.amazon.com is "
                                    "forbidden")
    assert row["next_step"].startswith("check the EKS access entry of your IAM principal")


# --- after a rollout (issue 36): the revision that serves, and a rollout that stopped half-way --------------------


def test_after_a_blue_green_the_rows_are_those_of_the_revision_that_serves(cli, config_file, kubeconfig, healthy
                                                                         ) -> None:
    """``hyperpod-dpd rollout`` replaced the endpoint by revision ``<endpoint>-r1`` (its revision store says so) and
    deleted the endpoint's own InferenceEndpointConfig. Fails before: status read ``<endpoint>`` and found nothing."""
    served = rolled_out(config_file.with_suffix(".out"))
    healthy.endpoints.clear()
    healthy.dpd_endpoint(name=served)
    healthy.alb(healthy.ingresses[0]["status"]["loadBalancer"]["ingress"][0]["hostname"],
                name=f"alb-{served}-{NAMESPACE}")
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    rows = _rows(result.out)
    assert rows["endpoint:state"]["detail"].startswith(f"{served}: DeploymentComplete")
    assert rows["endpoint:prefill pods"]["detail"] == f"Ready 1/1 (prefill-{served}-7d9f8-abcde)"
    assert rows["endpoint:router"]["detail"] == f"Ready 1/1 ({served}-{NAMESPACE}-routing-service:443)"
    assert rows["endpoint:prefill revision"]["facts"]["deployment"] == f"prefill-{served}"
    assert "endpoint:rollout" not in rows  # nothing unfinished
    # the serving revision is the endpoint, not an endpoint the config no longer holds (no "kubectl delete" row)
    assert not [key for key in rows if key.startswith("other endpoints:")], [k for k in rows if "other" in k]


def test_a_rollout_that_stopped_half_way_is_one_row_with_both_ways_on(cli, config_file, kubeconfig, healthy) -> None:
    """Ctrl-C in step 4 of a blue/green (the Service not moved yet): the endpoint still serves its own revision, and
    one row says which rollout stopped where, and how to resume or undo it."""
    from hyperpod_dpd.rollout.executor import start
    from hyperpod_dpd.rollout.store import Record, Revision, RevisionStore

    workdir = config_file.with_suffix(".out")
    source, target = Revision(number=0, name=NAME, manifest={}), Revision(number=1, name=f"{NAME}-r1", manifest={})
    record = start(Record(endpoint=NAME, namespace=NAMESPACE, current=source), kind="blue-green", undo=False,
                   source=source, target=target)
    RevisionStore.of(workdir, NAME).write(record.step_done().step_done().step_done())
    result = _status(cli, config_file, kubeconfig, "--json")
    assert result.code == 0, result.err
    row = _rows(result.out)["endpoint:rollout"]
    assert (row["state"], row["blocks_serving"]) == ("warn", False)
    assert row["detail"] == (f"unfinished blue/green {NAME} -> {NAME}-r1 (revision 1): 3 of 5 steps done; next: point "
                             f"Service {NAMESPACE}/{NAME} at {NAME}-r1")
    again = f"hyperpod-dpd rollout --config {config_file}"
    assert row["next_step"] == f"'{again}' resumes it, '{again} --undo' returns to {NAME}"
    assert _rows(result.out)["endpoint:state"]["detail"].startswith("DeploymentComplete")  # the source serves
