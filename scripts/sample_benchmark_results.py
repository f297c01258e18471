#!/usr/bin/env python3
"""Regenerate docs/sample-benchmark-report/: a small raw genai-bench result set, then the report ``report`` writes.

    .venv/bin/python scripts/sample_benchmark_results.py                # measure again, then render
    .venv/bin/python scripts/sample_benchmark_results.py --render-only  # the report only, from the raw set as it is

Needs ``.bench-venv`` (``./scripts/setup --tests``: genai-bench from the hash-pinned lock the benchmark Jobs install).
Offline: nothing leaves the machine.

What it does, step by step, the way ``hyperpod-dpd bench`` does it on a cluster:

1. synthesizes the config's manifests (``python -m hyperpod_k8s.main``, into a temp folder) and reads the benchmark
   Jobs from them; ``--only`` picks runs by name as ``bench --only`` does (default: two equal-GPU shapes of the
   default config, one above and one below the routing threshold, at concurrency 8 and 16);
2. runs each Job's runner (``runtime/hyperpod_runtime/bench_runner.py``) with the Job's own ``BENCH_*`` environment,
   except where a cluster is needed: the endpoint is ``tests/cli/bench_server.py``'s local OpenAI-compatible streaming
   server (one per mode, latencies shaped per role; numbers say nothing about GPUs), the tokenizer a word-level one
   built offline, and the stop conditions are ``--max-requests`` requests or one minute;
3. collects each run as ``bench`` does (``hyperpod_dpd.commands.bench``: the runner's pod-log lines decoded, then
   ``serving.json`` and, for DPD runs, ``dpd-path.json`` written with bench's own record functions) into
   ``raw/<mode>/<mode>-<scenario>-c<N>/``. What serves each run is the layout the manifests pin, all replicas ready;
   the prefill request count is the local server's count of requests it served the DPD way (prompt at or above the
   routing threshold), standing in for the prefill pods' ``vllm:request_success_total`` (its ``source`` says so).
   The machine's folders in genai-bench's recorded command line become ``<checkout>`` and ``<tmp>``;
4. renders the report with ``hyperpod-dpd report --config <config> --results docs/sample-benchmark-report/raw``
   from the checkout root and puts ``report.md``, ``report.html``, ``summary.json`` and ``charts/`` beside ``raw/``
   (``README.md`` and ``raw/`` stay). tests/cli/test_sample_report.py renders the committed raw set again and
   compares.

When the report changes (new columns, other wording), run ``--render-only`` and commit the result; when the raw
format changes (a new file ``bench`` writes per run), measure again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "docs" / "sample-benchmark-report"
RAW = SAMPLE / "raw"
BENCH_PY = REPO / ".bench-venv" / "bin" / "python"
RUNNER = REPO / "runtime" / "hyperpod_runtime" / "bench_runner.py"
#: The default selection: ``<mode>-<scenario>-c<N>`` of the default config's Jobs (shell patterns, as bench --only).
DEFAULT_RUNS = ("*-long-in-short-out-c8", "*-long-in-short-out-c16", "*-short-in-short-out-c8",
                "*-short-in-short-out-c16")
#: ``dpd-path.json``'s source: what the local server counted in place of the prefill pods' request counters.
LOCAL_COUNT = "bench_server: requests it served prefill-then-decode, in place of vllm:request_success_total"
#: The report's files, written by ``report`` and copied beside ``raw/``.
REPORT_FILES = ("report.md", "report.html", "summary.json", "charts")
sys.path[:0] = [str(REPO / "tests" / "cli"), str(REPO / "tests")]  # bench_server, fake_http

from hyperpod_core.errors import guarded, run_app  # noqa: E402  (after the test helpers' folders)


def _jobs(config_path: Path, tmp: Path) -> tuple[Any, Any, list[dict[str, Any]]]:
    """The config's only endpoint (its spec), its synthesized layout and its benchmark Jobs, from the config's own
    manifests."""
    import yaml

    from hyperpod_core.config import load_config
    from hyperpod_core.dist_layout import DistLayout

    spec = load_config(config_path).spec()  # one endpoint (a fleet's config: one line naming its endpoints)
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "hyperpod_k8s.main", "--config", str(config_path), "--outdir", str(dist)],
                   check=True, capture_output=True, cwd=tmp)
    layout = DistLayout.found(dist, spec.name, spec.endpoint.apply)
    docs = [d for d in yaml.safe_load_all(layout.benchmark_file.read_text(encoding="utf-8")) if d]
    return spec, layout, [d for d in docs if d.get("kind") == "Job"]


def _serving(manifest: dict[str, Any], name: str, mode: str) -> dict[str, dict[str, int]]:
    """What ``Kube.serving`` reads from a cluster that runs ``manifest`` with every replica ready."""
    from hyperpod_core.names import EndpointNames, Role

    def gpus(spec: dict[str, Any]) -> int:
        return int(spec["resources"]["limits"]["nvidia.com/gpu"])

    spec = manifest["spec"]
    if mode == "dpd":
        names = EndpointNames(name=name, namespace=manifest["metadata"]["namespace"])
        roles: dict[Role, dict[str, Any]] = {"prefill": spec["pdSpec"]["prefillSpec"],
                                              "decode": spec["pdSpec"]["decodingSpec"]}
        return {names.role_deployment(role): {"replicas": int(s["replicas"]), "ready": int(s["replicas"]),
                                              "gpus_per_pod": gpus(s)} for role, s in roles.items()}
    replicas = int(spec["replicas"])
    return {name: {"replicas": replicas, "ready": replicas, "gpus_per_pod": gpus(spec["worker"])}}


def _runner_env(job: dict[str, Any], url: str, tokenizer: Path, work: Path, max_requests: int) -> dict[str, str]:
    """The Job's own ``BENCH_*`` environment, but for what needs a cluster: the endpoint (the local server), the
    tokenizer (a local folder instead of the weights' S3 prefix), the stop conditions and the local folders."""
    env = {e["name"]: str(e.get("value", "")) for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    env.pop("BENCH_TOKENIZER_S3", None)
    return env | {"BENCH_API_BASE": url, "BENCH_TOKENIZER": str(tokenizer), "BENCH_MAX_REQUESTS": str(max_requests),
                  "BENCH_MAX_TIME_MINUTES": "1", "BENCH_OUTPUT_DIR": str(work), "HOME": str(work),
                  "MPLCONFIGDIR": str(work / "mpl"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class _Logs:
    """The one method of ``Kube`` that bench's ``_collect`` calls: the Job's log (here, the runner's stdout)."""

    def __init__(self) -> None:
        self.text = ""

    def job_log(self, namespace: str, name: str) -> str:
        return self.text


def measure(config_path: Path, only: list[str], max_requests: int) -> None:
    from bench_server import Shape, StreamingServer, build_tokenizer  # type: ignore[import-not-found]

    from hyperpod_dpd.commands import bench

    if not BENCH_PY.exists():
        raise SystemExit("error: .bench-venv is missing: run ./scripts/setup --tests (it installs genai-bench)")
    with tempfile.TemporaryDirectory(prefix="sample-bench-") as name:
        tmp = Path(name)
        spec, layout, jobs = _jobs(config_path, tmp)
        jobs = bench.select(jobs, only)
        tokenizer = build_tokenizer(BENCH_PY, tmp / "tokenizer")
        manifests = bench._manifests(layout)
        threshold = spec.endpoint.routing_threshold_tokens
        results = tmp / "raw"
        logs = _Logs()
        with StreamingServer(Shape("dpd", threshold=threshold)) as dpd, \
                StreamingServer(Shape("colocated", threshold=threshold)) as colocated:
            servers = {"dpd": dpd, "colocated": colocated}
            for job in sorted(jobs, key=lambda j: (bench.EXPERIMENTS.index(bench.experiment_of(j)),
                                                   bench.MODES.index(bench.run_key(j)[0]))):
                mode, key = bench.run_key(job)
                server = servers[mode]
                work = tmp / "work" / key
                work.mkdir(parents=True)
                env = _runner_env(job, server.url, tokenizer, work, max_requests)
                before = server.disaggregated
                print(f"{key}: genai-bench against the local {mode} server", file=sys.stderr)
                proc = subprocess.run([str(BENCH_PY), str(RUNNER)], env=env, cwd=work, capture_output=True,
                                      text=True, timeout=600)
                if proc.returncode != 0:
                    raise SystemExit(f"error: {key}: the runner exited {proc.returncode}: "
                                     f"{bench._failure_line(proc.stdout + proc.stderr)}")
                served = _serving(bench._docs(manifests[(bench.experiment_of(job), mode)])[0], spec.name, mode)
                extra: dict[str, Any] = {bench.SERVING: bench.serving_record(bench._gpus_of(job), served, served)}
                if mode == "dpd":  # bench's record of the prefill counters, the local server's count in their place
                    record = bench.dpd_path_record({"bench_server": float(before)},
                                                   {"bench_server": float(server.disaggregated)}, None)
                    extra[bench.DPD_PATH] = record | {"source": LOCAL_COUNT}
                logs.text = proc.stdout
                bench._collect(logs, job, results, spec.region, extra)  # type: ignore[arg-type]
        for path in results.rglob("*.json"):  # the machine's folders, as genai-bench recorded its command line
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace(str(tmp), "<tmp>").replace(str(REPO), "<checkout>"), encoding="utf-8")
        shutil.rmtree(RAW, ignore_errors=True)
        shutil.copytree(results, RAW)


def render(config_path: Path) -> None:
    """``hyperpod-dpd report`` over the committed raw set, from the checkout root (the report names its source as
    given: ``docs/sample-benchmark-report/raw``); its files replace the previous report's beside ``raw/``."""
    with tempfile.TemporaryDirectory(prefix="sample-report-") as name:
        out = Path(name) / "report"
        subprocess.run([sys.executable, "-m", "hyperpod_dpd", "report", "--config", str(config_path.relative_to(REPO)),
                        "--results", str(RAW.relative_to(REPO)), "--out", str(out)], check=True, cwd=REPO,
                       env={**os.environ, "MPLCONFIGDIR": str(Path(name) / "mpl")})
        for item in REPORT_FILES:
            target = SAMPLE / item
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            (shutil.copytree if (out / item).is_dir() else shutil.copy2)(out / item, target)


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="\n\n".join(f"\b\n{paragraph}" for paragraph in __doc__.split("\n\n")))  # as written
def _sample(config: Annotated[Path, typer.Option(metavar="PATH")] = REPO / "config" / "default.yaml",
            only: Annotated[list[str] | None, typer.Option(
                metavar="PATTERN", help=f"runs to measure, shell patterns (default: {', '.join(DEFAULT_RUNS)})")
            ] = None,
            max_requests: Annotated[int, typer.Option(metavar="N", help="requests per run")] = 32,
            render_only: Annotated[bool, typer.Option(
                "--render-only", help="render the report from the raw set as it is")] = False) -> None:
    config_path = config.resolve()
    if not render_only:
        measure(config_path, only or list(DEFAULT_RUNS), max_requests)
    render(config_path)
    size = sum(p.stat().st_size for p in RAW.rglob("*") if p.is_file())
    print(f"wrote {RAW.relative_to(REPO)}/ ({size / 1024:.0f} KiB) and the report beside it", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    run_app(app, argv, "scripts/sample_benchmark_results.py")


if __name__ == "__main__":
    guarded(main)
