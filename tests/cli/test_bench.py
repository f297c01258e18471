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
from tests.in_process import run_entry_point

from hyperpod_core.errors import MAX_MESSAGE

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
            "bench-run.json": {"mode": env["BENCH_MODE"], "experiment": env["BENCH_EXPERIMENT"],
                               "path": env["BENCH_PATH"], "routing_strategy": env["BENCH_ROUTING_STRATEGY"],
                               "scenarios": {env["BENCH_TRAFFIC"]: env["BENCH_SCENARIO"]},
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


#: What ``cdk deploy --outputs-file`` writes for the default config (stack names from its ``name``): with it the
#: manifests are deployable and go to dist/endpoint/ etc. instead of dist/placeholders/.
OUTPUTS = {"hyperpod-dpd-platform": {"ModelBucketName": "hyperpod-dpd-models-123456789012-us-west-2"},
           "hyperpod-dpd-cluster": {"EksClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/hyperpod-dpd-eks"},
           "hyperpod-dpd-observability": {
               "AmpWorkspaceEndpoint": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd"}}
PREFILL_POD = "prefill-llama-3-3-70b-6d5f7c8b9-x2k4p"
ROUTER_POD = "llama-3-3-70b-default-router-5d4c3b2a1-rt7uv"


def _write_env(tmp: Path, outputs: bool = True, autoscaled: bool = False) -> Path:
    """A config with scenarios of both experiments and its synthesized manifests, laid out as ``--config``
    expects (``<config>.out/dist``). With the outputs comes the record of the staged weights (``stage-model``
    writes it beside them). ``autoscaled``: two prefill replicas that KEDA may scale between 1 and 2 (the
    equal-gpu experiment only)."""
    from hyperpod_core import staged_model
    from hyperpod_k8s import main as k8s_main

    data = yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))
    data["benchmark"] = {"concurrency": [8, 16], "scenarios": [
        {"name": "aws-reference", "traffic": "D(4096,256)", "path": "reference"},
        {"name": "long-in", "traffic": "D(8192,256)", "path": "dpd"}]}
    if autoscaled:
        data["hyperpod"]["instance_groups"][0]["instance_count"] = 2
        data["endpoint"]["prefill"]["replicas"] = 2
        data["endpoint"]["autoscaling"] = {"enabled": True, "prefill": {"min_replicas": 1, "max_replicas": 2},
                                           "decode": {"min_replicas": 1, "max_replicas": 1}}
        data["benchmark"].update(concurrency=[8], experiments=["equal-gpu"])
    cfg = tmp / "bench.yaml"
    cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
    argv = ["--config", str(cfg), "--outdir", str(tmp / "bench.out" / "dist")]
    if outputs:
        (tmp / "cdk-outputs.json").write_text(json.dumps(OUTPUTS), encoding="utf-8")
        staged_model.write(tmp / staged_model.RECORD_FILE, bucket=OUTPUTS["hyperpod-dpd-platform"]["ModelBucketName"],
                           s3_prefix=data["model"]["s3_prefix"], manifest_bytes=b'{"format": 1, "files": {}}\n',
                           files=6)
        argv += ["--outputs-file", str(tmp / "cdk-outputs.json")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        k8s_main.main(argv)
    _stamp(cfg)
    return cfg


def _stamp(cfg: Path) -> None:
    """What ``hyperpod-dpd synth`` records in ``cdk.out/``: the config the manifests were synthesized from."""
    from hyperpod_core import environment

    e = environment.resolve(str(cfg))
    e.cdk_out.mkdir(parents=True, exist_ok=True)
    e.write_stamp(e.cdk_out)


def _deployed_at(cfg: Path, api_server: str) -> None:
    """The outputs file ``hyperpod-dpd deploy`` writes, naming ``api_server`` as the cluster's API endpoint."""
    data = {stack: dict(values) for stack, values in OUTPUTS.items()}
    data["hyperpod-dpd-cluster"]["EksApiEndpoint"] = api_server
    (cfg.parent / "bench.out" / "cdk-outputs.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture(scope="module")
def env_folder(tmp_path_factory) -> Path:
    return _write_env(tmp_path_factory.mktemp("benchenv"))


def _live_dpd(kube: FakeKube, cfg: Path, name: str = "llama-3-3-70b") -> dict[str, Any]:
    """The synthesized DPD endpoint live and ready, as InferenceEndpointConfig ``name`` (a blue/green revision's,
    ``<endpoint>-r<N>``, after ``hyperpod-dpd rollout``)."""
    dpd = yaml.safe_load((cfg.parent / "bench.out" / "dist" / "llama-3-3-70b" / "endpoint" /
                          "llama-3-3-70b-dpd.k8s.yaml").read_text())
    dpd["metadata"].update(name=name, resourceVersion="1", generation=1)
    dpd["status"] = {"state": "DeploymentComplete", "observedGeneration": 1}
    kube.state.objects["iec"][name] = dpd
    kube.state.prefill_pods = {PREFILL_POD: 120.0}  # requests it served before the benchmark
    kube.state.router_pod = ROUTER_POD
    return dpd


Ran = subprocess.CompletedProcess[str]


def _hyperpod_dpd(*args: str, cwd: Path) -> Ran:
    """``hyperpod-dpd ARGS`` from ``cwd`` in this process (tests/in_process.py: the console script's entry point
    and its error guard, stderr as its process prints it; a process per call cost ~1.5 CPU s of start-up each).
    ``test_a_failed_run_...`` runs one in a real process."""
    from hyperpod_dpd.app import main

    return run_entry_point(lambda: main(list(args)), ["hyperpod-dpd", *args], cwd=cwd)


def _bench(cfg: Path, kubeconfig: str, *extra: str, yes: bool = True, process: bool = False) -> Ran:
    """``hyperpod-dpd bench --yes`` with the outputs file naming the kubeconfig's server as this cluster's;
    ``process``: in a process of its own (the console script's code path, stdin from /dev/null)."""
    if Path(kubeconfig).is_file():
        _deployed_at(cfg, json.loads(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"])
    args = ("bench", "--config", str(cfg), "--kubeconfig", kubeconfig, "--poll-seconds", "0",
            *(("--yes",) if yes else ()), *extra)
    if not process:
        return _hyperpod_dpd(*args, cwd=cfg.parent)
    proc = subprocess.run([sys.executable, "-c", "import sys; from hyperpod_dpd.app import main; main(sys.argv[1:])",
                           *args], capture_output=True, text=True, timeout=180, cwd=cfg.parent,
                          stdin=subprocess.DEVNULL, check=False)
    return proc


def _clean(cfg: Path) -> Path:
    import shutil

    results = cfg.parent / "bench.out" / "benchmark-results"
    shutil.rmtree(results, ignore_errors=True)
    return results / "llama-3-3-70b"  # the endpoint's own folder


def test_runs_each_experiment_dpd_then_colocated_one_job_at_a_time_and_restores_the_endpoint(env_folder, tmp_path):
    results = _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"))
        events = kube.state.events
    assert proc.returncode == 0, proc.stderr
    creates = [e[2] for e in events if e[:2] == ("create", "jobs")]
    # aws-reference at AWS's 8/16/32, equal-gpu at the configured 8/16; both modes each.
    assert len(creates) == 10 and all(c.endswith("running=1") for c in creates), "one Job at a time"
    names = [c.split()[0] for c in creates]
    assert [n.split("-bench-")[1] for n in names] == [
        "dpd-aws-reference-c8", "dpd-aws-reference-c16", "dpd-aws-reference-c32", "colocated-aws-reference-c8",
        "colocated-aws-reference-c16", "colocated-aws-reference-c32", "dpd-long-in-c8", "dpd-long-in-c16",
        "colocated-long-in-c8", "colocated-long-in-c16"]
    # The reference 1P+1D layout is the live DPD one here (no apply); then one colocated node, the configured DPD,
    # the equal-GPU colocated baseline, and the DPD endpoint restored: each switch through the rollout's replace
    # path (delete, wait until gone, create), never a replace in place (issue 36: a new pod would wait for the GPUs
    # the old one holds).
    assert [e[:2] for e in events if e[1] == "iec"] == [("delete", "iec"), ("create", "iec")] * 4
    assert ["dpd" if "pdSpec" in a["spec"] else "colocated" for a in kube.state.applied] == [
        "colocated", "dpd", "colocated", "dpd"]
    replicas = [kube.state.objects["iec"]["llama-3-3-70b"]["spec"].get("replicas")]
    assert replicas == [None], "the DPD manifest is live again"
    assert [e[2] for e in events if e[:2] == ("delete", "jobs")] == names, "every Job deleted once collected"
    assert [e[2] for e in events if e[1] in ("configmaps", "serviceaccounts")] == ["llama-3-3-70b-benchmark"] * 2
    for line in ("[1/10] dpd-aws-reference-c8: running Job",
                 "switching endpoint default/llama-3-3-70b to colocated (aws-reference: "
                 "llama-3-3-70b-reference-1node.k8s.yaml",
                 "[10/10] colocated-long-in-c16: done", "restoring endpoint default/llama-3-3-70b to dpd"):
        assert line in proc.stdout

    from hyperpod_analysis.report.results import check_matrix, load_results

    measurements = load_results(results)
    assert check_matrix(measurements, "aws-reference") == [("aws-reference", 8), ("aws-reference", 16),
                                                           ("aws-reference", 32)]
    assert check_matrix(measurements, "equal-gpu") == [("long-in", 8), ("long-in", 16)]
    gpus = {(m.experiment, m.mode): m.gpus for m in measurements}
    assert gpus == {("aws-reference", "dpd"): 16, ("aws-reference", "colocated"): 8, ("equal-gpu", "dpd"): 16,
                    ("equal-gpu", "colocated"): 16}
    # After each DPD run: the prefill pods' finished requests during that run (11 = 10 completed + 1 warm-up).
    paths = {m.scenario + str(m.concurrency): m.dpd_path for m in measurements if m.mode == "dpd"}
    assert all(p is not None and p["prefill_requests"] == 11 and p.get("pods") == [PREFILL_POD]
               for p in paths.values()), paths
    assert all(m.dpd_path is None for m in measurements if m.mode == "colocated")


def test_without_pod_proxy_access_the_router_log_tells_the_path(env_folder, tmp_path):
    """The router's decisions come from the pods of its Deployment's selector: the router of endpoint
    ``llama-3-3-70b-default`` in namespace ``router-x`` (fake_kube.OTHER_ROUTER_POD) starts like ours and its 40
    decisions are not the benchmark's."""
    results = _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        kube.state.proxy_forbidden = True
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((results / "dpd" / "dpd-long-in-c8" / "dpd-path.json").read_text())
    assert record == {"source": "router log 'disaggregate=' lines", "prefill_requests": 11, "direct_requests": 0}


def test_a_dpd_run_whose_requests_skipped_prefill_is_invalid_in_the_report(env_folder, tmp_path):
    """D(4096,256) sits at the routing threshold: if the router's estimate sends it straight to decode, the
    "DPD" run measured decode alone. The report must say so and keep it out of every comparison."""
    results = _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job)),
                  prefill_requests=lambda job: 0 if "aws-reference" in job["metadata"]["name"] else 11) as kube:
        _live_dpd(kube, env_folder)
        assert _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig")).returncode == 0
    out = tmp_path / "report"
    proc = _hyperpod_dpd("report", "--config", str(env_folder), "--results", str(results), "--out", str(out),
                         cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "invalid: aws-reference aws-reference c8: only 0 of 10 requests reached the prefill pods" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    ref = summary["experiments"]["aws-reference"]
    assert all(c["invalid"] and c["improvement_pct"] is None for c in ref["cells"])
    assert all(c["invalid"] is None for c in summary["experiments"]["equal-gpu"]["cells"])
    assert [v["scenario"] for v in summary["experiments"]["equal-gpu"]["verdicts"]] == ["long-in"]
    md = (out / "report.md").read_text()
    assert md.count("INVALID: only 0 of 10 requests reached the prefill pods") == 3


def test_manifests_with_placeholders_are_refused(tmp_path):
    """The hint names the command that writes the outputs, into the file bench reads. Fails on main: "deploy with
    --outputs-file", an option hyperpod-dpd deploy did not have (the fourth review's friction 11)."""
    cfg = _write_env(tmp_path, outputs=False)
    proc = _hyperpod_dpd("bench", "--config", cfg.name, "--kubeconfig", "none", "--yes", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: bench.out/dist/llama-3-3-70b/placeholders/ holds manifests with placeholders (see its README.txt): "
        f"model_bucket_name, eks_cluster_arn: hyperpod-dpd deploy --config {cfg.name}; model_revision: run "
        "hyperpod-dpd stage-model SRC (it records the revision) or set model.revision; then hyperpod-dpd synth "
        f"--config {cfg.name}, then bench"]
    # One line, never cut (errors.MAX_MESSAGE).
    assert len(proc.stderr.splitlines()[0]) <= MAX_MESSAGE, len(proc.stderr.splitlines()[0])


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
        first = _bench(env_folder, config, process=True)
        assert first.returncode == 1
        assert first.stderr.splitlines() == [
            "error: run colocated-aws-reference-c16 failed (Job llama-3-3-70b-bench-colocated-aws-reference-c16): "
            "ConnectionRefusedError: [Errno 111] Connection refused; fix and re-run bench to resume"]
        done_first = sorted(p.name for p in (results / "dpd").iterdir()) + sorted(
            p.name for p in (results / "colocated").iterdir())
        assert len(done_first) == 4
        failing.clear()
        kube.state.events.clear()
        second = _bench(env_folder, config)
        events = kube.state.events
    assert second.returncode == 0, second.stderr
    assert "resuming: 4 of 10 runs already have results" in second.stdout
    created = [e[2].split()[0].removeprefix("llama-3-3-70b-bench-") for e in events if e[:2] == ("create", "jobs")]
    assert created == ["colocated-aws-reference-c16", "colocated-aws-reference-c32", "dpd-long-in-c8",
                       "dpd-long-in-c16", "colocated-long-in-c8", "colocated-long-in-c16"]


def test_endpoint_that_fails_to_deploy(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)["status"] = {}
        kube.state.fail_endpoint = True
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: InferenceEndpointConfig default/llama-3-3-70b DeploymentFailed: pods CrashLoopBackOff"]


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
    _stamp(cfg)
    proc = _bench(cfg, str(tmp_path / "none"))
    assert proc.returncode == 2
    missing = tmp_path / "c.out" / "dist" / "llama-3-3-70b" / "benchmark" / "llama-3-3-70b-benchmark.k8s.yaml"
    assert proc.stderr.splitlines() == [f"error: {missing} does not exist (synthesize first: hyperpod-dpd synth ...)"]


def test_without_observed_generation_a_complete_state_is_trusted_only_after_the_grace_period():
    """An operator that reports no observedGeneration may show a DeploymentComplete that is not the new spec's;
    bench (through the rollout's Cluster) must not start a run against the previous layout."""
    from hyperpod_dpd.rollout.cluster import UNOBSERVED_GRACE_SECONDS, Cluster

    now = [0.0]

    class Stub(Cluster):
        def endpoint(self, namespace, name):  # no API client: only the wait logic is under test
            return {"metadata": {"generation": 2}, "status": {"state": "DeploymentComplete"}}

    stub = Stub(None, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0],  # type: ignore[arg-type]
                poll_seconds=10)
    waits: list[str] = []
    stub.wait_ready("default", "e", 600, waits.append)
    assert waits == ["DeploymentComplete"] and now[0] == UNOBSERVED_GRACE_SECONDS


# --- safety: the synth stamp, asking first, a dry run, a subset -------------------------------------------------


def test_a_config_changed_since_synth_is_refused(tmp_path):
    cfg = _write_env(tmp_path)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("max_model_len: 16384", "max_model_len: 12288"),
                   encoding="utf-8")
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        proc = _bench(cfg, kube.kubeconfig(tmp_path / "kubeconfig"))
        assert kube.state.events == []
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {cfg} changed since {tmp_path / 'bench.out' / 'cdk.out'} was "
                                        f"synthesized; run: hyperpod-dpd synth --config {cfg}"]


