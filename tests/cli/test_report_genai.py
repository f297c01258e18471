"""The real genai-bench client against a local streaming server, through the Job's own runner, then the report.

* Client: genai-bench from ``.bench-venv`` (scripts/setup --tests; the hash-pinned lock the Jobs install), started by
  ``core/hyperpod_core/bench_runner.py`` exactly as a Job starts it, with a tiny word-level tokenizer built
  offline (``HF_HUB_OFFLINE=1``); results travel through the pod-log format (``HYPERPOD-BENCH-FILE``) that
  ``bench`` decodes.
* Server: ``bench_server.StreamingServer``, one per mode, latencies shaped per role.
* The report is built from those files; its tables are checked against the files' own numbers (genai-bench
  run-file format: ``genai_bench/metrics/aggregated_metrics_collector.py`` ``save``, lines 317-338 of 0.0.5),
  its charts for existence and content, and bad inputs for one-line errors with exit code 2.

``UPDATE_SAMPLE_REPORT=1`` also writes the report to docs/sample-benchmark-report/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from bench_server import Shape, StreamingServer, build_tokenizer
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
BENCH_PY = REPO / ".bench-venv" / "bin" / "python"
RUNNER = REPO / "core" / "hyperpod_core" / "bench_runner.py"
SAMPLE = REPO / "docs" / "sample-benchmark-report"
THRESHOLD = 4096
#: Two shapes, scaled down so that the whole module stays within a minute: long prompts (DPD path, above the
#: threshold by more than the config's margin) and short ones (straight to decode).
SCENARIOS = {"long-in": "D(5600,40)", "short-in": "D(600,40)"}
LEVELS = "2,4"

pytestmark = [
    pytest.mark.skipif(not BENCH_PY.exists(), reason="scripts/setup --tests creates .bench-venv (genai-bench)"),
    # One worker runs the whole module: its fixtures start the real client (~45 s), once, not once per worker.
    pytest.mark.xdist_group("genai-bench"),
]


def _config_yaml(tmp: Path) -> Path:
    text = (REPO / "config" / "default.yaml").read_text(encoding="utf-8")
    scenarios = "".join(f"    - {{name: {n}, traffic: '{t}', path: {'dpd' if n == 'long-in' else 'direct'}}}\n"
                        for n, t in SCENARIOS.items())
    text += ("\nbenchmark:\n  concurrency: [2, 4]\n  instance_hour_usd: 55.04\n  scenarios:\n" + scenarios)
    path = tmp / "bench.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _runner_env(mode: str, scenarios: list[str], url: str, tokenizer: Path, out: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(out), "MPLCONFIGDIR": str(out / "mpl"),
            "HF_HUB_OFFLINE": "1", "ENABLE_UI": "false",
            "BENCH_MODE": mode, "BENCH_SCENARIO": ";".join(scenarios),
            "BENCH_TRAFFIC": ";".join(SCENARIOS[s] for s in scenarios), "BENCH_PATH": "mixed",
            "BENCH_CONCURRENCY": LEVELS,
            "BENCH_MAX_TIME_MINUTES": "1", "BENCH_MAX_REQUESTS": "12", "BENCH_WARMUP_RATIO": "0.1",
            "BENCH_API_BASE": url, "BENCH_API_MODEL": "llama-3-3-70b-instruct",
            "BENCH_ENDPOINT": "default/llama-3-3-70b",
            "BENCH_ROUTING_THRESHOLD": str(THRESHOLD), "BENCH_ROUTING_STRATEGY": "prefixaware",
            "BENCH_GPUS": "16", "BENCH_INSTANCE_TYPE": "ml.p5.48xlarge", "BENCH_TOKENIZER": str(tokenizer),
            # What the chart writes (hyperpod_k8s.benchmark.manifests.gpu_memory_utilization) for the default config.
            "BENCH_GPU_MEMORY_UTILIZATION": "prefill=0.75,decode=0.75" if mode == "dpd" else "colocated=0.85",
            "BENCH_OUTPUT_DIR": str(out), **extra}


def _run(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([str(BENCH_PY), str(RUNNER)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Both modes x both shapes, two concurrency levels each; results decoded from the runner's stdout."""
    from hyperpod_analysis.report.results import decode_log

    tmp = tmp_path_factory.mktemp("genai")
    tokenizer = build_tokenizer(BENCH_PY, tmp / "tokenizer")
    results = tmp / "benchmark-results"
    logs: dict[str, str] = {}
    with StreamingServer(Shape("dpd", threshold=THRESHOLD)) as dpd, \
            StreamingServer(Shape("colocated", threshold=THRESHOLD)) as colocated:
        servers = {"dpd": dpd, "colocated": colocated}

        def one_mode(mode: str) -> None:  # one client start per mode: every shape and level
            key = f"{mode}-{'+'.join(SCENARIOS)}-c{LEVELS.replace(',', '-')}"
            proc = _run(_runner_env(mode, list(SCENARIOS), servers[mode].url, tokenizer, tmp / "work" / key),
                        tmp / "work" / key)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            logs[key] = proc.stdout
            assert decode_log(proc.stdout, results / mode / key)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one_mode, ["dpd", "colocated"]))
        # What bench reads after a DPD run: the requests the prefill side served (here: the fake's count).
        (dpd_folder,) = (results / "dpd").iterdir()
        (dpd_folder / "dpd-path.json").write_text(json.dumps(
            {"source": "bench_server prefill count", "prefill_requests": dpd.disaggregated}), encoding="utf-8")
        requests = {m: s.requests for m, s in servers.items()}
    return {"results": results, "config": _config_yaml(tmp), "logs": logs, "requests": requests, "tmp": tmp}


