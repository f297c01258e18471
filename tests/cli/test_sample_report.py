"""``report`` renders offline from the raw genai-bench result set shipped in docs/sample-benchmark-report/raw/, and the
committed report beside it is exactly what it writes (issue 31 item 5, newcomer friction 12: ``report --results
docs/sample-benchmark-report`` found no experiment).

The raw set is real genai-bench 0.0.5 output (the benchmark Jobs' runner against a local streaming server) with the
files ``bench`` adds per run (``bench-run.json``, ``serving.json``, ``dpd-path.json``), written by
scripts/sample_benchmark_results.py, which also regenerates the report; after a change to the report, run it with
``--render-only`` and commit the result.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "docs" / "sample-benchmark-report"
RAW = SAMPLE / "raw"
REGENERATE = ".venv/bin/python scripts/sample_benchmark_results.py --render-only"
#: The raw set stays small: the run files hold every request's metrics.
MAX_RAW_BYTES = 400 * 1024


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``hyperpod-dpd report --config config/default.yaml --results docs/sample-benchmark-report/raw --out OUT`` from
    the checkout root, with every network connection refused."""
    from tests.checkout import copy_checkout

    from hyperpod_core import paths
    from hyperpod_dpd.app import app

    out = tmp_path_factory.mktemp("sample") / "report"
    checkout = copy_checkout(tmp_path_factory.mktemp("checkout") / "checkout")  # the default config's folder: its root

    def offline(*args: Any, **kwargs: Any) -> None:
        raise OSError("the report must render offline")

    saved = Path.cwd()
    os.chdir(checkout)  # the report names its source as given: the committed one says docs/sample-benchmark-report/raw
    try:
        with mock.patch.object(socket.socket, "connect", offline), mock.patch.object(paths, "CHECKOUT", checkout):
            result = CliRunner().invoke(app, ["report", "--config", "config/default.yaml", "--results",
                                              "docs/sample-benchmark-report/raw", "--out", str(out)])
    finally:
        os.chdir(saved)
    assert result.exit_code == 0, result.output
    return out


def _without_images(html: str) -> str:
    """The page with its embedded PNGs left out (their bytes depend on the font rasterizer; the charts' names and
    the tables are compared)."""
    return re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,..."', html)


def test_the_committed_report_is_what_report_writes_from_the_shipped_raw_set(rendered: Path) -> None:
    for name in ("report.md", "summary.json"):
        assert (rendered / name).read_text(encoding="utf-8") == (SAMPLE / name).read_text(encoding="utf-8"), \
            f"docs/sample-benchmark-report/{name} is stale: run {REGENERATE}"
    assert _without_images((rendered / "report.html").read_text(encoding="utf-8")) == \
        _without_images((SAMPLE / "report.html").read_text(encoding="utf-8")), f"report.html is stale: {REGENERATE}"
    charts = sorted(p.name for p in (rendered / "charts").iterdir())
    assert charts == sorted(p.name for p in (SAMPLE / "charts").iterdir())
    assert all((SAMPLE / "charts" / c).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for c in charts)


def test_the_raw_set_holds_what_bench_writes_per_run_and_the_report_shows_it(rendered: Path) -> None:
    """One folder per run, ``<mode>/<mode>-<scenario>-c<N>/``, as ``bench`` collects them: genai-bench's metadata and
    run file, the run's record, what served it and, for DPD runs, the prefill request count; small enough to ship."""
    folders = sorted(p.parent for p in RAW.rglob("experiment_metadata.json"))
    assert len(folders) == 8 and {f.parent.name for f in folders} == {"dpd", "colocated"}
    for folder in folders:
        record = json.loads((folder / "bench-run.json").read_text(encoding="utf-8"))
        scenario = next(iter(record["scenarios"].values()))
        assert folder.name == f"{record['mode']}-{scenario}-c{record['concurrency'][0]}"
        assert record["genai_bench_version"] == "0.0.5"  # k8s/hyperpod_k8s/benchmark/genai-bench.lock.txt
        assert [p.name for p in folder.glob("*_num_concurrency_*_time_*s.json")]
        serving = json.loads((folder / "serving.json").read_text(encoding="utf-8"))
        assert serving["invalid"] is None and serving["gpus_recorded"] == record["gpus"]
        assert (folder / "dpd-path.json").is_file() == (record["mode"] == "dpd")
    assert sum(p.stat().st_size for p in RAW.rglob("*") if p.is_file()) < MAX_RAW_BYTES
    md = (rendered / "report.md").read_text(encoding="utf-8")
    tables = [part.split("#### Cost per token")[0] for part in md.split("#### Measurements")[1:]]
    dpd_rows = [row for t in tables for row in t.splitlines() if row.startswith("| ") and "| dpd |" in row]
    # one folder per cell: each row's own count, never "folder-level"; the short prompts' rows show none on prefill
    assert len(dpd_rows) == 4 and all("| ok: " in row and " requests on prefill (" in row for row in dpd_rows)
    assert not any("folder-level" in row for row in dpd_rows)
    assert [row for row in dpd_rows if "| ok: 0 requests on prefill" in row] == dpd_rows[2:]
    assert "## Invalid runs" not in md and "Results: docs/sample-benchmark-report/raw." in md