def test_without_yes_and_without_a_terminal_nothing_starts(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"), yes=False)
        assert [e for e in kube.state.events if e[0] != "get"] == []
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("error: hyperpod-dpd bench asks before it changes anything and "
                                                   "stdin is not a terminal: pass --yes")
    assert f"plan: on {kube.url} (kubeconfig context fake), endpoint default/llama-3-3-70b is replaced" in proc.stdout


def test_dry_run_lists_the_runs_and_applies_nothing(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"), "--dry-run", "--only", "dpd-*-c8",
                      yes=False)
        events = kube.state.events
    assert proc.returncode == 0, proc.stderr
    assert events == []
    # activeDeadlineSeconds of each Job: benchmark.max_time_per_run_minutes plus the chart's set-up allowance.
    assert proc.stdout.splitlines()[-3:] == ["  dpd-aws-reference-c8 (aws-reference, dpd; at most 45 min)",
                                             "  dpd-long-in-c8 (equal-gpu, dpd; at most 45 min)",
                                             "dry run: nothing applied"]


def test_only_runs_the_matching_runs(env_folder, tmp_path):
    _clean(env_folder)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, env_folder)
        proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"), "--only", "colocated-long-in-*,dpd-*-c32")
        events = kube.state.events
    assert proc.returncode == 0, proc.stderr
    created = [e[2].split()[0].removeprefix("llama-3-3-70b-bench-") for e in events if e[:2] == ("create", "jobs")]
    assert created == ["dpd-aws-reference-c32", "colocated-long-in-c8", "colocated-long-in-c16"]


