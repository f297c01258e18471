"""``hyperpod-dpd bench``: the benchmark's two experiments, each DPD first and then colocated.

Reads the synthesized manifests of the environment (:mod:`hyperpod_core.dist_layout`: ``endpoint/`` and
``alternate/`` for the equal-GPU experiment, ``reference/`` for the aws-reference one, ``benchmark/`` for the Jobs;
it refuses ``placeholders/``). For each experiment and mode in turn (aws-reference, then equal-gpu; DPD first):
replaces the endpoint by that layout's manifest through the rollout's replace path (delete, wait until gone, apply,
wait until ready: :meth:`hyperpod_dpd.rollout.cluster.Cluster.replace`; one cold start per switch, and never a new
pod waiting for GPUs an old one holds) unless the live spec already holds it (the equal-gpu experiment's DPD layout
is the configured endpoint with its replicas pinned, autoscaling off: ``reference/<name>-equal-gpu-pinned.k8s.yaml``),
waits for ``DeploymentComplete`` (and, for a DPD layout without
autoscaling, refuses while a KEDA ScaledObject or an HPA still targets a role's Deployment, then waits until each
role runs exactly its pinned replicas: :mod:`hyperpod_dpd.benchmark.kube`), runs every Job of that group one at a
time and collects its result files (from S3 when ``benchmark.results_s3_uri`` is set, else from the pod log) into
``<workdir>/benchmark-results/<endpoint>/<mode>/<run>/``. Around every DPD run it reads the prefill pods'
finished-request counters (vLLM ``/metrics`` through the pod proxy), or else counts the router's
``disaggregate=True`` log lines, and stores them as ``dpd-path.json``: the report marks a DPD run whose requests did
not take the path its scenario declares as invalid. Before and after every run it reads what serves it (the
endpoint's Deployments, their ready replicas and GPUs per pod) and stores it as ``serving.json`` beside the GPUs the
run records; a run whose ready GPUs differ from those is marked invalid there (the report shows it and compares it
with nothing) and a warning is printed. A run whose folder holds a result file is done: re-running the command
resumes where it stopped. At the end the endpoint is restored, the same way, to the revision that serves as
``rollout`` recorded it, else to the synthesized manifest of the mode it was found in.

The endpoint's InferenceEndpointConfig is the one that serves it: ``<endpoint>-r<N>`` after a blue/green rollout (the
revision store's, :func:`hyperpod_dpd.rollout.store.live_name`): the layouts are applied under that name and the
Jobs call that revision's router. While a rollout of the endpoint is unfinished, bench refuses (one line).

Before anything changes: the config must be the one ``synth`` stamped (``cdk.out/hyperpod-dpd-source.json``: the
manifests are of this config), the kubeconfig context must talk to this deployment's cluster
(:mod:`hyperpod_dpd.kubeconfig`), and the plan (runs, the endpoint it replaces, the worst-case hours, the API server) is
shown and confirmed (``--yes`` skips the question; ``--dry-run`` shows the plan only). ``--only PATTERN`` runs the
runs whose name (``<mode>-<scenario>-c<concurrency>``) matches a shell-style pattern.

The endpoint is the one ``--endpoint`` names, else the config's only one: each endpoint has its own manifests
(:mod:`hyperpod_core.dist_layout`), Jobs and results folder; the others are not touched.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.console import Console

from hyperpod_analysis.report.results import DPD_PATH, METADATA, RUN_FILE, decode_log
from hyperpod_core import environment
from hyperpod_core.atomic import replace_dir
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import PLACEHOLDERS_README, DistLayout
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import EndpointNames
from hyperpod_dpd.benchmark.download import download_s3
from hyperpod_dpd.commands.options import (
    ConfigOption,
    DeploymentRegionOption,
    EndpointOption,
    EnvOption,
    OutputsFileOption,
    ProfileOption,
    ReadyTimeoutOption,
)
from hyperpod_dpd.confirm import DryRunOption, YesOption, confirm
from hyperpod_dpd.deployment import (
    ContextOption,
    Deployment,
    KubeconfigOption,
    endpoint_selector,
    load,
    results_dir,
    rollout_command,
)

if TYPE_CHECKING:  # the Kubernetes client loads when the command runs, not for --help
    from hyperpod_dpd.benchmark.kube import Kube
    from hyperpod_dpd.rollout.cluster import Cluster
    from hyperpod_dpd.rollout.store import Revision

MODES = ("dpd", "colocated")
EXPERIMENTS = ("aws-reference", "equal-gpu")
LABEL = "hyperpod-dpd/benchmark"
#: What served each run (the endpoint's Deployments before and after it), beside its result files.
SERVING = "serving.json"

OnlyOption = Annotated[list[str] | None, typer.Option(
    "--only", metavar="PATTERN", show_default=False,
    help="Run only the runs whose name matches (shell pattern, e.g. 'dpd-*-c8'; repeatable, or comma-separated). "
         "Default: every run.")]
PollOption = Annotated[float, typer.Option("--poll-seconds", metavar="SECONDS", min=0.0,
                                           help="Status poll interval.")]


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)


def _docs(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"{path} does not exist (synthesize first: hyperpod-dpd synth ...)")
    try:
        return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except yaml.YAMLError:
        raise UsageError(f"{path} is not valid YAML") from None


def run_key(job: dict[str, Any]) -> tuple[str, str]:
    labels = job["metadata"]["labels"]
    mode, scenario, n = labels[f"{LABEL}-mode"], labels[f"{LABEL}-scenario"], labels[f"{LABEL}-concurrency"]
    return mode, f"{mode}-{scenario}-c{n}"


def experiment_of(job: dict[str, Any]) -> str:
    return str(job["metadata"]["labels"].get(f"{LABEL}-experiment", "equal-gpu"))


def holds(live_spec: Any, wanted_spec: dict[str, Any]) -> bool:
    """The live endpoint runs ``wanted_spec``: the rollout's comparison finds no change
    (:func:`hyperpod_dpd.rollout.plan.changes`: every field the manifest sets, a quantity ``8`` as ``"8"``, and the
    blocks it leaves out that the API server never adds, such as ``pdSpec`` or ``pdSpec.autoScalingSpec``)."""
    from hyperpod_dpd.rollout.plan import changes

    return not changes(live_spec if isinstance(live_spec, dict) else {}, wanted_spec)


def _manifests(layout: DistLayout) -> dict[tuple[str, str], Path]:
    """(experiment, mode) -> the endpoint manifest that group runs against."""
    out: dict[tuple[str, str], Path] = {}
    for mode in MODES:
        out[("aws-reference", mode)] = layout.reference_file(mode)  # type: ignore[arg-type]
    out[("equal-gpu", "dpd")] = layout.pinned_file  # the configured DPD endpoint, autoscaling off
    out[("equal-gpu", "colocated")] = layout.endpoint_file("colocated")
    return out


def is_done(results: Path, job: dict[str, Any]) -> bool:
    mode, key = run_key(job)
    folder = results / mode / key
    return (folder / METADATA).is_file() and any(RUN_FILE.match(p.name) for p in folder.iterdir())


def job_env(job: dict[str, Any]) -> dict[str, str]:
    """The environment of the Job's runner container (what it runs and where it puts its results)."""
    return {e["name"]: str(e.get("value", "")) for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def _collect(kube: Kube, job: dict[str, Any], results: Path, region: str,
             extra: dict[str, Any] | None = None) -> None:
    """The run's result files, from where its Job put them: ``BENCH_RESULTS_S3/<mode>/<run>/`` (the runner's
    ``publish``) when the Job names a bucket, else its pod log."""
    mode, key = run_key(job)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    target = results / mode / key
    tmp = Path(tempfile.mkdtemp(prefix=f".bench-{key}.", dir=results.parent))  # outside what report reads
    try:
        uri = job_env(job).get("BENCH_RESULTS_S3")
        if uri:
            download_s3(f"{uri.rstrip('/')}/{mode}/{key}", tmp, region)
        else:
            decode_log(kube.job_log(ns, name), tmp)
        if not (tmp / METADATA).is_file() or not any(RUN_FILE.match(p.name) for p in tmp.iterdir()):
            raise CommandFailed(f"run {key}: the Job succeeded but no result file came back")
        for file_name, data in (extra or {}).items():
            (tmp / file_name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        replace_dir(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prefill_counts(kube: Kube, spec: EndpointSpec, names: EndpointNames) -> dict[str, float] | str:
    """The prefill pods' finished-request counters, or why they could not be read."""
    try:
        return kube.prefill_requests(names.namespace, names.name, spec.endpoint.container_port)
    except CommandFailed as exc:
        return str(exc)


def dpd_path_record(before: dict[str, float] | str, after: dict[str, float] | str,
                    router: dict[str, int] | str | None) -> dict[str, Any]:
    """What ``dpd-path.json`` holds: requests the prefill pods finished during the run (a pod that restarted or
    is new counts from zero), else the router's decisions; ``error`` when neither could be read."""
    if isinstance(before, dict) and isinstance(after, dict) and after:
        delta = sum(v - before.get(pod, 0.0) if v >= before.get(pod, 0.0) else v for pod, v in after.items())
        return {"source": "prefill pods' vllm:request_success_total", "prefill_requests": delta,
                "pods": sorted(after)}
    if isinstance(router, dict) and (router["True"] or router["False"]):
        return {"source": "router log 'disaggregate=' lines", "prefill_requests": router["True"],
                "direct_requests": router["False"]}
    reasons = [x for x in (before if isinstance(before, str) else "", after if isinstance(after, str) else "",
                           router if isinstance(router, str) else "") if x]
    return {"source": None, "error": "; ".join(reasons) or "no prefill pod and no router decision found"}


def _serving(kube: Kube, ns: str, name: str, mode: str) -> dict[str, dict[str, int]] | str:
    """What serves the endpoint now (:meth:`Kube.serving`), or why it could not be read."""
    try:
        return kube.serving(ns, name, mode)
    except CommandFailed as exc:
        return str(exc)


def serving_record(gpus: int, before: dict[str, dict[str, int]] | str,
                   after: dict[str, dict[str, int]] | str) -> dict[str, Any]:
    """What ``serving.json`` holds: the GPUs the run records (``BENCH_GPUS``, its layout's replicas), the endpoint's
    Deployments before and after it with the GPUs their ready pods held, and ``invalid``: why the run does not count
    (ready GPUs other than the recorded ones), ``None`` when it does (read by
    :func:`hyperpod_analysis.report.analysis.serving_problems`)."""
    record: dict[str, Any] = {"gpus_recorded": gpus, "before": before, "after": after}
    off = []
    for when, seen in (("before", before), ("after", after)):
        if isinstance(seen, dict):
            ready = sum(d["ready"] * d["gpus_per_pod"] for d in seen.values())
            record[f"ready_gpus_{when}"] = ready
            if ready != gpus:
                off.append(f"{ready} GPUs ready {when} the run")
    record["invalid"] = f"{', '.join(off)}, the run records {gpus}" if off else None
    return record


def pin(kube: Kube, out: Console, name: str, manifest: dict[str, Any], timeout_s: float, poll_s: float) -> None:
    """After a DPD layout without autoscaling was applied: refuse (one line) while a scaler still targets a role's
    Deployment, then wait until each role runs exactly its pinned replicas (module docstring)."""
    from hyperpod_dpd.benchmark.kube import PAUSED_REPLICAS

    ns, pd = manifest["metadata"]["namespace"], manifest["spec"]["pdSpec"]
    names = EndpointNames(name=name, namespace=ns)
    pinned = {names.role_deployment("prefill"): int(pd["prefillSpec"]["replicas"]),
              names.role_deployment("decode"): int(pd["decodingSpec"]["replicas"])}
    left = kube.scalers(ns, list(pinned))
    if left:
        kind, obj, target = left[0]
        fix = (f"remove it (kubectl delete scaledobject {obj} -n {ns}) or pause it at the pinned count (kubectl "
               f"annotate scaledobject {obj} -n {ns} {PAUSED_REPLICAS}={pinned[target]}; KEDA docs, Pausing "
               "autoscaling)" if kind == "ScaledObject" else f"remove it (kubectl delete hpa {obj} -n {ns})")
        more = f" (+{len(left) - 1} more)" if len(left) > 1 else ""
        raise CommandFailed(f"{kind} {ns}/{obj} still scales Deployment {target} after the pinned layout was applied: "
                            f"its replicas would not stay at the pinned {pinned[target]} the runs record; {fix}, then "
                            f"run bench again{more}")
    kube.wait_replicas(ns, pinned, timeout_s, poll_s,
                       lambda state: out.print(f"  waiting for the pinned replicas: {state}", highlight=False))


def _gpus_of(job: dict[str, Any]) -> int:
    return int(job_env(job)["BENCH_GPUS"])


def aimed_at(job: dict[str, Any], spec: EndpointSpec, names: EndpointNames) -> dict[str, Any]:
    """The Job calling the router of the InferenceEndpointConfig ``names`` (the revision that serves): the synth
    points ``BENCH_API_BASE`` at the endpoint's own router Service, which a blue/green revision ``<endpoint>-r<N>``
    does not have (its router is ``<endpoint>-r<N>-<ns>-routing-service``). A load balancer URL is left alone."""
    own, served = spec.names.router_service_host, names.router_service_host
    if own == served:
        return job
    containers = job["spec"]["template"]["spec"]["containers"]
    env = [{**v, "value": str(v["value"]).replace(f"//{own}:", f"//{served}:")} if v.get("name") == "BENCH_API_BASE"
           else v for v in containers[0]["env"]]
    return {**job, "spec": {**job["spec"], "template": {**job["spec"]["template"], "spec": {
        **job["spec"]["template"]["spec"], "containers": [{**containers[0], "env": env}, *containers[1:]]}}}}


def _failure_line(log: str) -> str:
    """The last line of a failed run's log that names an error (genai-bench's exception), else its last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith("HYPERPOD-BENCH-")]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["(empty log)"])[-1]


def _waiting(out: Console, mode: str, state: str) -> None:
    out.print(f"  waiting for the {mode} endpoint: {state}", highlight=False)


def _running(out: Console, key: str, seconds: float) -> None:
    out.print(f"  {key}: running for {seconds:.0f} s", highlight=False)


def select(jobs: list[dict[str, Any]], only: list[str] | None) -> list[dict[str, Any]]:
    """The Jobs whose run name matches one of ``only`` (shell patterns; comma-separated allowed); all without it.
    A pattern that matches no run is bad input (a typo would otherwise run nothing, or everything)."""
    patterns = [p.strip() for item in only or [] for p in item.split(",") if p.strip()]
    if not patterns:
        return jobs
    names = [run_key(j)[1] for j in jobs]
    for p in patterns:
        if not fnmatch.filter(names, p):
            shown = ", ".join(names[:6]) + (f", ... ({len(names)} runs)" if len(names) > 6 else "")
            raise UsageError(f"--only {p!r} matches no run; runs: {shown}")
    return [j for j, n in zip(jobs, names, strict=True) if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _unresolved(e: environment.Environment) -> str:
    """What resolves the placeholders the environment's synth left, per value (:func:`hyperpod_core.inputs.remedy`),
    then synthesize again."""
    from hyperpod_core.inputs import placeholders, remedies, resolve_in_folder

    missing = placeholders(resolve_in_folder(e.config, e.workdir))
    again = f"hyperpod-dpd synth {e.selector}"
    return (f"{'; '.join(remedies(missing, f'hyperpod-dpd deploy {e.selector}'))}; then {again}" if missing
            else f"every value is resolved now: {again}")


def _list_runs(out: Console, todo: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    """``--dry-run``: the runs to go, each with its experiment, mode and time limit."""
    for (experiment, mode), group_jobs in todo.items():
        for job in group_jobs:
            out.print(f"  {run_key(job)[1]} ({experiment}, {mode}; at most "
                      f"{int(job['spec']['activeDeadlineSeconds']) / 60:.0f} min)", highlight=False)
    out.print("dry run: nothing applied", highlight=False)


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """What bench runs: the benchmark manifest's documents, each (experiment, mode) group with the endpoint manifest it
    runs against, and the runs still to go."""

    docs: list[dict[str, Any]]
    """Every document of the benchmark manifest (the Jobs, their ConfigMap and ServiceAccount)."""
    jobs: list[dict[str, Any]]
    """The Jobs ``--only`` selects, each one run."""
    groups: list[tuple[str, str]]
    """(experiment, mode) of the selected runs, in the order they run."""
    manifests: dict[tuple[str, str], Path]
    endpoints: dict[tuple[str, str], dict[str, Any]]
    """(experiment, mode) -> the endpoint that group runs against."""
    configured: dict[str, dict[str, Any]]
    """Mode -> the configured endpoint (what the endpoint is restored to)."""
    results: Path
    todo: dict[tuple[str, str], list[dict[str, Any]]]
    """(experiment, mode) -> its runs without results yet."""
    done: int
    """Selected runs that have their results already."""

    @property
    def left(self) -> int:
        return sum(len(v) for v in self.todo.values())

    @property
    def worst_hours(self) -> float:
        return sum(int(j["spec"]["activeDeadlineSeconds"]) for v in self.todo.values() for j in v) / 3600


def _serving_revision(dep: Deployment, spec: EndpointSpec) -> tuple[EndpointNames, Revision | None]:
    """The InferenceEndpointConfig that serves ``spec``'s endpoint (:func:`hyperpod_dpd.rollout.store.live_name`:
    ``<endpoint>-r<N>`` after a blue/green rollout) and the revision store's record of it (``None``: never rolled
    out); refused (one line)
    while a rollout of it is unfinished: the benchmark would replace a revision the rollout is about to delete, or
    move the Service away from."""
    from hyperpod_dpd.rollout.store import RevisionStore, live_name

    store = RevisionStore.of(dep.env.workdir, spec.name)
    record = store.read()
    if record is not None and record.operation is not None:
        again = rollout_command(dep.env, spec)
        raise UsageError(f"a rollout of {spec.namespace}/{spec.name} is unfinished ({store.path}): finish it ({again}) "
                         f"or undo it ({again} --undo), then bench")
    return (EndpointNames(name=live_name(dep.env, spec), namespace=spec.namespace),
            record.current if record is not None else None)


def _restore_to(cluster: Cluster, names: EndpointNames, current: Revision | None, m: Matrix) -> dict[str, Any] | None:
    """What the endpoint is restored to once the runs are done: the revision that serves as ``rollout`` recorded it
    (its manifest), else the synthesized manifest of the mode that is live now (``None``: nothing live, nothing to
    restore)."""
    if current is not None and current.manifest:
        return current.manifest
    live = cluster.endpoint(names.namespace, names.name)
    if live is None:
        return None
    return m.configured["dpd" if "pdSpec" in (live.get("spec") or {}) else "colocated"]


def _as_served(doc: dict[str, Any], names: EndpointNames, number: int) -> dict[str, Any]:
    """An endpoint manifest of the synth (named after the endpoint) as the InferenceEndpointConfig that serves it:
    after a blue/green rollout, revision ``number`` named ``names.name``, its autoscaling queries re-anchored on that
    name (:func:`hyperpod_dpd.rollout.plan.revision_manifest`)."""
    from hyperpod_dpd.rollout.plan import revision_manifest

    return doc if doc["metadata"]["name"] == names.name else revision_manifest(doc, names.name, number)


def _matrix(e: environment.Environment, spec: EndpointSpec, only: list[str] | None, names: EndpointNames,
            number: int) -> Matrix:
    """The runs of the manifests the environment's synth wrote for ``spec``'s endpoint (refused while they hold
    placeholders), their endpoint manifests named as ``names`` (the InferenceEndpointConfig that serves the endpoint,
    revision ``number``: :func:`_serving_revision`)."""
    e.require_stamp()  # the manifests in dist/ are of the config as it is now
    layout = DistLayout.found(e.dist, spec.name, spec.endpoint.apply)
    if layout.unresolved:
        raise UsageError(f"{layout.base}/ holds manifests with placeholders (see its {PLACEHOLDERS_README}): "
                         f"{_unresolved(e)}, then bench")
    bench_docs = _docs(layout.benchmark_file)
    jobs = [d for d in bench_docs if d.get("kind") == "Job"]
    if not jobs:
        raise UsageError(f"{layout.benchmark_file} holds no Job (benchmark section empty?)")
    jobs = select(jobs, only)
    groups = [(x, m) for x in EXPERIMENTS for m in MODES if any(
        experiment_of(j) == x and run_key(j)[0] == m for j in jobs)]
    manifests = _manifests(layout)
    endpoints = {g: _as_served(_docs(manifests[g])[0], names, number) for g in groups}
    configured = {m: _as_served(_docs(layout.endpoint_file(m))[0], names, number)  # type: ignore[arg-type]
                  for m in MODES}
    results = results_dir(e, spec)
    todo = {g: [j for j in jobs if (experiment_of(j), run_key(j)[0]) == g and not is_done(results, j)]
            for g in groups}
    return Matrix(docs=bench_docs, jobs=jobs, groups=groups, manifests=manifests, endpoints=endpoints,
                  configured=configured, results=results, todo=todo,
                  done=sum(1 for j in jobs if is_done(results, j)))


def _show_plan(out: Console, spec: EndpointSpec, names: EndpointNames, m: Matrix, where: str) -> None:
    """The runs to go with their stop conditions and worst-case time, and which endpoint they replace where."""
    name, ns = names.name, names.namespace
    out.print(f"{m.left} runs to go (stop conditions: {spec.benchmark.max_time_per_run_minutes} min or "
              f"{spec.benchmark.max_requests_per_run} requests each; at most {m.worst_hours:.1f} h with set-up)",
              highlight=False)
    modes = sorted({mode for (_, mode), v in m.todo.items() if v}, key=MODES.index)
    out.print(f"plan: on {where}, endpoint {ns}/{name} is replaced by the {' and then the '.join(modes)} manifest "
              f"for its runs and restored afterwards; one Job per run in {ns}", highlight=False)


def _switch(kube: Kube, cluster: Cluster, out: Console, names: EndpointNames, m: Matrix, group: tuple[str, str],
            timeout_s: float, poll_s: float) -> None:
    """Make the endpoint run ``group``'s manifest and wait until it serves: replaced through the rollout's replace
    path (:meth:`hyperpod_dpd.rollout.cluster.Cluster.replace`: delete, wait until gone, apply, wait until ready)
    unless the live spec holds it already; a DPD layout without autoscaling also waits for its pinned replicas
    (:func:`pin`)."""
    experiment, mode = group
    name, ns = names.name, names.namespace
    wanted = m.endpoints[group]
    waiting = partial(_waiting, out, mode)
    live = cluster.endpoint(ns, name)
    if live is None or not holds(live.get("spec"), wanted["spec"]):
        out.print(f"switching endpoint {ns}/{name} to {mode} ({experiment}: {m.manifests[group].name}): delete, "
                  "wait until gone, apply (one cold start)", highlight=False)
        cluster.replace(wanted, timeout_s, waiting)
    else:
        cluster.wait_ready(ns, name, timeout_s, waiting)
    if mode == "dpd" and "autoScalingSpec" not in wanted["spec"]["pdSpec"]:
        pin(kube, out, name, wanted, timeout_s, poll_s)


def _run(kube: Kube, out: Console, spec: EndpointSpec, names: EndpointNames, job: dict[str, Any], results: Path,
         step: str, poll_s: float) -> None:
    """One run: its Job started and waited for, its result files collected beside what served it (and, on DPD, the
    path its requests took), the Job deleted. A failed Job ends the command (one line)."""
    name, ns = names.name, names.namespace
    mode, key = run_key(job)
    jname = job["metadata"]["name"]
    out.print(f"{step} {key}: running Job {jname}", highlight=False)
    job = aimed_at(job, spec, names)
    before = _prefill_counts(kube, spec, names) if mode == "dpd" else None
    serving_before = _serving(kube, ns, name, mode)
    started = time.monotonic()
    kube.start_job(job)
    limit = float(job["spec"]["activeDeadlineSeconds"]) + 300
    ok = kube.wait_job(ns, jname, limit, poll_s, partial(_running, out, key))
    if not ok:
        tail = _failure_line(kube.job_log(ns, jname))
        raise CommandFailed(f"run {key} failed (Job {jname}): {tail[:200]}; fix and re-run bench to resume")
    record = serving_record(_gpus_of(job), serving_before, _serving(kube, ns, name, mode))
    if record["invalid"]:
        out.print(f"  warning: {key}: {record['invalid']}: marked invalid (see {SERVING}); the report "
                  "compares it with nothing", highlight=False)
    extra: dict[str, Any] = {SERVING: record}
    if before is not None:
        extra[DPD_PATH] = _dpd_path(kube, spec, names, before, started)
    _collect(kube, job, results, spec.region, extra)
    kube.delete_job(ns, jname)
    out.print(f"{step} {key}: done", highlight=False)


def _dpd_path(kube: Kube, spec: EndpointSpec, names: EndpointNames, before: dict[str, float] | str,
              started: float) -> dict[str, Any]:
    """:func:`dpd_path_record` of a run that started at ``started`` (monotonic): the prefill pods' counters, else the
    router's decisions of the run's time span."""
    after = _prefill_counts(kube, spec, names)
    router: dict[str, int] | str | None = None
    if not (isinstance(before, dict) and isinstance(after, dict) and after):
        try:
            router = kube.router_decisions(names.namespace, names.name, int(time.monotonic() - started) + 60)
        except CommandFailed as exc:
            router = str(exc)
    return dpd_path_record(before, after, router)


def bench(config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None,
          kubeconfig: KubeconfigOption = None, context: ContextOption = None, poll_seconds: PollOption = 10.0,
          ready_timeout: ReadyTimeoutOption = 3600.0,
          only: OnlyOption = None, yes: YesOption = False, dry_run: DryRunOption = False,
          region: DeploymentRegionOption = None, profile: ProfileOption = None,
          outputs_file: OutputsFileOption = None) -> None:
    """Run the benchmark matrix on DPD, switch to the colocated baseline, run it again (resumable; asks first)."""
    from hyperpod_dpd.benchmark.kube import Kube
    from hyperpod_dpd.rollout.cluster import Cluster

    dep = load(config, env, region=region, changing="bench", outputs_file=outputs_file)
    spec = dep.endpoint(endpoint, "bench")
    names, current = _serving_revision(dep, spec)
    name, ns = names.name, names.namespace
    m = _matrix(dep.env, spec, only, names, current.number if current is not None else 0)
    out = Console(soft_wrap=True)  # one line per step, whatever the terminal width
    total = len(m.jobs)
    if m.done:
        out.print(f"resuming: {m.done} of {total} runs already have results in {m.results}/", highlight=False)
    if not any(m.todo.values()):
        out.print(f"all {total} runs done; next: {_report_command(dep, spec, m)}", highlight=False)
        return
    ctx = dep.check_context(kubeconfig, context)  # another cluster's context: refused before anything is shown
    where = f"{ctx.server} (kubeconfig context {ctx.name})" if ctx else "the kubeconfig's cluster"
    _show_plan(out, spec, names, m, where)
    if dry_run:
        _list_runs(out, m.todo)
        return
    confirm(f"run {m.left} benchmark runs (at most {m.worst_hours:.1f} h) on {where}, replacing endpoint {ns}/{name}?",
            yes=yes, command="hyperpod-dpd bench", cancelled="no run started; the endpoint is as it was")
    m.results.mkdir(parents=True, exist_ok=True)
    kube = Kube(dep.api_client(kubeconfig, context))
    cluster = Cluster(kube.kube, sleep=kube.sleep, clock=kube.clock, poll_seconds=poll_seconds)
    for doc in m.docs:
        if doc["kind"] in ("ConfigMap", "ServiceAccount"):
            kube.apply_core(doc)
    restore = _restore_to(cluster, names, current, m)
    index = m.done
    for group in m.groups:
        if not m.todo[group]:
            continue
        _switch(kube, cluster, out, names, m, group, ready_timeout, poll_seconds)
        for job in m.todo[group]:
            index += 1
            _run(kube, out, spec, names, job, m.results, f"[{index}/{total}]", poll_seconds)
    live = cluster.endpoint(ns, name)
    if restore is not None and not holds((live or {}).get("spec"), restore["spec"]):
        mode = "dpd" if "pdSpec" in restore["spec"] else "colocated"
        out.print(f"restoring endpoint {ns}/{name} to {mode}: delete, wait until gone, apply (one cold start)",
                  highlight=False)
        cluster.replace(restore, ready_timeout, partial(_waiting, out, mode))
    out.print(f"all {total} runs done; next: {_report_command(dep, spec, m)}", highlight=False)


def _report_command(dep: Deployment, spec: EndpointSpec, m: Matrix) -> str:
    """The ``report`` command of these results (:func:`hyperpod_dpd.deployment.endpoint_selector`)."""
    return f"hyperpod-dpd report {endpoint_selector(dep.env, spec)} --results {m.results}"