@pytest.fixture(scope="module")
def report(measured):
    from hyperpod_dpd.app import app

    out = measured["tmp"] / "report"
    res = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                   str(measured["results"]), "--out", str(out)])
    assert res.exit_code == 0, res.output
    if os.environ.get("UPDATE_SAMPLE_REPORT") == "1":
        keep = SAMPLE / "README.md"
        note = keep.read_text(encoding="utf-8") if keep.exists() else None
        shutil.rmtree(SAMPLE, ignore_errors=True)
        shutil.copytree(out, SAMPLE)
        for name in ("summary.json", "report.md", "report.html"):
            f = SAMPLE / name
            f.write_text(f.read_text(encoding="utf-8").replace(str(measured["results"]), "<results>"),
                         encoding="utf-8")
        if note is not None:
            keep.write_text(note, encoding="utf-8")
    return out


def _run_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*_num_concurrency_*_time_*s.json"))


def test_real_client_wrote_real_format_files_for_every_cell(measured):
    files = _run_files(measured["results"])
    assert len(files) == 2 * len(SCENARIOS) * 2  # modes x shapes x concurrency levels
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        agg = data["aggregated_metrics"]
        assert data["_time_unit"] == "s"
        assert agg["num_completed_requests"] > 0 and agg["error_rate"] == 0
        assert {"ttft", "tpot", "e2e_latency", "num_output_tokens"} <= set(agg["stats"])
        assert len(data["individual_request_metrics"]) >= agg["num_completed_requests"]
    assert all(n > 0 for n in measured["requests"].values())


def test_each_run_records_what_it_ran_under(measured):
    records = [json.loads(p.read_text()) for p in measured["results"].rglob("bench-run.json")]
    assert len(records) == 2
    for r in records:
        assert r["scenarios"] == {t: n for n, t in SCENARIOS.items()}
        assert r["routing_threshold_tokens"] == THRESHOLD and r["routing_strategy"] == "prefixaware"
        assert r["genai_bench_version"] == "0.0.5"
        assert r["concurrency"] == [2, 4]
        assert r["gpu_memory_utilization"] == ({"prefill": 0.75, "decode": 0.75} if r["mode"] == "dpd"
                                               else {"colocated": 0.85})


def _md_rows(md: str, section: str) -> list[list[str]]:
    part = md.split(f"### {section} ")[1].split("#### Measurements")[1].split("\n### ")[0]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in part.splitlines()
            if ln.startswith("| ") and not ln.startswith("| concurrency")]


def test_measurement_tables_equal_the_result_files(measured, report):
    md = (report / "report.md").read_text(encoding="utf-8")
    checked = 0
    for scenario, traffic in SCENARIOS.items():
        rows = {(r[0], r[1]): r for r in _md_rows(md, scenario)}
        for mode in ("dpd", "colocated"):
            for f in _run_files(measured["results"] / mode):
                agg = json.loads(f.read_text(encoding="utf-8"))["aggregated_metrics"]
                if agg["scenario"] != traffic:
                    continue
                s = agg["stats"]
                row = rows[(str(agg["num_concurrency"]), mode)]
                assert row[3] == f"{s['ttft']['mean'] * 1000:.1f}"
                assert row[4] == f"{s['ttft']['p95'] * 1000:.1f}"
                assert row[5] == f"{s['tpot']['mean'] * 1000:.2f}"
                assert row[7] == f"{s['e2e_latency']['p50'] * 1000:.1f}"
                assert row[8] == f"{s['e2e_latency']['p90'] * 1000:.1f}"
                assert row[9] == f"{agg['mean_output_throughput_tokens_per_s']:.1f}"
                assert row[10] == f"{agg['mean_output_throughput_tokens_per_s'] / 16:.1f}"
                checked += 1
    assert checked == 8