def test_a_pattern_that_matches_no_run_is_bad_input(env_folder, tmp_path):
    proc = _bench(env_folder, str(tmp_path / "none"), "--only", "dpd-*-c64")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: --only 'dpd-*-c64' matches no run; runs: dpd-aws-reference-c8, "
                                        "dpd-aws-reference-c16, dpd-aws-reference-c32, colocated-aws-reference-c8, "
                                        "colocated-aws-reference-c16, colocated-aws-reference-c32, ... (10 runs)"]


def test_another_clusters_context_is_refused_before_anything_is_applied(env_folder, tmp_path):
    """Two fake API servers: the outputs file names the first as this cluster's, the current context is the
    second's. bench replaces the endpoint on the cluster it talks to, so it must not start (hyperpod_dpd.kube)."""
    _clean(env_folder)
    this, other = "arn:aws:eks:us-west-2:123456789012:cluster/hyperpod-dpd-eks", "someone-elses"
    with FakeKube(lambda job: (True, runner_log(job))) as ours, FakeKube(lambda job: (True, "")) as theirs:
        _live_dpd(ours, env_folder)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": other,
            "clusters": [{"name": n, "cluster": {"server": k.url}} for n, k in ((this, ours), (other, theirs))],
            "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in (this, other)],
            "users": [{"name": "u", "user": {"token": "t"}}]}))
        proc = _bench(env_folder, str(kubeconfig))  # the outputs file names the first cluster's server
        assert ours.state.events == [] and theirs.state.events == []
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: kubeconfig context {other!r} points at {theirs.url}, not at EKS cluster hyperpod-dpd-eks of this "
        f"config ({ours.url}, {env_folder.parent / 'bench.out' / 'cdk-outputs.json'}); run: aws eks update-kubeconfig "
        f"--name hyperpod-dpd-eks --region us-west-2, or pass --context {this}"]