def test_the_sample_shows_n_named_statistics_and_cost_per_token_and_decides_nothing_from_few_requests(
        rendered: Path) -> None:
    """The raw set's runs hold about 30 requests each after warm-up: fewer than a p95 needs (MIN_REQUESTS), so
    every row says n and is not judged, and no verdict is drawn; the costs use the pinned price."""
    summary = json.loads((rendered / "summary.json").read_text(encoding="utf-8"))
    assert summary["min_requests"] == 100 and summary["price"]["usd_per_instance_hour"] == 63.296
    cells = summary["experiments"]["equal-gpu"]["cells"]
    runs = [c[mode] for c in cells for mode in ("colocated", "dpd")]
    assert all(20 <= r["n"] < 100 and r["slo_judged"] is False for r in runs)
    assert all(r["cost_per_token"]["usd_per_million_input_tokens"] > 0 for r in runs)
    assert all(v["split"] is None and "too few requests for a p95" in v["reason"]
               for v in summary["experiments"]["equal-gpu"]["verdicts"])
    md = (rendered / "report.md").read_text(encoding="utf-8")
    assert "| n | client TTFT (mean) ms | client TTFT (p95) ms | TPOT (mean) ms | TPOT (p95) ms | E2E (p50) ms |" in md
    assert md.count("#### Cost per token") == 2


@pytest.mark.parametrize("where", ["the results' parent", "the results folder", "a folder that is not a report"])
def test_an_out_folder_that_would_replace_what_is_not_a_report_is_refused(run_cli, tmp_path: Path, where: str,
                                                                          default_config_copy: Path) -> None:
    """``report`` replaces ``--out`` whole (atomically); a folder that holds the results, or anything but a previous
    report, is refused before anything is read: one line, exit 2, every file kept."""
    import shutil

    shutil.copytree(RAW, tmp_path / "sample" / "raw")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    out = {"the results' parent": tmp_path / "sample", "the results folder": tmp_path / "sample" / "raw",
           "a folder that is not a report": tmp_path / "other"}[where]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    result = run_cli("report", "--config", str(default_config_copy), "--results",
                     str(tmp_path / "sample" / "raw"), "--out", str(out))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: --out {out} ") and result.stderr.count("\n") == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_without_results_yet_the_line_says_run_bench_and_names_the_sample(run_cli, tmp_path: Path,
                                                                           default_config_dict) -> None:
    """No --results and nothing collected yet: the line does not blame an option the user did not pass."""
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(default_config_dict))
    result = run_cli("report", "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, "")
    results = tmp_path / "c.out" / "benchmark-results" / "llama-3-3-70b"  # the endpoint's own folder
    assert result.stderr == (f"error: no results yet: {results}/ does not exist; "
                             f"run: hyperpod-dpd bench --config {config} (or pass --results DIR|s3://bucket/prefix; "
                             "the shipped sample: --results docs/sample-benchmark-report/raw)\n")


def test_a_fleets_report_is_of_the_endpoint_named(run_cli, tmp_path: Path) -> None:
    """Each endpoint has its own results (bench collects into benchmark-results/<endpoint>/): a config of several
    endpoints needs --endpoint (one line naming them), and then reads that endpoint's folder. Fails before:
    Config.endpoint raised TypeError."""
    import shutil

    config = tmp_path / "c.yaml"
    shutil.copy(Path(__file__).resolve().parents[2] / "config" / "examples" / "two-models.yaml", config)
    result = run_cli("report", "--config", str(config))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (f"error: --endpoint must name the endpoint hyperpod-dpd report acts on: {config} serves "
                             "2 endpoints (llama-3-3-70b, llama-3-1-8b)\n")
    result = run_cli("report", "--config", str(config), "--endpoint", "llama-3-1-8b")
    results = tmp_path / "c.out" / "benchmark-results" / "llama-3-1-8b"
    assert result.stderr.startswith(f"error: no results yet: {results}/ does not exist; run: hyperpod-dpd bench "
                                    f"--config {config} --endpoint llama-3-1-8b (or pass")


def test_report_writes_nothing_in_the_home_or_temp_folder(tmp_path, default_config_copy) -> None:
    """``report`` from a checkout keeps matplotlib's font list (built on its first chart) in the checkout's
    ``.cache/matplotlib/`` beside the project's other caches, and leaves nothing in the home folder or the temp
    folder (issue 31 item 4). Fails on main: ``~/.cache/matplotlib/fontlist-v3.11.0.json`` and an empty
    ``~/.config/matplotlib/`` (matplotlib's defaults, undocumented)."""
    import subprocess
    import sys

    home, temp = tmp_path / "home", tmp_path / "temp"
    home.mkdir()
    temp.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TMPDIR": str(temp)}
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd", "report", "--config", str(default_config_copy),
                             "--results", str(RAW), "--out", str(tmp_path / "out")], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert sorted(str(p.relative_to(tmp_path)) for p in [*home.rglob("*"), *temp.rglob("*")]) == []
    assert list((REPO / ".cache" / "matplotlib").glob("fontlist-*.json"))
