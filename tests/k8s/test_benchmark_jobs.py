"""The ``<endpoint>-benchmark`` chart: suspended genai-bench Jobs, one per run, with a pinned client.

Sources of the expected values: the Kubernetes 1.33 OpenAPI schema (kubernetes-validate, strict); AWS's ML blog
"Disaggregated prefill and decode for LLM inference on SageMaker HyperPod" (2026-07-10) for the router URL
(``http://<deployment>-<namespace>-routing-service.hyperpod-inference-system.svc.cluster.local:443``) and the
benchmark matrix (genai-bench, D(4096,256), concurrency 8/16/32); pip's hash-checking mode for the lock format.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from hyperpod_core import pins
from hyperpod_core.config import BENCHMARK_PATH_MARGIN, load_config, parse_config, scenario_token_range

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "k8s" / "hyperpod_k8s" / "benchmark" / "genai-bench.lock.txt"
RUNNER = REPO / "core" / "hyperpod_core" / "bench_runner.py"
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
    b = config.benchmark
    assert len(jobs) == 2 * len(config.benchmark_scenarios()) * len(b.concurrency)
    cells = {(_env(j)["BENCH_MODE"], _env(j)["BENCH_SCENARIO"], int(_env(j)["BENCH_CONCURRENCY"])) for j in jobs}
    assert cells == {(m, s.name, n) for m in ("dpd", "colocated") for s in config.benchmark_scenarios()
                     for n in b.concurrency}
    for j in jobs:
        spec = j["spec"]
        assert spec["suspend"] is True, "applying the file must start nothing"
        assert spec["backoffLimit"] == 0, "a failed run is reported, not silently retried"
        assert spec["activeDeadlineSeconds"] > b.max_time_per_run_minutes * 60
        assert len(j["metadata"]["name"]) <= 63
    # DPD runs come first, so that bench switches the endpoint once.
    modes = [_env(j)["BENCH_MODE"] for j in jobs]
    assert modes == sorted(modes, key=lambda m: m != "dpd")


def test_default_matrix_is_aws_reference_plus_the_four_checklist_shapes():
    """AWS's run: D(4096,256) at concurrency 8/16/32; plus short/long input x short/long output."""
    config = load_config(CASES["default"])
    assert config.benchmark.concurrency == (8, 16, 32)
    traffic = {s.name: s.traffic for s in config.benchmark_scenarios()}
    assert traffic["aws-reference"] == "D(4096,256)"
    shapes = {(scenario_token_range(t)[0] > 4096, scenario_token_range(t)[2] >= 256)
              for n, t in traffic.items() if n != "aws-reference"}
    assert shapes == {(True, True), (True, False), (False, True), (False, False)}


@pytest.mark.parametrize("case", list(CASES))
def test_runs_record_threshold_strategy_and_take_the_path_they_claim(synthesized, case):
    config = load_config(CASES[case])
    e = config.endpoint
    for j in _jobs(synthesized, case):
        env = _env(j)
        assert env["BENCH_ROUTING_THRESHOLD"] == str(e.routing_threshold_tokens)
        assert env["BENCH_ROUTING_STRATEGY"] == e.routing_strategy
        low, high, _ = scenario_token_range(env["BENCH_TRAFFIC"])
        if env["BENCH_PATH"] == "dpd":  # well above the threshold: the router's estimate cannot flip it
            assert low >= e.routing_threshold_tokens * (1 + BENCHMARK_PATH_MARGIN)
        if env["BENCH_PATH"] == "direct":
            assert high <= e.routing_threshold_tokens * (1 - BENCHMARK_PATH_MARGIN)
        assert env["BENCH_API_BASE"] == (
            f"http://{e.name}-{e.namespace}-routing-service.hyperpod-inference-system.svc.cluster.local:443")
        assert env["BENCH_API_MODEL"] == "/opt/ml/model"
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


@pytest.mark.skipif(not (BENCH_VENV / "bin" / "python").exists(), reason="scripts/setup creates .bench-venv")
def test_lock_is_closed_under_dependencies():
    """scripts/setup installed the lock with --no-deps; pip check proves nothing it needs is missing."""
    out = subprocess.run([str(BENCH_VENV / "bin" / "python"), "-m", "pip", "check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_load_balancer_target_mounts_the_endpoint_pem_as_requests_ca_bundle(tmp_path):
    import kubernetes_validate

    from hyperpod_core.inputs import resolve_inputs
    from hyperpod_k8s.benchmark.manifests import benchmark_manifests

    data = yaml.safe_load(CASES["default"].read_text(encoding="utf-8"))
    data["benchmark"] = {"target": "load_balancer", "load_balancer_url": "https://dpd.example.com",
                         "ca_secret_name": "llama-ca", "results_s3_uri": "s3://my-results/bench/"}
    config = parse_config(data)
    docs = benchmark_manifests(config, resolve_inputs(config, None))
    job = next(d for d in docs if d["kind"] == "Job")
    kubernetes_validate.validate(job, "1.33", strict=True)
    env = _env(job)
    assert env["BENCH_API_BASE"] == "https://dpd.example.com"
    assert env["REQUESTS_CA_BUNDLE"] == "/etc/bench-ca/ca.pem"
    assert env["BENCH_RESULTS_S3"] == "s3://my-results/bench"
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "endpoint-ca", "secret": {"secretName": "llama-ca"}} in volumes