# --- a fair benchmark: the replicas a run records are the replicas it ran on (issue 33, item 4) -------------------


@pytest.fixture(scope="module")
def autoscaled_env(tmp_path_factory) -> Path:
    return _write_env(tmp_path_factory.mktemp("autoscaled"), autoscaled=True)


def test_an_autoscaled_endpoint_is_benchmarked_on_pinned_replicas_and_what_ran_is_recorded(autoscaled_env, tmp_path):
    """The live DPD endpoint autoscales prefill between 1 and 2 replicas (the fake holds each role at its
    ``minReplicaCount`` while ``autoScalingSpec`` is live, as KEDA does under the benchmark's light load). bench
    must replace it with the pinned layout for the equal-gpu runs (delete, then create: the new Deployments start at
    the pinned count, where an in-place change would leave prefill at 1, KEDA's restoreToOriginalReplicaCount
    defaulting to false), find no scaler left on the roles, wait until the roles run the pinned replicas, record the
    ready replicas of every run, and put the autoscaled endpoint back afterwards."""
    results = _clean(autoscaled_env)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, autoscaled_env)
        proc = _bench(autoscaled_env, kube.kubeconfig(tmp_path / "kubeconfig"))
        applied, events = kube.state.applied, kube.state.events
    assert proc.returncode == 0, proc.stderr
    assert [e[:2] for e in events if e[1] == "iec"] == [("delete", "iec"), ("create", "iec")] * 3
    assert ["dpd" if "pdSpec" in a["spec"] else "colocated" for a in applied] == ["dpd", "colocated", "dpd"]
    pinned, restored = applied[0]["spec"]["pdSpec"], applied[-1]["spec"]["pdSpec"]
    assert "autoScalingSpec" not in pinned and pinned["prefillSpec"]["replicas"] == 2
    assert restored["autoScalingSpec"]["prefillAutoScaling"]["minReplicaCount"] == 1, "the configured one is back"
    for mode, run in (("dpd", "dpd-long-in-c8"), ("colocated", "colocated-long-in-c8")):
        record = json.loads((results / mode / run / "serving.json").read_text())
        assert record["gpus_recorded"] == record["ready_gpus_before"] == record["ready_gpus_after"] == 24, record
        assert record["invalid"] is None
    assert record["after"] == {"llama-3-3-70b": {"replicas": 3, "ready": 3, "gpus_per_pod": 8}}
    assert "warning" not in proc.stdout


