"""The ``<endpoint>-benchmark`` chart: suspended genai-bench Jobs, one per run, with a pinned client.

Sources of the expected values: the Kubernetes 1.33 OpenAPI schema (kubernetes-validate, strict); AWS's ML blog
"Disaggregated prefill and decode for LLM inference on SageMaker HyperPod" (2026-07-10) for the router URL
(``http://<deployment>-<namespace>-routing-service.hyperpod-inference-system.svc.cluster.local:443``) and the
benchmark matrix (genai-bench, D(4096,256), concurrency 8/16/32); pip's hash-checking mode for the lock format.
"""

from __future__ import annotations

import copy
import itertools
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from hyperpod_core import pins
from hyperpod_core.config import BENCHMARK_PATH_MARGIN, load_config, parse_config, scenario_token_range

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "k8s" / "hyperpod_k8s" / "benchmark" / "genai-bench.lock.txt"
RUNNER = REPO / "runtime" / "hyperpod_runtime" / "bench_runner.py"
BENCH_VENV = REPO / ".bench-venv"
CASES = {"default": REPO / "config" / "default.yaml",
         "p5en-two-prefill": REPO / "config" / "examples" / "p5en-two-prefill.yaml"}


def _bench_docs(synthesized, case):
    return synthesized[case].docs("-benchmark.k8s.yaml")


def _jobs(synthesized, case):
    return [d for d in _bench_docs(synthesized, case) if d["kind"] == "Job"]


def _env(job) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("case", list(CASES))
def test_every_benchmark_object_validates_against_kubernetes_1_33(synthesized, case):
    import kubernetes_validate

    docs = _bench_docs(synthesized, case)
    assert [d["kind"] for d in docs[:2]] == ["ConfigMap", "ServiceAccount"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.33", strict=True)


@pytest.mark.parametrize("case", list(CASES))
def test_one_suspended_job_per_run_of_the_matrix(synthesized, case):
    config = load_config(CASES[case])
    jobs = _jobs(synthesized, case)
    b, endpoint = config.benchmark, config.spec()
    expected = {(m, s.experiment, s.name, n) for m in ("dpd", "colocated") for s in endpoint.benchmark_scenarios()
                for n in endpoint.benchmark_concurrency(s)}
    assert len(jobs) == len(expected)
    cells = {(_env(j)["BENCH_MODE"], _env(j)["BENCH_EXPERIMENT"], _env(j)["BENCH_SCENARIO"],
              int(_env(j)["BENCH_CONCURRENCY"])) for j in jobs}
    assert cells == expected
    for j in jobs:
        spec = j["spec"]
        assert spec["suspend"] is True, "applying the file must start nothing"
        assert spec["backoffLimit"] == 0, "a failed run is reported, not silently retried"
        assert spec["activeDeadlineSeconds"] > b.max_time_per_run_minutes * 60
        assert len(j["metadata"]["name"]) <= 63
    # Per experiment (aws-reference first) DPD runs come first, so that bench switches the endpoint once per
    # experiment and mode.
    groups = [(_env(j)["BENCH_EXPERIMENT"], _env(j)["BENCH_MODE"]) for j in jobs]
    order = [("aws-reference", "dpd"), ("aws-reference", "colocated"), ("equal-gpu", "dpd"), ("equal-gpu", "colocated")]
    assert groups == sorted(groups, key=order.index)
    assert all(j["metadata"]["labels"]["hyperpod-dpd/benchmark-experiment"] == _env(j)["BENCH_EXPERIMENT"]
               for j in jobs)


def test_the_reference_experiment_runs_at_aws_concurrency_whatever_the_matrix_says():
    """AWS published D(4096,256) at 8, 16 and 32 (blog, "Benchmarking performance"); benchmark.concurrency
    sets the equal-GPU experiment's levels only."""
    data = yaml.safe_load(CASES["default"].read_text(encoding="utf-8"))
    data["benchmark"] = {"concurrency": [4]}
    config = parse_config(data)
    from hyperpod_k8s.benchmark.props import benchmark_runs

    levels = {(r.experiment, r.concurrency) for r in benchmark_runs(config.spec())}
    assert levels == {("aws-reference", 8), ("aws-reference", 16), ("aws-reference", 32), ("equal-gpu", 4)}
    data["benchmark"]["experiments"] = ["equal-gpu"]
    assert {r.experiment for r in benchmark_runs(parse_config(data).spec())} == {"equal-gpu"}


@pytest.mark.parametrize("case", list(CASES))
def test_jobs_run_only_off_the_gpu_nodes_with_requests_a_system_node_holds(synthesized, case):
    """Every HyperPod node carries hyperpod-dpd/pool (hyperpod_stack: the instance groups' Kubernetes labels) and
    none is tainted by default (lifecycle-facts.md, "Benchmark fairness"): DoesNotExist keeps the client off them.
    The requests fit an m7i.xlarge system node: 4 vCPU and 16 GiB (EC2 general purpose instance specs), minus
    kubeReserved (nodeadm: 80m and 11 MiB x 58 pods + 255 MiB; maxPods 58 from eni-max-pods) and the eviction
    threshold, leaving at least half of it to the cluster's own pods."""
    from hyperpod_core.fit import EVICTION_HARD_MEMORY_MIB, kube_reserved_cpu_millis, kube_reserved_memory_mib

    cpu_millis = 4000 - kube_reserved_cpu_millis(4)
    memory_mib = 16 * 1024 - kube_reserved_memory_mib(58) - EVICTION_HARD_MEMORY_MIB
    for j in _jobs(synthesized, case):
        pod = j["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": "hyperpod-dpd/pool", "operator": "DoesNotExist"}]}]
        requests = pod["containers"][0]["resources"]["requests"]
        assert int(requests["cpu"]) * 1000 <= cpu_millis / 2
        assert int(requests["memory"].removesuffix("Mi")) <= memory_mib / 2  # cdk8s-plus writes memory in Mi