def test_improvements_follow_the_published_sign_convention(report):
    """Latency: (colocated - dpd) / colocated; throughput: (dpd - colocated) / colocated (AWS: higher = DPD)."""
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    assert list(summary["experiments"]) == ["equal-gpu"], "no path: reference scenario, no reference experiment"
    summary = summary["experiments"]["equal-gpu"]
    for cell in summary["cells"]:
        c, d, imp = cell["colocated"], cell["dpd"], cell["improvement_pct"]
        assert imp["tpot"] == pytest.approx(100 * (c["tpot_ms"]["mean"] - d["tpot_ms"]["mean"]) / c["tpot_ms"]["mean"])
        assert imp["output_throughput"] == pytest.approx(
            100 * (d["output_tokens_per_s"] - c["output_tokens_per_s"]) / c["output_tokens_per_s"])
    assert {v["scenario"] for v in summary["verdicts"]} == set(SCENARIOS)


def test_charts_exist_and_are_not_blank(report):
    import matplotlib.image as mpimg

    charts = sorted((report / "charts").glob("*.png"))
    assert len(charts) == 2 * len(SCENARIOS)
    for png in charts:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = mpimg.imread(png)
        assert pixels.shape[0] > 300 and pixels.std() > 0.05, png.name  # drawn, not an empty canvas


def test_html_is_self_contained(report):
    page = (report / "report.html").read_text(encoding="utf-8")
    assert page.count("<img ") == 2 * len(SCENARIOS)
    assert page.count('src="data:image/png;base64,') == 2 * len(SCENARIOS)
    assert "http://" not in page.replace("https://aws.amazon.com", "")
    assert page.count("<table>") == 2 * len(SCENARIOS)


# --- bad inputs ---------------------------------------------------------------------------------------------