def test_a_scaler_left_on_a_role_is_refused_before_any_run(autoscaled_env, tmp_path):
    """That the operator deletes its KEDA ScaledObject when ``autoScalingSpec`` goes is unpublished [I]: when one is
    left, KEDA keeps scaling the role and the runs would not run on the GPUs they record. One line that names it and
    how to remove or pause it (KEDA's ``autoscaling.keda.sh/paused-replicas``), and no Job."""
    _clean(autoscaled_env)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, autoscaled_env)
        kube.state.scalers_left_behind = True
        proc = _bench(autoscaled_env, kube.kubeconfig(tmp_path / "kubeconfig"))
        events = kube.state.events
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "error: ScaledObject default/decode-llama-3-3-70b-scaler still scales Deployment decode-llama-3-3-70b after "
        "the pinned layout was applied: its replicas would not stay at the pinned 1 the runs record; remove it "
        "(kubectl delete scaledobject decode-llama-3-3-70b-scaler -n default) or pause it at the pinned count (kubectl "
        "annotate scaledobject decode-llama-3-3-70b-scaler -n default autoscaling.keda.sh/paused-replicas=1; KEDA "
        "docs, Pausing autoscaling), then run bench again (+3 more)"]
    assert not [e for e in events if e[:2] == ("create", "jobs")]


