"""The cdk8s entry point: config (+ CDK outputs) -> each endpoint's charts -> ``dist/<endpoint>/<folder>/*.k8s.yaml``.

Run through ``npx cdk8s synth`` (see ``cdk8s.yaml``) or directly as ``python -m hyperpod_k8s.main``.

* config: ``--config``, else ``$HYPERPOD_CONFIG``, else ``config/default.yaml``: the same file the CDK app
  reads, so the two cannot disagree.
* the config's folder (:func:`hyperpod_core.environment.folder_of`: the checkout's root for ``config/default.yaml``,
  ``envs/NAME/`` for an environment, ...): the manifests go to its ``dist/`` unless ``--outdir`` or ``npx cdk8s
  synth -o DIR`` names another folder (never the checkout's ``dist/`` for another config than the default);
* CDK outputs: ``--outputs-file``, else ``$HYPERPOD_CDK_OUTPUTS``, else ``cdk-outputs.json`` in the config's folder
  when it exists, else none (placeholders; see :mod:`hyperpod_core.inputs`).
  ``--require-outputs`` fails instead of writing a placeholder.
* staged weights (the revision in vLLM's ``--model``; :mod:`hyperpod_core.staged_model`): ``--staged-model-file``,
  else ``$HYPERPOD_STAGED_MODEL``, else ``staged-model.json`` beside the outputs file (in the config's folder
  without one) when it exists, else none: each endpoint's ``model.revision`` or a placeholder.

Where each deploy-time value came from is printed on stderr, one line per value; ``wrote <file>`` lines go
to stdout. Output is deterministic: the same inputs give byte-identical files.

Output layout (:mod:`hyperpod_core.dist_layout`), one folder per endpoint (``endpoints``, the composition loop is
here): ``<endpoint>/endpoint/`` holds exactly the one mode the endpoint's ``apply`` chooses, ``<endpoint>/alternate/``
the other mode, ``<endpoint>/reference/`` the aws-reference layouts, ``<endpoint>/benchmark/`` the Jobs; at the root,
``dashboards/`` the JSON to import and ``in-cluster-observability/`` the prometheus-operator and Grafana-sidecar
objects (only with ``observability.in_cluster_manifests``): each endpoint's, and the deployment's cluster-wide
PrometheusRule, built once here (never with the first endpoint, whose place a reordered config would move). While an
endpoint's manifests hold placeholders they go under ``<endpoint>/placeholders/`` and its ``endpoint/`` does not
exist, so ``kubectl apply -f dist/<endpoint>/endpoint/`` fails.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from hyperpod_core import environment, outputs, paths
from hyperpod_core.atomic import staged_dir
from hyperpod_core.config import Config, load_config
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import (
    DASHBOARDS,
    PLACEHOLDERS_README,
    DistLayout,
    apply_commands,
    cluster_alerts_file,
    placeholders_readme,
)
from hyperpod_core.errors import ConfigError, run_app
from hyperpod_core.inputs import DeploymentInputs, placeholders, remedies, resolve_inputs
from hyperpod_core.staged_model import RECORD_FILE
from hyperpod_core.teardown import fast_exit

OUTPUTS_ENV = "HYPERPOD_CDK_OUTPUTS"
STAGED_MODEL_ENV = "HYPERPOD_STAGED_MODEL"
#: ``output`` of cdk8s.yaml: the folder the cdk8s CLI names in ``$CDK8S_OUTDIR`` when ``-o DIR`` is not given.
CLI_SCRATCH_OUTPUT = ".cdk8s.out"


def config_path(cli_value: str | None) -> Path:
    given = cli_value or os.environ.get("HYPERPOD_CONFIG")
    return Path(given) if given else paths.checkout("the default config (or name one: --config)") / paths.DEFAULT_CONFIG


def outputs_path(cli_value: str | None, folder: Path = Path(".")) -> Path | None:
    """The outputs file to read, or ``None``. An explicitly named file must exist; else ``cdk-outputs.json`` in
    ``folder`` (the config's) when it exists."""
    given = cli_value or os.environ.get(OUTPUTS_ENV)
    if given:
        if not Path(given).is_file():
            raise ConfigError(f"--outputs-file / {OUTPUTS_ENV} {given!r} does not exist (write it with: cdk deploy "
                              f"--all --outputs-file {folder / outputs.DEFAULT_OUTPUTS_FILE})")
        return Path(given)
    default = folder / outputs.DEFAULT_OUTPUTS_FILE
    return default if default.is_file() else None


def staged_model_path(cli_value: str | None, outputs_file: Path | None, folder: Path = Path(".")) -> Path | None:
    """The staged-weights record to read, or ``None``. An explicitly named file must exist; else the one beside the
    outputs file, else in ``folder`` (``stage-model`` writes it into the config's folder, next to
    ``cdk-outputs.json``)."""
    given = cli_value or os.environ.get(STAGED_MODEL_ENV)
    if given:
        if not Path(given).is_file():
            raise ConfigError(f"--staged-model-file / {STAGED_MODEL_ENV} {given!r} does not exist (hyperpod-dpd "
                              f"stage-model writes {RECORD_FILE} into the environment folder)")
        return Path(given)
    beside = (outputs_file.parent if outputs_file is not None else folder) / RECORD_FILE
    return beside if beside.is_file() else None


def layout(spec: EndpointSpec, outdir: Path, inputs: DeploymentInputs) -> DistLayout:
    """Where :func:`synth` puts endpoint ``spec``'s files (its placeholders decide between the two layouts)."""
    return DistLayout.of(outdir, spec.name, spec.endpoint.apply,
                         unresolved=bool(placeholders(inputs.endpoint(spec.name))))


def build_charts(app: Any, config: Config, inputs: DeploymentInputs) -> None:
    """Add every endpoint's charts to the cdk8s ``app``, in the config's order, then the deployment's cluster-wide
    alerts (when in-cluster manifests are wanted): once, from no endpoint, so their file and namespace stay put
    whichever endpoint comes first."""
    from hyperpod_k8s.charts import build_endpoint
    from hyperpod_k8s.observability.cluster_alerts_chart import ClusterAlertsChart
    from hyperpod_k8s.observability.props import CLUSTER_ALERTS_NAME, cluster_alerts_props

    for spec in config.specs():
        build_endpoint(app, spec, inputs.endpoint(spec.name),
                       availability_zone_id=config.network.gpu_availability_zone_id)
    cluster = cluster_alerts_props(config.name, config.observability)
    if cluster is not None:
        ClusterAlertsChart(app, CLUSTER_ALERTS_NAME, props=cluster)


def synth(config: Config, outdir: Path, inputs: DeploymentInputs) -> list[Path]:
    """Build every endpoint's charts for ``config`` and write them to ``outdir``, each in its endpoint's
    :func:`layout`, and the dashboards; returns the files.

    Atomic: the files are written to a temp folder beside ``outdir`` which replaces ``outdir`` only when every
    chart and dashboard was written; a failure leaves the previous ``outdir`` exactly as it was.
    """
    import cdk8s  # jsii starts here, after the config is known to be valid

    from hyperpod_k8s.observability.delivery import write_dashboard_files

    specs = config.specs()
    with staged_dir(outdir) as tmp:
        charts = tmp / ".charts"
        app = cdk8s.App(outdir=str(charts), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
        build_charts(app, config, inputs)
        app.synth()
        layouts = [layout(spec, tmp, inputs) for spec in specs]
        written = []
        for chart_file in sorted(charts.glob("*.k8s.yaml")):
            target = _place(tmp, layouts, chart_file.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            chart_file.replace(target)
            written.append(target)
        charts.rmdir()
        for spec, placed in zip(specs, layouts, strict=True):
            missing = placeholders(inputs.endpoint(spec.name))
            if missing:
                (placed.base / PLACEHOLDERS_README).write_text(placeholders_readme(missing, spec.name),
                                                               encoding="utf-8")
        # Plain dashboard JSON to import into Grafana (the same definitions the AMG custom resource deploys).
        if config.observability.enabled:
            written += write_dashboard_files(specs, tmp / DASHBOARDS)
    return sorted(outdir / p.relative_to(tmp) for p in written)


def _place(root: Path, layouts: Sequence[DistLayout], chart_file: str) -> Path:
    """Where ``chart_file`` goes in the ``dist/`` folder ``root``: the deployment's cluster-wide alerts' own file, else
    its place in the endpoint layout that owns it (every other chart ID begins with its endpoint's name)."""
    if chart_file == cluster_alerts_file(root).name:
        return cluster_alerts_file(root)
    for placed in layouts:
        try:
            return placed.place(chart_file)
        except ValueError:
            continue
    raise ValueError(f"chart file {chart_file!r} has no place in the dist/ layout")


def default_outdir(environ: Mapping[str, str] = os.environ) -> str | None:
    """Where the manifests go without ``--outdir``: the folder ``npx cdk8s synth -o DIR`` names, else ``None`` (the
    config's ``dist/``).

    The cdk8s CLI passes its output folder as ``$CDK8S_OUTDIR``: ``-o DIR``, or cdk8s.yaml's scratch folder, which
    stands for the config's ``dist/`` (:func:`_show_to_cdk8s_cli`)."""
    given = environ.get("CDK8S_OUTDIR")
    return given if given and os.path.normpath(given) != CLI_SCRATCH_OUTPUT else None


def _show_to_cdk8s_cli(outdir: Path, written: Sequence[Path] = ()) -> None:
    """Under ``npx cdk8s synth``: point the CLI's output folder (``$CDK8S_OUTDIR``) at ``outdir``, and name on stderr
    the files of ``written`` the CLI does not list.

    The cdk8s CLI deletes its output folder *before* running the app, so ``cdk8s.yaml`` names a scratch
    folder (``.cdk8s.out``) as the CLI's output and passes ``--outdir dist`` to the app, which replaces
    ``dist/`` atomically; this link lets the CLI list the manifests it expects to find. The CLI lists ``*.yaml``
    files only and keeps the app's stdout (our ``wrote`` lines) to itself (cdk8s-cli ``lib/util.js``:
    ``findManifests``, ``shell``), so the dashboards' JSON would go unmentioned.
    """
    cli_outdir = os.environ.get("CDK8S_OUTDIR")
    if not cli_outdir:
        return
    unlisted = [p for p in written if p.suffix != ".yaml"]
    if unlisted:
        print("also written (the cdk8s CLI lists *.yaml only):", file=sys.stderr)
        for path in unlisted:
            print(f"  - {path}", file=sys.stderr)
    if Path(cli_outdir).resolve() == outdir.resolve():
        return
    link = Path(cli_outdir)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)
    link.symlink_to(outdir.resolve(), target_is_directory=True)


#: How the entry point names itself in its help and its one-line errors.
PROG = "python -m hyperpod_k8s.main"
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="Synthesize the DPD endpoint manifests with cdk8s.")
def _synth(
        config: Annotated[str | None, typer.Option(
            metavar="PATH", help="config YAML (default: $HYPERPOD_CONFIG or config/default.yaml)")] = None,
        outputs_file: Annotated[str | None, typer.Option(
            metavar="PATH", help=f"cdk deploy --outputs-file JSON (default: ${OUTPUTS_ENV}, else "
                                 f"{outputs.DEFAULT_OUTPUTS_FILE} in the config's folder when present)")] = None,
        staged_model_file: Annotated[str | None, typer.Option(
            metavar="PATH", help=f"record of the staged weights (default: ${STAGED_MODEL_ENV}, else "
                                 "staged-model.json beside the outputs file when present)")] = None,
        require_outputs: Annotated[bool, typer.Option(
            "--require-outputs", help="fail instead of writing placeholders for values only cdk deploy knows")
        ] = False,
        outdir: Annotated[str | None, typer.Option(
            metavar="DIR", help="folder of the manifests (default: npx cdk8s synth -o DIR, else the config's dist/)")
        ] = None,
) -> None:
    path = config_path(config)
    loaded = load_config(path)
    folder = environment.folder_of(path)[0]
    outdir = outdir if outdir is not None else default_outdir()
    if outdir is None:
        outdir = str(folder / "dist")
    else:  # the checkout's dist/ is the default config's
        environment.check_output_folder(path, Path(outdir), "dist", "-o" if default_outdir() else "--outdir")
    outputs_file_path = outputs_path(outputs_file, folder)
    inputs = resolve_inputs(loaded, outputs_file_path, staged_model_path(staged_model_file, outputs_file_path,
                                                                           folder))
    missing = placeholders(inputs)
    if missing and require_outputs:
        raise ConfigError(f"--require-outputs: unresolved {'; '.join(remedies(missing))}")
    from hyperpod_k8s.endpoint.props import cold_start_notes, limit_notes

    for line in inputs.lines():
        print(line, file=sys.stderr)
    specs = loaded.specs()
    for spec in specs:
        for note in (*limit_notes(spec), *cold_start_notes(spec)):
            print(f"note: {note}", file=sys.stderr)
    written = synth(loaded, Path(outdir), inputs)
    for written_path in written:
        print(f"wrote {written_path}")
    for spec in specs:
        rollout = f"hyperpod-dpd rollout --config {path}" + (f" --endpoint {spec.name}" if len(specs) > 1 else "")
        _print_next(layout(spec, Path(outdir), inputs), placeholders(inputs.endpoint(spec.name)), rollout)
    _show_to_cdk8s_cli(Path(outdir), written)


def _print_next(placed: DistLayout, missing: list[str], rollout: str) -> None:
    """On stderr, for one endpoint: where its manifests went and why when they are not deployable; else how to apply
    it (``rollout``: its ``hyperpod-dpd rollout`` command line)."""
    if placed.unresolved:
        print(f"note: endpoint {placed.name} is not deployable yet, so its endpoint, reference and benchmark "
              f"manifests are in {placed.base}/ (see its {PLACEHOLDERS_README}); {placed.folder}/endpoint/ is "
              f"written once every value is resolved: {'; '.join(remedies(missing))}", file=sys.stderr)
        return
    print(f"apply: exactly one endpoint ({placed.name}, {placed.applied}; the other mode is in "
          f"{placed.base / 'alternate'}/), one of:", file=sys.stderr)
    for line in apply_commands(f"{placed.endpoint_dir}/", rollout):
        print(f"  {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """The entry point: the command line of :func:`_synth` (``argv``, else the process's)."""
    run_app(app, argv, PROG)


if __name__ == "__main__":
    from hyperpod_core import node_banner

    node_banner.silence()  # before the first jsii import
    # The exit handlers run (jsii's stops its kernel and removes its runtime folder), the interpreter's teardown
    # does not: ~0.1 s of CPU of the cdk8s app's ~1 s.
    fast_exit(main)