def _report(measured, results: str, out: Path):
    proc = subprocess.run([sys.executable, "-c", "import sys; from hyperpod_dpd.app import main; main(sys.argv[1:])",
                           "report", "--config", str(measured["config"]), "--results", results, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    return proc


def test_output_json_is_one_document_beside_the_report_it_wrote(measured, tmp_path):
    """``--output json``: the verdicts and files as one document on stdout (schema_version first), the same
    experiments and invalid runs as the report's own summary.json."""
    from hyperpod_dpd.app import app

    res = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                   str(measured["results"]), "--out", str(tmp_path / "r"), "--output", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == 1
    summary = json.loads((tmp_path / "r" / "summary.json").read_text(encoding="utf-8"))
    assert set(doc["experiments"]) == set(summary["experiments"])
    assert len(doc["invalid"]) == len(summary["invalid_runs"])
    assert [v["scenario"] for v in doc["verdicts"]] == list(SCENARIOS)
    assert all(Path(f).is_file() for f in doc["files"]) and str(tmp_path / "r" / "report.html") in doc["files"]


def test_missing_results_folder(measured, tmp_path):
    proc = _report(measured, str(tmp_path / "nope"), tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: --results {tmp_path / 'nope'} is not a folder "
                                                f"(local path or s3://bucket/prefix)"]
    assert not (tmp_path / "out").exists()


def test_partial_result_folder(measured, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(measured["results"], copy)
    victim = next((copy / "dpd").iterdir())
    for f in _run_files(victim):
        f.unlink()
    proc = _report(measured, str(copy), tmp_path / "out")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: results folder {victim} is partial") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_mismatched_matrices(measured, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(measured["results"], copy)
    gone = _run_files(copy / "colocated")[0]
    gone.unlink()
    proc = _report(measured, str(copy), tmp_path / "out")
    assert proc.returncode == 2
    assert "error: results: dpd and colocated ran different matrices in the equal-gpu experiment: only dpd has" \
        in proc.stderr


def test_a_failed_report_keeps_the_previous_one(measured, report, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(report, out)
    before = sorted(p.name for p in out.rglob("*"))
    proc = _report(measured, str(tmp_path / "nope"), out)
    assert proc.returncode == 2 and sorted(p.name for p in out.rglob("*")) == before


def test_endpoint_that_refuses_connections(measured, tmp_path):
    """A closed port: every request fails, genai-bench keeps no statistics, the runner exits non-zero."""
    from fake_http import free_port

    port = free_port()  # nothing listens there
    tok = measured["tmp"] / "tokenizer"
    env = _runner_env("dpd", ["short-in"], f"http://127.0.0.1:{port}", tok, tmp_path / "w",
                      BENCH_CONCURRENCY="1", BENCH_MAX_REQUESTS="2")
    proc = _run(env, tmp_path / "w")
    assert proc.returncode == 1
    assert not _run_files(tmp_path / "w")
    assert "No values found for metric" in proc.stdout + proc.stderr  # genai-bench: every request failed
    # The runner still publishes what there is (metadata, record, genai-bench's debug file) for bench to show.
    assert "HYPERPOD-BENCH-DONE dpd-short-in-c1 3" in proc.stdout

    from hyperpod_dpd.commands.bench import _failure_line

    assert _failure_line(proc.stdout + proc.stderr).startswith("ValueError: No values found for metric")


# --- planner estimates: present or absent ------------------------------------------------------------------


def test_planner_absent_and_present(measured, tmp_path, monkeypatch):
    """Only the switching is faked here: with hyperpod_analysis.plan importable, its rows appear beside the
    measurements; without it, the report says so. The estimate's numbers are the planner's business."""
    import types

    from hyperpod_dpd.app import app

    monkeypatch.setitem(sys.modules, "hyperpod_analysis.plan", None)  # import raises ImportError
    res = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                   str(measured["results"]), "--out", str(tmp_path / "absent")])
    assert res.exit_code == 0, res.output
    assert "planner not installed" in (tmp_path / "absent" / "report.md").read_text()

    calls = []

    def estimate_experiment(config, experiment, traffic, concurrencies):
        calls.append((experiment, list(traffic), list(concurrencies)))
        return [{"experiment": experiment, "traffic": t, "concurrency": c,
                 "colocated": {"ttft_ms": 1.5, "tpot_ms": 2.25, "e2e_p50_ms": 3.5, "output_tokens_per_s": 4.5},
                 "dpd": {"ttft_ms": 5.5, "tpot_ms": 6.25, "e2e_p50_ms": 7.5, "output_tokens_per_s": 8.5},
                 "improvement_pct": {"tpot": 11.0, "e2e_p50": 22.0, "output_throughput": 33.0},
                 "gpus": {"colocated": 16, "dpd": 16}}
                for t in traffic for c in concurrencies]

    monkeypatch.setitem(sys.modules, "hyperpod_analysis.plan",
                        types.SimpleNamespace(estimate_experiment=estimate_experiment))
    res = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                   str(measured["results"]), "--out", str(tmp_path / "present")])
    assert res.exit_code == 0, res.output
    # The measured runs are the equal-gpu experiment: the planner is asked for that experiment's layouts.
    assert len(calls) == 1 and calls[0][0] == "equal-gpu" and set(calls[0][1]) == set(SCENARIOS.values())
    assert calls[0][2] == [2, 4]
    md = (tmp_path / "present" / "report.md").read_text()
    assert md.count("+11.0% / +22.0% / +33.0%") == 2 * len(SCENARIOS)
    assert md.count("DPD vs colocated on as many GPUs") == len(SCENARIOS)
    assert md.count("| dpd (planner) | 16 | 5.5 | - | 6.25 | - | 7.5 | - | 8.5 |") == 2 * len(SCENARIOS)
    assert md.count("| colocated (planner) | 16 | 1.5 | - | 2.25 | - | 3.5 | - | 4.5 |") == 2 * len(SCENARIOS)


def test_results_from_s3(measured, tmp_path, monkeypatch):
    """``--results s3://...``: the same files read back through S3 (moto) give the same report numbers."""
    import boto3
    from moto import mock_aws

    from hyperpod_dpd.app import app

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="bench-results", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        for f in measured["results"].rglob("*.json"):
            s3.upload_file(str(f), "bench-results", f"runs/{f.relative_to(measured['results'])}")
        res = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                       "s3://bench-results/runs", "--out", str(tmp_path / "s3")])
        assert res.exit_code == 0, res.output
        empty = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                         "s3://bench-results/nothing", "--out", str(tmp_path / "none")])
    local = CliRunner().invoke(app, ["report", "--config", str(measured["config"]), "--results",
                                     str(measured["results"]), "--out", str(tmp_path / "local")])
    assert local.exit_code == 0
    md_s3 = (tmp_path / "s3" / "report.md").read_text().split("### DPD improvement")[1]
    md_local = (tmp_path / "local" / "report.md").read_text().split("### DPD improvement")[1]
    assert md_s3 == md_local
    from hyperpod_core.errors import UsageError

    assert isinstance(empty.exception, UsageError) and "holds no object" in str(empty.exception)
