"""``hyperpod-dpd bench``: the benchmark matrix against the DPD endpoint, then against the colocated baseline.

Reads the synthesized manifests of the environment (``dist/<endpoint>-{dpd,colocated,benchmark}.k8s.yaml``),
then, for each mode in turn (DPD first): applies that mode's endpoint manifest (same name: a replace) unless it
is already live, waits for ``DeploymentComplete``, runs every Job of that mode one at a time and collects its
result files (from S3 when ``benchmark.results_s3_uri`` is set, else from the pod log) into
``<workdir>/benchmark-results/<mode>/<run>/``. A run whose folder holds a result file is done: re-running the
command resumes where it stopped. The endpoint is left in the mode it was found in.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.console import Console

from hyperpod_analysis.report.results import METADATA, RUN_FILE, decode_log
from hyperpod_core import environment
from hyperpod_core.atomic import replace_dir
from hyperpod_core.config import Config
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_dpd.benchmark.download import download_s3
from hyperpod_dpd.commands.options import ConfigOption, EnvOption

if TYPE_CHECKING:  # the Kubernetes client loads when the command runs, not for --help
    from hyperpod_dpd.benchmark.kube import Kube

MODES = ("dpd", "colocated")
LABEL = "hyperpod-dpd/benchmark"

KubeconfigOption = Annotated[str | None, typer.Option("--kubeconfig", help="Kubeconfig file (default: "
                                                      "$KUBECONFIG or ~/.kube/config).", show_default=False)]
ContextOption = Annotated[str | None, typer.Option("--context", help="Kubeconfig context.", show_default=False)]
PollOption = Annotated[float, typer.Option("--poll-seconds", min=0.0, help="Status poll interval.")]
ReadyOption = Annotated[float, typer.Option("--ready-timeout", min=1.0,
                                            help="Seconds to wait for the endpoint after a switch.")]


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def _docs(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"{path} does not exist (synthesize first: python -m hyperpod_k8s.main --config ... "
                         f"--outdir {path.parent})")
    try:
        return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except yaml.YAMLError:
        raise UsageError(f"{path} is not valid YAML") from None


def run_key(job: dict[str, Any]) -> tuple[str, str]:
    labels = job["metadata"]["labels"]
    mode, scenario, n = labels[f"{LABEL}-mode"], labels[f"{LABEL}-scenario"], labels[f"{LABEL}-concurrency"]
    return mode, f"{mode}-{scenario}-c{n}"


def is_done(results: Path, job: dict[str, Any]) -> bool:
    mode, key = run_key(job)
    folder = results / mode / key
    return (folder / METADATA).is_file() and any(RUN_FILE.match(p.name) for p in folder.iterdir())


def _collect(kube: Kube, config: Config, job: dict[str, Any], results: Path) -> None:
    mode, key = run_key(job)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    target = results / mode / key
    tmp = Path(tempfile.mkdtemp(prefix=f".bench-{key}.", dir=results.parent))  # outside what report reads
    try:
        uri = config.benchmark.results_s3_uri
        if uri:
            download_s3(f"{uri.rstrip('/')}/{mode}/{key}", tmp, config.region)
        else:
            decode_log(kube.job_log(ns, name), tmp)
        if not (tmp / METADATA).is_file() or not any(RUN_FILE.match(p.name) for p in tmp.iterdir()):
            raise CommandFailed(f"run {key}: the Job succeeded but no result file came back")
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _failure_line(log: str) -> str:
    """The last line of a failed run's log that names an error (genai-bench's exception), else its last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("HYPERPOD-BENCH-")]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["(empty log)"])[-1]


def _waiting(out: Console, mode: str, state: str) -> None:
    out.print(f"  waiting for the {mode} endpoint: {state}", highlight=False)


def _running(out: Console, key: str, seconds: float) -> None:
    out.print(f"  {key}: running for {seconds:.0f} s", highlight=False)


def bench(config: ConfigOption = None, env: EnvOption = None, kubeconfig: KubeconfigOption = None,
          context: ContextOption = None, poll_seconds: PollOption = 10.0, ready_timeout: ReadyOption = 3600.0) -> None:
    """Run the benchmark matrix on DPD, switch to the colocated baseline, run it again (resumable)."""
    from hyperpod_dpd.benchmark.kube import Kube, api_client

    e = environment.resolve(config, env)
    c = e.config
    name, ns = c.endpoint.name, c.endpoint.namespace
    endpoints = {m: _docs(e.dist / f"{name}-{m}.k8s.yaml")[0] for m in MODES}
    bench_docs = _docs(e.dist / f"{name}-benchmark.k8s.yaml")
    jobs = [d for d in bench_docs if d.get("kind") == "Job"]
    if not jobs:
        raise UsageError(f"{e.dist / f'{name}-benchmark.k8s.yaml'} holds no Job (benchmark section empty?)")
    results = e.workdir / "benchmark-results"
    results.mkdir(parents=True, exist_ok=True)
    out = Console()
    todo = {m: [j for j in jobs if run_key(j)[0] == m and not is_done(results, j)] for m in MODES}
    total, done = len(jobs), sum(1 for j in jobs if is_done(results, j))
    if done:
        out.print(f"resuming: {done} of {total} runs already have results in {results}/", highlight=False)
    if not any(todo.values()):
        out.print(f"all {total} runs done; next: hyperpod-dpd report --results {results}", highlight=False)
        return
    left = sum(len(v) for v in todo.values())
    worst = sum(int(j["spec"]["activeDeadlineSeconds"]) for v in todo.values() for j in v) / 3600
    out.print(f"{left} runs to go (stop conditions: {c.benchmark.max_time_per_run_minutes} min or "
              f"{c.benchmark.max_requests_per_run} requests each; at most {worst:.1f} h with set-up)", highlight=False)
    kube = Kube(api_client(kubeconfig, context))
    for doc in bench_docs:
        if doc["kind"] in ("ConfigMap", "ServiceAccount"):
            kube.apply_core(doc)
    found = kube.live_mode(ns, name)
    index = done
    for mode in MODES:
        if not todo[mode]:
            continue
        if kube.live_mode(ns, name) != mode:
            out.print(f"switching endpoint {ns}/{name} to {mode} (re-apply, same name)", highlight=False)
            kube.apply_endpoint(endpoints[mode])
        kube.wait_endpoint_ready(ns, name, ready_timeout, poll_seconds, partial(_waiting, out, mode))
        for job in todo[mode]:
            index += 1
            _, key = run_key(job)
            jname = job["metadata"]["name"]
            out.print(f"[{index}/{total}] {key}: running Job {jname}", highlight=False)
            kube.start_job(job)
            limit = float(job["spec"]["activeDeadlineSeconds"]) + 300
            ok = kube.wait_job(ns, jname, limit, poll_seconds, partial(_running, out, key))
            if not ok:
                tail = _failure_line(kube.job_log(ns, jname))
                raise CommandFailed(f"run {key} failed (Job {jname}): {tail[:200]}; fix and re-run bench to resume")
            _collect(kube, c, job, results)
            kube.delete_job(ns, jname)
            out.print(f"[{index}/{total}] {key}: done", highlight=False)
    if found in MODES and kube.live_mode(ns, name) != found:
        out.print(f"restoring endpoint {ns}/{name} to {found}", highlight=False)
        kube.apply_endpoint(endpoints[found])
    out.print(f"all {total} runs done; next: hyperpod-dpd report --results {results}", highlight=False)
