"""What the DPD and colocated manifests say, for the default config and the p5en two-prefill example."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def default(synthesized):
    s = synthesized["default"]
    return s, s.one("-dpd.k8s.yaml"), s.one("-colocated.k8s.yaml")


@pytest.fixture(scope="module")
def p5en(synthesized):
    s = synthesized["p5en-two-prefill"]
    return s, s.one("-dpd.k8s.yaml"), s.one("-colocated.k8s.yaml")


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_synth_writes_one_file_per_mode(default, p5en):
    def endpoint_files(s) -> list[str]:
        return sorted(f for f in s.files if f.endswith(("-dpd.k8s.yaml", "-colocated.k8s.yaml")))

    assert endpoint_files(default[0]) == ["llama-3-3-70b-colocated.k8s.yaml", "llama-3-3-70b-dpd.k8s.yaml"]
    assert endpoint_files(p5en[0]) == ["llama-3-3-70b-p5en-colocated.k8s.yaml", "llama-3-3-70b-p5en-dpd.k8s.yaml"]
    assert "wrote " in default[0].stdout


def test_dpd_endpoint_is_the_aws_reference_deployment(default):
    _, dpd, _ = default
    assert dpd["apiVersion"] == "inference.sagemaker.aws.amazon.com/v1"
    spec = dpd["spec"]
    assert spec["instanceType"] == "ml.p5.48xlarge"
    assert spec["invocationEndpoint"] == "v1/chat/completions"
    assert spec["loadBalancer"]["healthCheckPath"] == "/health"  # idleTimeoutSeconds: test_endpoint_cold_start.py
    assert spec["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "prefixaware"}
    assert spec["kvCacheSpec"]["enableL1Cache"] is True
    assert spec["metrics"]["modelMetrics"]["port"] == spec["worker"]["modelInvocationPort"]["containerPort"] == 8000
    args = spec["worker"]["args"]
    assert _flag(args, "--tensor-parallel-size") == "8"
    assert _flag(args, "--max-model-len") == "16384"
    assert _flag(args, "--gpu-memory-utilization") == "0.75"
    # The weights' mount path is vLLM's --model and carries the model and its revision (test_model_identity.py).
    assert spec["worker"]["modelVolumeMount"] == {"name": "model-weights", "mountPath": _flag(args, "--model")}
    assert spec["pdSpec"]["routingThreshold"] == 4096


def test_dpd_environment_is_set_for_both_roles(default):
    env = {e["name"]: e["value"] for e in default[1]["spec"]["worker"]["environmentVariables"]}
    assert env == {"PD_BUFFER_SIZE": "8589934592", "LMCACHE_SAVE_DECODE_CACHE": "False", "PYTHONHASHSEED": "0",
                   "PROMETHEUS_MULTIPROC_DIR": "/tmp"}


def test_roles_get_their_own_flags_gpus_and_node_pool(default):
    pd = default[1]["spec"]["pdSpec"]
    prefill, decode = pd["prefillSpec"], pd["decodingSpec"]
    assert "--enforce-eager" in prefill["args"] and "--enforce-eager" not in decode["args"]
    assert _flag(prefill["args"], "--max-num-seqs") == "16"
    assert _flag(decode["args"], "--max-num-seqs") == "32"
    for role, pool in ((prefill, "prefill"), (decode, "decode")):
        assert role["resources"]["limits"]["nvidia.com/gpu"] == 8
        assert role["resources"]["requests"]["nvidia.com/gpu"] == 8
        assert role["nodeSelector"] == {"hyperpod-dpd/pool": pool}
    assert pd["topologySpec"] == {"sameAZ": True}  # no AZ name without an outputs file


def test_model_comes_from_s3_with_a_placeholder_bucket_until_cdk_deploy(default):
    source = default[1]["spec"]["modelSourceConfig"]
    assert source["modelSourceType"] == "s3"
    # The weights of a revision sit under their own prefix: unknown until stage-model records one.
    assert source["modelLocation"] == "models/Llama-3.3-70B-Instruct/UNRESOLVED-ModelRevision"
    assert source["s3Storage"] == {"bucketName": "UNRESOLVED-ModelBucketName", "region": "us-west-2"}
    assert "PLACEHOLDER" in default[0].stderr


def test_autoscaling_is_off_by_default(default):
    assert "autoScalingSpec" not in default[1]["spec"]["pdSpec"]


def test_per_pool_autoscaling_scales_prefill_on_queue_and_decode_on_kv_cache(p5en):
    scaling = p5en[1]["spec"]["pdSpec"]["autoScalingSpec"]
    prefill, decode = scaling["prefillAutoScaling"], scaling["decodingAutoScaling"]
    workspace = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef"
    assert prefill["prometheusTrigger"]["query"].startswith("sum(vllm:num_requests_waiting{")
    assert 'pod_name=~"prefill-llama-3-3-70b-p5en-[a-z0-9]+-[a-z0-9]+"' in prefill["prometheusTrigger"]["query"]
    assert prefill["prometheusTrigger"]["metricType"] == "Average"
    assert decode["prometheusTrigger"]["query"].startswith("max(vllm:kv_cache_usage_perc{")
    assert decode["prometheusTrigger"]["metricType"] == "Value"
    assert decode["prometheusTrigger"]["targetValue"] == 0.8
    for role in (prefill, decode):
        assert role["prometheusTrigger"]["serverAddress"] == workspace  # trailing '/' of the output dropped
    assert (prefill["minReplicaCount"], prefill["maxReplicaCount"]) == (1, 2)
    assert decode["maxReplicaCount"] == 1  # operator v3.2: one decoder
    assert prefill["scaleDownStabilizationTime"] > prefill["scaleUpStabilizationTime"]


def test_outputs_file_fills_bucket_and_availability_zone(p5en):
    s, dpd, colocated = p5en
    for doc in (dpd, colocated):
        assert doc["spec"]["modelSourceConfig"]["s3Storage"]["bucketName"] == (
            "hyperpod-dpd-p5en-models-123456789012-us-west-2")
    assert dpd["spec"]["pdSpec"]["topologySpec"] == {"sameAZ": True, "availabilityZone": "us-west-2b"}
    assert dpd["metadata"]["annotations"]["hyperpod-dpd/availability-zone-id"] == "usw2-az2"
    assert "hyperpod-dpd-p5en-platform.ModelBucketName" in s.stderr
    assert "PLACEHOLDER" not in s.stderr


@pytest.mark.parametrize("case", ["default", "p5en"])
def test_both_manifests_tag_what_the_operator_creates_with_this_deployment(request, case):
    """``spec.tags`` (CRD v3.3: "the tags to be added to the Sagemaker Endpoint") names the deployment and its
    EKS cluster, the
    tags the endpoint janitor and sweep delete by. The ARN comes from the outputs file (p5en); without one and
    without an account in the config it is a placeholder the synth log says so (default)."""
    s, dpd, colocated = request.getfixturevalue(case)
    expected = {"default": [{"name": "deployment", "value": "hyperpod-dpd"},
                            {"name": "eks-cluster-arn", "value": "UNRESOLVED-EksClusterArn"}],
                "p5en": [{"name": "deployment", "value": "hyperpod-dpd-p5en"},
                         {"name": "eks-cluster-arn",
                          "value": "arn:aws:eks:us-west-2:123456789012:cluster/hyperpod-dpd-p5en-eks"}]}[case]
    assert dpd["spec"]["tags"] == colocated["spec"]["tags"] == expected
    arn_line = next(line for line in s.stderr.splitlines() if line.startswith("input eks_cluster_arn"))
    assert ("PLACEHOLDER" in arn_line) == (case == "default"), arn_line


@pytest.mark.parametrize("case", ["default", "p5en"])
def test_colocated_baseline_matches_dpd_except_pdspec(request, case):
    _, dpd, colocated = request.getfixturevalue(case)
    assert colocated["metadata"]["name"] == dpd["metadata"]["name"]  # applying it is the rollback
    assert colocated["metadata"]["labels"]["hyperpod-dpd/mode"] == "colocated"
    assert "pdSpec" not in colocated["spec"]
    for key in ("modelName", "modelSourceConfig", "invocationEndpoint", "kvCacheSpec", "metrics", "loadBalancer"):
        assert colocated["spec"][key] == dpd["spec"][key], key
    # Its node affinity instead of instanceType (the CRD: "mutually exclusive with instanceType"): nodes of the DPD
    # endpoint's instance type in the pools its roles select (Kubernetes' well-known instance-type label).
    assert "instanceType" not in colocated["spec"]
    pools = [dpd["spec"]["pdSpec"][r]["nodeSelector"]["hyperpod-dpd/pool"] for r in ("prefillSpec", "decodingSpec")]
    assert colocated["spec"]["nodeAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [dpd["spec"]["instanceType"]]},
            {"key": "hyperpod-dpd/pool", "operator": "In", "values": pools}]}]}}
    # The colocated router spreads requests over its replicas (a fair benchmark baseline); otherwise the same.
    assert colocated["spec"]["intelligentRoutingSpec"] == {**dpd["spec"]["intelligentRoutingSpec"],
                                                          "routingStrategy": "roundrobin"}
    shared = dpd["spec"]["worker"]
    base = colocated["spec"]["worker"]
    assert base["image"] == shared["image"]
    assert base["args"][: len(shared["args"])] == shared["args"]
    assert {e["name"] for e in base["environmentVariables"]} == {"PYTHONHASHSEED", "PROMETHEUS_MULTIPROC_DIR"}
    pd = dpd["spec"]["pdSpec"]
    dpd_gpus = sum(pd[r]["replicas"] * pd[r]["resources"]["limits"]["nvidia.com/gpu"]
                   for r in ("prefillSpec", "decodingSpec"))
    assert colocated["spec"]["replicas"] * base["resources"]["limits"]["nvidia.com/gpu"] == dpd_gpus


def test_p5en_example_runs_two_prefillers_with_roundrobin(p5en):
    spec = p5en[1]["spec"]
    assert spec["instanceType"] == "ml.p5en.48xlarge"
    assert spec["pdSpec"]["prefillSpec"]["replicas"] == 2
    assert spec["intelligentRoutingSpec"]["routingStrategy"] == "roundrobin"
    assert p5en[2]["spec"]["replicas"] == 3


def test_synth_reports_where_each_value_came_from(default):
    lines = [line for line in default[0].stderr.splitlines() if line.startswith("input ")]
    assert [line.split(" = ")[0] for line in lines] == [
        "input model_bucket_name", "input region", "input amp_workspace_endpoint", "input gpu_availability_zone",
        "input inference_execution_role_arn", "input keda_role_arn", "input eks_cluster_arn", "input model_revision"]
    assert "input region = us-west-2 (config: region)" in lines