def test_default_matrix_is_aws_reference_plus_the_four_checklist_shapes():
    """AWS's run: D(4096,256) at concurrency 8/16/32; plus short/long input x short/long output."""
    config = load_config(CASES["default"])
    assert config.benchmark.concurrency == (8, 16, 32)
    traffic = {s.name: s.traffic for s in config.spec().benchmark_scenarios()}
    assert traffic["aws-reference"] == "D(4096,256)"
    shapes = {(scenario_token_range(t)[0] > 4096, scenario_token_range(t)[2] >= 256)
              for n, t in traffic.items() if n != "aws-reference"}
    assert shapes == {(True, True), (True, False), (False, True), (False, False)}


@pytest.mark.parametrize("case", list(CASES))
def test_runs_record_threshold_strategy_and_take_the_path_they_claim(synthesized, case):
    config = load_config(CASES[case])
    e = config.spec().endpoint
    for j in _jobs(synthesized, case):
        env = _env(j)
        assert env["BENCH_ROUTING_THRESHOLD"] == str(e.routing_threshold_tokens)
        # The colocated router spreads the load over its replicas; DPD keeps the configured strategy.
        assert env["BENCH_ROUTING_STRATEGY"] == (e.routing_strategy if env["BENCH_MODE"] == "dpd" else "roundrobin")
        low, high, _ = scenario_token_range(env["BENCH_TRAFFIC"])
        if env["BENCH_PATH"] == "dpd":  # well above the threshold: the router's estimate cannot flip it
            assert low >= e.routing_threshold_tokens * (1 + BENCHMARK_PATH_MARGIN)
        if env["BENCH_PATH"] == "direct":
            assert high <= e.routing_threshold_tokens * (1 - BENCHMARK_PATH_MARGIN)
        assert env["BENCH_API_BASE"] == (
            f"http://{e.name}-{e.namespace}-routing-service.hyperpod-inference-system.svc.cluster.local:443")
        assert env["BENCH_API_MODEL"] == config.spec().model.name  # the served name (test_model_identity.py)
        assert env["ENABLE_UI"] == "false"
        assert "BENCH_RESULTS_S3" not in env, "no results_s3_uri: results go to the pod log"