def test_a_run_on_fewer_gpus_than_it_records_is_invalid_in_the_report(autoscaled_env, tmp_path):
    """A prefill pod is lost during the DPD run: 16 GPUs served a run that records 24. serving.json marks it invalid
    and the report shows the cell as invalid, compared with nothing."""
    results = _clean(autoscaled_env)
    with FakeKube(lambda job: (True, runner_log(job))) as kube:
        _live_dpd(kube, autoscaled_env)
        kube.state.lost_during_run["prefill-llama-3-3-70b"] = 1
        proc = _bench(autoscaled_env, kube.kubeconfig(tmp_path / "kubeconfig"))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((results / "dpd" / "dpd-long-in-c8" / "serving.json").read_text())
    assert (record["gpus_recorded"], record["ready_gpus_before"], record["ready_gpus_after"]) == (24, 24, 16)
    assert record["after"]["prefill-llama-3-3-70b"] == {"replicas": 2, "ready": 1, "gpus_per_pod": 8}
    assert record["invalid"] == "16 GPUs ready after the run, the run records 24"
    assert ("  warning: dpd-long-in-c8: 16 GPUs ready after the run, the run records 24: marked invalid (see "
            "serving.json); the report compares it with nothing" in proc.stdout.splitlines())
    out = tmp_path / "report"
    report = _hyperpod_dpd("report", "--config", str(autoscaled_env), "--results", str(results), "--out", str(out),
                           cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert ("  invalid: equal-gpu long-in c8: dpd run: 16 GPUs ready after the run, the run records 24 "
            "(serving.json)" in report.stdout.splitlines())
    (cell,) = json.loads((out / "summary.json").read_text())["experiments"]["equal-gpu"]["cells"]
    assert cell["invalid"] and cell["improvement_pct"] is None


# --- a fleet: bench --endpoint runs one endpoint's matrix, on its own objects (issue 34 item 4) ---------------------

SMALL, BIG = "llama-3-1-8b", "llama-3-3-70b"  # the endpoints of config/examples/two-models.yaml
FLEET_OUTPUTS = {
    "two-models-platform": {"ModelBucketName": "two-models-models-123456789012-us-west-2"},
    "two-models-cluster": {"EksClusterArn": "arn:aws:eks:us-west-2:123456789012:cluster/two-models-eks"},
    "two-models-observability": {
        "AmpWorkspaceEndpoint": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123abcd"}}
SMALL_PREFILL_POD = f"prefill-{SMALL}-6d5f7c8b9-x2k4p"
BIG_PREFILL_POD = f"prefill-{BIG}-5c4b3a291-a1b2c"


@pytest.fixture(scope="module")
def fleet_env(tmp_path_factory) -> Path:
    """two-models.yaml with one equal-gpu scenario, stamped, and the 8B's manifests where its synth puts them: the
    8B's part of the config synthesized alone into the fleet's dist/ (hyperpod_core.dist_layout places them by the
    endpoint's name), beside the deploy outputs and the record of its staged weights."""
    from hyperpod_core import staged_model
    from hyperpod_k8s import main as k8s_main

    tmp = tmp_path_factory.mktemp("fleetenv")
    data = yaml.safe_load((REPO / "config" / "examples" / "two-models.yaml").read_text(encoding="utf-8"))
    data["benchmark"] = {"concurrency": [8], "experiments": ["equal-gpu"],
                         "scenarios": [{"name": "long-in", "traffic": "D(8192,256)", "path": "dpd"}]}
    cfg = tmp / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data), encoding="utf-8")
    small = {**data, "endpoints": [data["endpoints"][1]]}
    (tmp / "small.yaml").write_text(yaml.safe_dump(small), encoding="utf-8")
    outputs = tmp / "fleet.out" / "cdk-outputs.json"
    outputs.parent.mkdir()
    outputs.write_text(json.dumps(FLEET_OUTPUTS), encoding="utf-8")
    staged_model.write(tmp / "fleet.out" / staged_model.RECORD_FILE,
                       bucket=data["endpoints"][1]["model"].get("bucket")
                       or FLEET_OUTPUTS["two-models-platform"]["ModelBucketName"],
                       s3_prefix=data["endpoints"][1]["model"]["s3_prefix"],
                       manifest_bytes=b'{"format": 1, "files": {}}\n', files=6)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        k8s_main.main(["--config", str(tmp / "small.yaml"), "--outdir", str(tmp / "fleet.out" / "dist"),
                       "--outputs-file", str(outputs), "--staged-model-file",
                       str(tmp / "fleet.out" / staged_model.RECORD_FILE)])
    _stamp(cfg)
    return cfg


def test_endpoint_option_benchmarks_that_endpoint_only(fleet_env, tmp_path):
    """Both endpoints live; ``bench --endpoint llama-3-1-8b`` runs the 8B's Jobs against the 8B's manifests, counts
    the 8B's prefill pods only (its Deployment's selector; the 70B's prefill pod served 500 requests), collects into
    the 8B's results folder and never touches the 70B. Fails before: Config.endpoint raised TypeError."""
    from hyperpod_core.dist_layout import DistLayout

    dist = fleet_env.parent / "fleet.out" / "dist"
    small = yaml.safe_load(DistLayout.found(dist, SMALL, "dpd").endpoint_file("dpd").read_text())
    small["metadata"].update(resourceVersion="1", generation=1)
    small["status"] = {"state": "DeploymentComplete", "observedGeneration": 1}
    big = json.loads(json.dumps(small))
    big["metadata"]["name"] = BIG
    with FakeKube(lambda job: (True, runner_log(job)), endpoint=SMALL, other_endpoint=BIG) as kube:
        kube.state.objects["iec"].update({SMALL: small, BIG: big})
        kube.state.prefill_pods = {SMALL_PREFILL_POD: 120.0}
        kube.state.other_prefill_pods = {BIG_PREFILL_POD: 500.0}
        outputs = fleet_env.parent / "fleet.out" / "cdk-outputs.json"
        written = {**FLEET_OUTPUTS, "two-models-cluster": {**FLEET_OUTPUTS["two-models-cluster"],
                                                          "EksApiEndpoint": kube.url}}
        outputs.write_text(json.dumps(written), encoding="utf-8")
        proc = _hyperpod_dpd("bench", "--config", str(fleet_env), "--endpoint", SMALL, "--kubeconfig",
                             kube.kubeconfig(tmp_path / "kubeconfig"), "--poll-seconds", "0", "--yes",
                             cwd=fleet_env.parent)
        events = kube.state.events
        after = kube.state.objects["iec"][BIG]
    assert proc.returncode == 0, proc.stderr
    creates = [e[2].split()[0] for e in events if e[:2] == ("create", "jobs")]
    assert creates and all(c.startswith(f"{SMALL}-bench-") for c in creates), creates
    assert after == big, "the 70B is never replaced"
    record = json.loads((fleet_env.parent / "fleet.out" / "benchmark-results" / SMALL / "dpd" / "dpd-long-in-c8"
                         / "dpd-path.json").read_text())
    assert (record["prefill_requests"], record["pods"]) == (11, [SMALL_PREFILL_POD])
    assert f"next: hyperpod-dpd report --config {fleet_env} --endpoint {SMALL} --results " in proc.stdout


def test_a_fleet_needs_the_endpoint_named_for_bench(fleet_env, tmp_path):
    proc = _hyperpod_dpd("bench", "--config", str(fleet_env), "--dry-run", cwd=fleet_env.parent)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"error: --endpoint must name the endpoint hyperpod-dpd bench acts on: {fleet_env} serves "
                           f"2 endpoints ({BIG}, {SMALL})\n")


