"""``hyperpod-dpd bench`` against a local fake Kubernetes API server (tests/cli/fake_kube.py).

The manifests are the real synthesized ones (``python -m hyperpod_k8s.main``). Each fake Job "prints" what
the runner prints (``HYPERPOD-BENCH-FILE`` lines) with result files in genai-bench's run-file format
(``genai_bench/metrics/aggregated_metrics_collector.py`` ``save``; field names from ``metrics/metrics.py``).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_kube import FakeKube

REPO = Path(__file__).resolve().parents[2]


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def genai_files(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The files one runner writes for one cell (numbers arbitrary; the format is genai-bench's)."""
    n, dpd = int(env["BENCH_CONCURRENCY"]), env["BENCH_MODE"] == "dpd"
    tpot = 0.020 if dpd else 0.020 + 0.001 * n

    def stat(v: float) -> dict[str, float]:
        return {"min": v, "max": v, "mean": v, "stddev": 0.0, "sum": v, "p25": v, "p50": v, "p75": v, "p90": v,
                "p95": v, "p99": v}

    run = {"aggregated_metrics": {
        "scenario": env["BENCH_TRAFFIC"], "num_concurrency": n, "batch_size": 1, "iteration_type": "num_concurrency",
        "run_duration": 60.0, "mean_output_throughput_tokens_per_s": n / tpot,
        "mean_input_throughput_tokens_per_s": 1.0, "mean_total_tokens_throughput_tokens_per_s": 1.0,
        "requests_per_second": 1.0, "error_codes_frequency": {}, "error_rate": 0.0, "num_error_requests": 0,
        "num_completed_requests": 10, "num_requests": 10,
        "stats": {"ttft": stat(0.5 if dpd else 0.4), "tpot": stat(tpot), "e2e_latency": stat(0.5 + 255 * tpot),
                  "num_input_tokens": stat(4096), "num_output_tokens": stat(256)}},
        "individual_request_metrics": [], "_time_unit": "s"}
    return {"experiment_metadata.json": {"server_gpu_count": int(env["BENCH_GPUS"]), "task": "text-to-text"},
            "bench-run.json": {"mode": env["BENCH_MODE"], "scenarios": {env["BENCH_TRAFFIC"]: env["BENCH_SCENARIO"]},
                               "gpus": int(env["BENCH_GPUS"]),
                               "routing_threshold_tokens": int(env["BENCH_ROUTING_THRESHOLD"])},
            f"D_text-to-text_num_concurrency_{n}_time_60s.json": run}


def runner_log(job: dict[str, Any]) -> str:
    lines = ["installing ...", "running genai-bench ..."]
    files = genai_files(_env(job))
    for name, data in files.items():
        blob = base64.b64encode(gzip.compress(json.dumps(data).encode())).decode()
        lines.append(f"HYPERPOD-BENCH-FILE {name} {blob}")
    lines.append(f"HYPERPOD-BENCH-DONE x {len(files)}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def env_folder(tmp_path_factory) -> Path:
    """A config with a 2 x 2 matrix and its synthesized manifests, laid out as ``--config`` expects."""
    from hyperpod_k8s import main as k8s_main

    tmp = tmp_path_factory.mktemp("benchenv")
    data = yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))
    data["benchmark"] = {"concurrency": [8, 16], "scenarios": [
        {"name": "aws-reference", "traffic": "D(4096,256)", "path": "reference"},
        {"name": "long-in", "traffic": "D(8192,256)", "path": "dpd"}]}
    cfg = tmp / "bench.yaml"
    cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        k8s_main.main(["--config", str(cfg), "--outdir", str(tmp / "bench.out" / "dist")])
    return cfg


def _live_dpd(kube: FakeKube, cfg: Path) -> dict[str, Any]:
    dpd = yaml.safe_load((cfg.parent / "bench.out" / "dist" / "llama-3-3-70b-dpd.k8s.yaml").read_text())
    dpd["metadata"].update(resourceVersion="1", generation=1)
    dpd["status"] = {"state": "DeploymentComplete", "observedGeneration": 1}
    kube.state.objects["iec"]["llama-3-3-70b"] = dpd
    return dpd


def _bench(cfg: Path, kubeconfig: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from hyperpod_dpd.app import main; main(sys.argv[1:])",
                           "bench", "--config", str(cfg), "--kubeconfig", kubeconfig, "--poll-seconds", "0",
                           *extra], capture_output=True, text=True, timeout=180, cwd=cfg.parent)


def _clean(cfg: Path) -> Path:
    import shutil

    results = cfg.parent / "bench.out" / "benchmark-results"
    shutil.rmtree(results, ignore_errors=True)
    return results