@pytest.mark.parametrize("case", list(CASES))
def test_client_is_pinned_by_digest_and_installed_only_from_the_hashed_lock(synthesized, case):
    cm = _bench_docs(synthesized, case)[0]
    assert cm["data"]["genai-bench.lock.txt"] == LOCK.read_text(encoding="utf-8")
    assert cm["data"]["runner.py"] == RUNNER.read_text(encoding="utf-8")
    for j in _jobs(synthesized, case):
        c = j["spec"]["template"]["spec"]["containers"][0]
        assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", c["image"])
        script = c["command"][-1]
        installs = re.findall(r"pip install[^;]*", script)
        assert installs == ["pip install --quiet --no-cache-dir --require-hashes --no-deps "
                            "-r /bench/genai-bench.lock.txt"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True


def test_lock_pins_every_package_with_a_hash():
    """pip's hash-checking mode needs ``==`` on every line and a sha256 per requirement."""
    lines = [ln for ln in LOCK.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
    assert len(lines) > 50
    for ln in lines:
        assert re.fullmatch(r"[a-z0-9._-]+==[^\s]+ --hash=sha256:[0-9a-f]{64}  # \S+\.whl", ln), ln
    assert f"genai-bench=={pins.GENAI_BENCH_VERSION} " in LOCK.read_text(encoding="utf-8")


@pytest.mark.skipif(not (BENCH_VENV / "bin" / "python").exists(), reason="scripts/setup --tests creates .bench-venv")
def test_lock_is_closed_under_dependencies():
    """scripts/setup installed the lock with --no-deps; pip check proves nothing it needs is missing."""
    out = subprocess.run([str(BENCH_VENV / "bin" / "python"), "-m", "pip", "check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_load_balancer_target_mounts_the_endpoint_pem_as_requests_ca_bundle():
    """The chart alone, in a bare cdk8s app, from the props of a load-balancer config."""
    import cdk8s
    import kubernetes_validate
    from tests.k8s.endpoint_props import props_of

    from hyperpod_k8s.benchmark.benchmark_chart import BenchmarkChart
    from hyperpod_k8s.benchmark.props import benchmark_props

    data = yaml.safe_load(CASES["default"].read_text(encoding="utf-8"))
    data["benchmark"] = {"target": "load_balancer", "load_balancer_url": "https://dpd.example.com",
                         "ca_secret_name": "llama-ca", "results_s3_uri": "s3://my-results/bench/"}
    config = parse_config(data)
    chart = BenchmarkChart(cdk8s.App(), "bench", props=benchmark_props(config.spec(), props_of(config)))
    job = next(d for d in chart.to_json() if d["kind"] == "Job")
    kubernetes_validate.validate(job, "1.33", strict=True)
    env = _env(job)
    assert env["BENCH_API_BASE"] == "https://dpd.example.com"
    assert env["REQUESTS_CA_BUNDLE"] == "/etc/bench-ca/ca.pem"
    assert env["BENCH_RESULTS_S3"] == "s3://my-results/bench/llama-3-3-70b"  # the endpoint's own folder
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "endpoint-ca", "secret": {"secretName": "llama-ca"}} in volumes
    mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "endpoint-ca", "mountPath": "/etc/bench-ca", "readOnly": True} in mounts


@pytest.mark.parametrize("case", list(CASES))
def test_each_experiment_runs_against_its_own_layout(synthesized, case):
    """aws-reference: AWS's 1 prefill + 1 decode replica against ONE colocated node (blog, "Benchmarking
    performance"), without autoscaling; equal-gpu: the configured DPD endpoint against colocated replicas on as
    many GPUs. Both colocated routers spread the load (roundrobin); BENCH_GPUS says what each run held."""
    config = load_config(CASES[case])
    e, s = config.spec().endpoint, synthesized[case]
    ref_dpd, ref_col = s.one("-reference-1p1d.k8s.yaml"), s.one("-reference-1node.k8s.yaml")
    dpd, col = s.one("-dpd.k8s.yaml"), s.one("-colocated.k8s.yaml")
    pd = ref_dpd["spec"]["pdSpec"]
    assert (pd["prefillSpec"]["replicas"], pd["decodingSpec"]["replicas"]) == (1, 1)
    assert "autoScalingSpec" not in pd
    assert ref_col["spec"]["replicas"] == 1 and "pdSpec" not in ref_col["spec"]
    assert {m["metadata"]["name"] for m in (ref_dpd, ref_col, dpd, col)} == {e.name}, "same name: a replace"
    for manifest in (col, ref_col):
        assert manifest["spec"]["intelligentRoutingSpec"]["routingStrategy"] == "roundrobin"
    assert dpd["spec"]["intelligentRoutingSpec"]["routingStrategy"] == e.routing_strategy
    gpus = {(_env(j)["BENCH_EXPERIMENT"], _env(j)["BENCH_MODE"]): int(_env(j)["BENCH_GPUS"])
            for j in _jobs(synthesized, case)}
    assert gpus[("aws-reference", "dpd")] == e.prefill.gpus + e.decode.gpus
    assert gpus[("aws-reference", "colocated")] == e.tensor_parallel_size
    assert gpus[("equal-gpu", "colocated")] == gpus[("equal-gpu", "dpd")] == (
        e.prefill.replicas * e.prefill.gpus + e.decode.replicas * e.decode.gpus)
    assert col["spec"]["replicas"] * e.tensor_parallel_size == gpus[("equal-gpu", "dpd")]




# --- a fair benchmark: pinned replicas, the model's own flags on the baseline (issue 33, item 4) ------------------


def test_an_autoscaled_config_benchmarks_equal_gpus(synthesized):
    """p5en-two-prefill autoscales prefill between 1 and 2 replicas; KEDA would drop it to 1 under the benchmark's
    light load while every run records the configured 24 GPUs (review-4, defect 3). The equal-gpu DPD runs go
    against the layout ``bench`` applies for them, which must run exactly the replicas the Jobs record."""
    from hyperpod_core.dist_layout import DistLayout

    config = load_config(CASES["p5en-two-prefill"])
    e, s = config.spec().endpoint, synthesized["p5en-two-prefill"]
    configured = s.one("-dpd.k8s.yaml")["spec"]["pdSpec"]
    assert configured["autoScalingSpec"]["prefillAutoScaling"]["minReplicaCount"] == 1  # the premise
    from hyperpod_dpd.commands.bench import _manifests

    applied = _manifests(DistLayout.of(Path("dist"), e.name, e.apply))[("equal-gpu", "dpd")].name
    pd = s.one(applied)["spec"]["pdSpec"]
    assert "autoScalingSpec" not in pd, "the benchmark's DPD layout must not autoscale"
    assert (pd["prefillSpec"]["replicas"], pd["decodingSpec"]["replicas"]) == (e.prefill.replicas, e.decode.replicas)
    dpd_gpus = sum(pd[r]["replicas"] * pd[r]["resources"]["limits"]["nvidia.com/gpu"]
                   for r in ("prefillSpec", "decodingSpec"))
    colocated = s.one("-colocated.k8s.yaml")["spec"]
    colocated_gpus = colocated["replicas"] * colocated["worker"]["resources"]["limits"]["nvidia.com/gpu"]
    recorded = {(_env(j)["BENCH_MODE"], int(_env(j)["BENCH_GPUS"])) for j in _jobs(synthesized, "p5en-two-prefill")
                if _env(j)["BENCH_EXPERIMENT"] == "equal-gpu"}
    assert recorded == {("dpd", dpd_gpus), ("colocated", colocated_gpus)} and dpd_gpus == colocated_gpus == 24


def _last(args: list[str], flag: str) -> str | None:
    values = [v for a, v in itertools.pairwise(args) if a == flag]
    values += [a.partition("=")[2] for a in args if a.startswith(flag + "=")]
    return values[-1] if values else None


@pytest.mark.parametrize(("role_flags", "flag"), [
    (["--gpu-memory-utilization", "0.6"], "--gpu-memory-utilization"),
    (["--gpu-memory-utilization=0.6"], "--gpu-memory-utilization"),
    (["--kv-cache-memory-bytes", "30000000000"], "--kv-cache-memory-bytes"),
])
def test_the_colocated_baseline_runs_its_own_memory_flags_not_decodes(default_config_dict, role_flags, flag):
    """Decode's own memory flag makes room for the PD buffer (docs/endpoint.md, GPU memory); the colocated baseline
    has no buffer and never runs it (review-4, defect 4), with decode's batch size and its other flags. Its
    utilization is its own: the model's 0.75 plus the 8 GiB buffer's share of an H100 (p5.48xlarge, 8 x H100 80 GB:
    81,559 MiB = 79.6 GiB as its driver reports it, NVIDIA/nccl#1264), 0.75 + 8/79.6 = 0.85."""
    from tests.k8s.endpoint_props import props_of

    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["decode"]["extra_args"] = [*role_flags, "--enable-chunked-prefill"]
    config = parse_config(data)
    p = props_of(config)
    decode, colocated = [*p.worker_args, *p.decode.args], [*p.worker_args, *p.colocated_args]
    assert _last(decode, flag) is not None  # DPD's decoder keeps its own
    assert _last(colocated, "--kv-cache-memory-bytes") is None
    assert _last(colocated, "--gpu-memory-utilization") == "0.85"
    assert _last(colocated, "--max-num-seqs") == str(config.spec().endpoint.decode.max_num_seqs)
    assert "--enable-chunked-prefill" in colocated


@pytest.mark.parametrize(("endpoint_utilization", "role_utilization", "buffer_gib", "expected"), [
    # docs/endpoint.md's main remedy for a 32 GiB buffer: the endpoint-level value lowered to 0.56 (the GPU-memory
    # rule's limit on an H100's 79.6 GiB: 0.56 x 79.6 + 32 + 3 <= 79.6). The baseline gets the buffer's share back:
    # 0.56 + 32/79.6 = 0.96.
    (0.56, None, 32, "0.96"),
    # Both roles lowered on their own, the endpoint left high: 0.9 + 32/79.6 = 1.3 would not fit; the baseline gets
    # what the rule allows without a buffer, the GPU less the 3 GiB margin: floor((79.6 - 3) / 79.6, 2) = 0.96.
    (0.9, "0.55", 32, "0.96"),
    # The default: 0.75 + 8/79.6.
    (0.75, None, 8, "0.85"),
])
def test_the_colocated_baseline_gets_back_the_memory_the_pd_buffer_took(default_config_dict, endpoint_utilization,
                                                                       role_utilization, buffer_gib, expected):
    """A global ``gpu_memory_utilization`` lowered to make room for a larger PD buffer must not shrink the colocated
    baseline's KV cache, which has no buffer (the fourth review's defect 4, in its global-lowered form); the value
    each engine ran with is recorded in every run's ``bench-run.json``."""
    from tests.k8s.endpoint_props import props_of

    from hyperpod_k8s.benchmark.props import gpu_memory_utilization
    from hyperpod_runtime import bench_runner

    data = copy.deepcopy(default_config_dict)
    e = data["endpoint"]
    e.update(gpu_memory_utilization=endpoint_utilization, pd_buffer_size_bytes=buffer_gib << 30)
    if role_utilization is not None:
        for role in ("prefill", "decode"):
            e[role]["extra_args"] = [*e[role].get("extra_args", []), "--gpu-memory-utilization", role_utilization]
    config = parse_config(data)  # the GPU-memory rule accepts the DPD roles
    p = props_of(config)
    assert _last([*p.worker_args, *p.colocated_args], "--gpu-memory-utilization") == expected
    role = role_utilization or f"{endpoint_utilization:g}"
    spec = config.spec()
    assert bench_runner._utilizations(gpu_memory_utilization(spec, "colocated")) == {"colocated": float(expected)}
    assert bench_runner._utilizations(gpu_memory_utilization(spec, "dpd")) == {"prefill": float(role),
                                                                               "decode": float(role)}