# --- after a rollout (issue 36) ----------------------------------------------------------------------------------


def test_after_a_blue_green_bench_benchmarks_the_revision_that_serves(env_folder, tmp_path):
    """The revision store names ``llama-3-3-70b-r1`` as the revision that serves (``hyperpod-dpd rollout``): bench
    switches that InferenceEndpointConfig (never creating a second copy under the endpoint's own name, for which no
    GPUs are left), its Jobs call that revision's router, and it is restored at the end. Fails before: bench
    replaced ``llama-3-3-70b``, which does not exist."""
    from day2_fakes import rolled_out

    _clean(env_folder)
    served = "llama-3-3-70b-r1"
    called: list[str] = []

    def result(job: dict[str, Any]) -> tuple[bool, str]:
        called.append(_env(job)["BENCH_API_BASE"])
        return True, runner_log(job)

    workdir = env_folder.parent / "bench.out"
    rolled_out(workdir, endpoint="llama-3-3-70b", number=1)
    try:
        with FakeKube(result, endpoint=served) as kube:
            _live_dpd(kube, env_folder, served)
            proc = _bench(env_folder, kube.kubeconfig(tmp_path / "kubeconfig"), "--only",
                          "dpd-long-in-c8,colocated-long-in-c8")
            live = kube.state.objects["iec"]
    finally:
        (workdir / "rollouts" / "llama-3-3-70b.json").unlink()
    assert proc.returncode == 0, proc.stderr
    assert sorted(live) == [served] and "pdSpec" in live[served]["spec"], "restored, under its own name"
    assert set(called) == {f"http://{served}-default-routing-service.hyperpod-inference-system.svc.cluster.local:443"}
    assert f"restoring endpoint default/{served} to dpd" in proc.stdout