def test_runs_dpd_then_colocated_one_job_at_a_time_and_restores_the_endpoint(env_folder, tmp_path):
    results = _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"))
        events = kube.state.events
    assert proc.returncode == 0, proc.stderr
    creates = [e[2] for e in events if e[:2] == ("create", "jobs")]
    assert len(creates) == 8 and all(c.endswith("running=1") for c in creates), "one Job at a time"
    names = [c.split()[0] for c in creates]
    assert all("-bench-dpd-" in n for n in names[:4]) and all("-bench-colocated-" in n for n in names[4:])
    endpoint = [e[2] for e in events if e[1] == "iec"]
    assert endpoint == ["colocated", "dpd"], "DPD was live: switch once to colocated, then restore"
    switch = events.index(("replace", "iec", "colocated"))
    assert all("-bench-dpd-" in e[2] for e in events[:switch] if e[:2] == ("create", "jobs"))
    assert [e[2] for e in events if e[0] == "delete"] == names, "every Job deleted once collected"
    assert [e[2] for e in events if e[1] in ("configmaps", "serviceaccounts")] == ["llama-3-3-70b-benchmark"] * 2
    for line in ("[1/8] dpd-aws-reference-c8: running Job", "switching endpoint default/llama-3-3-70b to colocated",
                 "[8/8] colocated-long-in-c16: done", "restoring endpoint default/llama-3-3-70b to dpd"):
        assert line in proc.stdout

    from hyperpod_analysis.report.results import check_matrix, load_results

    measurements = load_results(results)
    assert check_matrix(measurements) == [("aws-reference", 8), ("aws-reference", 16), ("long-in", 8),
                                          ("long-in", 16)]
    assert {m.gpus for m in measurements} == {16}


def test_a_failed_run_stops_with_one_line_and_the_next_invocation_resumes(env_folder, tmp_path):
    results = _clean(env_folder)
    failing = {"llama-3-3-70b-bench-colocated-aws-reference-c16"}

    def result(job: dict[str, Any]) -> tuple[bool, str]:
        if job["metadata"]["name"] in failing:
            return False, "installing ...\nConnectionRefusedError: [Errno 111] Connection refused\n"
        return True, runner_log(job)

    with FakeKube(result) as kube:
        _live_dpd(kube, env_folder)
        config = kube.kubeconfig(tmp_path / "kubeconfig")
        first = _bench(env_folder, config)
        assert first.returncode == 1
        assert first.stderr.splitlines() == [
            "error: run colocated-aws-reference-c16 failed (Job llama-3-3-70b-bench-colocated-aws-reference-c16): "
            "ConnectionRefusedError: [Errno 111] Connection refused; fix and re-run bench to resume"]
        done_first = sorted(p.name for p in (results / "dpd").iterdir()) + sorted(
            p.name for p in (results / "colocated").iterdir())
        assert len(done_first) == 5
        failing.clear()
        kube.state.events.clear()
        second = _bench(env_folder, config)
        events = kube.state.events
    assert second.returncode == 0, second.stderr
    assert "resuming: 5 of 8 runs already have results" in second.stdout
    created = [e[2].split()[0] for e in events if e[:2] == ("create", "jobs")]
    assert created == ["llama-3-3-70b-bench-colocated-aws-reference-c16", "llama-3-3-70b-bench-colocated-long-in-c8",
                       "llama-3-3-70b-bench-colocated-long-in-c16"]


def test_endpoint_that_fails_to_deploy(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)["status"] = {}
        kube.state.fail_endpoint = True
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["error: endpoint default/llama-3-3-70b DeploymentFailed: pods CrashLoopBackOff"]


def test_unreachable_api_server(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, "")) as kube:
        config = kube.kubeconfig(tmp_path / "kubeconfig")
    proc = _bench(env_folder, config)  # the server is gone: connection refused
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("error: ") and "Kubernetes API unreachable" in proc.stderr


def test_missing_manifests_is_bad_input(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text((REPO / "config" / "default.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    proc = _bench(cfg, str(tmp_path / "none"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'c.out' / 'dist' / 'llama-3-3-70b-dpd.k8s.yaml'} does "
                                        f"not exist (synthesize first: python -m hyperpod_k8s.main --config ... "
                                        f"--outdir {tmp_path / 'c.out' / 'dist'})"]


def test_without_observed_generation_a_complete_state_is_trusted_only_after_the_grace_period():
    """Right after a replace, an operator that reports no observedGeneration may still show the old
    DeploymentComplete; bench must not start a run against the previous mode."""
    from hyperpod_dpd.benchmark.kube import UNOBSERVED_GRACE_SECONDS, Kube

    class Stub(Kube):
        def __init__(self) -> None:  # no API client: only the wait logic is under test
            self.now = 0.0
            self.sleep = lambda s: setattr(self, "now", self.now + s)
            self.clock = lambda: self.now

        def endpoint(self, ns, name):
            return {"metadata": {"generation": 2}, "status": {"state": "DeploymentComplete"}}

    waits: list[str] = []
    stub = Stub()
    stub.wait_endpoint_ready("default", "e", 600, 10, waits.append)
    assert len(waits) == UNOBSERVED_GRACE_SECONDS / 10 and stub.now == UNOBSERVED_GRACE_SECONDS