def test_bench_waits_for_an_unfinished_rollout(env_folder, tmp_path):
    """A rollout that stopped half-way (its revision store holds the operation): bench would replace a revision the
    rollout is about to delete or move the Service from; one line says how to go on, before any Kubernetes call."""
    from day2_fakes import rolled_out

    workdir = env_folder.parent / "bench.out"
    rolled_out(workdir, endpoint="llama-3-3-70b", number=1, operation={
        "kind": "blue-green", "undo": False, "source": None, "done": 1, "steps": ["apply target llama-3-3-70b-r2"],
        "target": {"number": 2, "name": "llama-3-3-70b-r2", "manifest": {}}})
    try:
        proc = _hyperpod_dpd("bench", "--config", env_folder.name, "--kubeconfig", "none", "--yes",
                             cwd=env_folder.parent)
    finally:
        (workdir / "rollouts" / "llama-3-3-70b.json").unlink()
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: a rollout of default/llama-3-3-70b is unfinished (bench.out/rollouts/llama-3-3-70b.json): finish it "
        f"(hyperpod-dpd rollout --config {env_folder.name}) or undo it (hyperpod-dpd rollout --config "
        f"{env_folder.name} --undo), then bench"]


def test_a_live_endpoint_holds_its_manifest_with_quantities_as_strings_and_server_defaults() -> None:
    """The API server keeps ``8`` as written and adds defaults: no needless delete-and-apply (one cold start); a
    missing ``pdSpec`` or an extra autoscaling block is a different layout."""
    from hyperpod_dpd.commands.bench import holds

    wanted = {"pdSpec": {"prefillSpec": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 8}}}}}
    live = {"maxDeployTimeInSeconds": 3600,
            "pdSpec": {"prefillSpec": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": "8"}}}}}
    assert holds(live, wanted)
    assert not holds({"worker": {}}, wanted)
    assert not holds({**live, "pdSpec": {**live["pdSpec"], "autoScalingSpec": {}}}, wanted)
