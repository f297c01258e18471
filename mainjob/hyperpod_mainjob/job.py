"""The main job in one process: config -> CloudFormation templates -> cfn-lint || Kubernetes manifests -> summary.

    python -O -m hyperpod_mainjob --config PATH | --env NAME [--outputs-file PATH]

``scripts/synth`` and ``hyperpod-dpd synth`` both run this, into the config's one folder
(:func:`hyperpod_core.environment.folder_of`: the checkout's root for ``config/default.yaml``, ``envs/NAME/`` for an
environment, ``out/...`` for another config of the checkout). What
used to be four processes (the CDK CLI around ``python app.py``, the cdk8s CLI around ``python -m
hyperpod_k8s.main``, cfn-lint, the summary) is one Python process with one jsii kernel:

* the CDK app is synthesized in-process by the function ``app.py`` calls
  (:func:`hyperpod_infra.app_builder.synthesize`), with the context the CLI would hand it
  (:func:`hyperpod_infra.cdk_cli.cli_context`), so the result is the same cloud assembly ``cdk synth`` writes
  and ``cdk deploy --app <cdk.out>`` deploys;
* built-in CloudFormation validation is off (``CDK_VALIDATION=false``): cfn-lint checks the same schemas, in a
  child process that runs while the manifests are synthesized;
* run with ``python -O``, jsii's runtime type checks (``if __debug__: check_type(...)`` in every generated
  binding) are skipped; the test suite runs with them on.

Both ``cdk.out/`` and ``dist/`` are built in temp folders and moved into place only when every step passed
(config, deploy outputs, CDK synth with cdk-nag, cfn-lint, cdk8s synth): a failure leaves the previous output
intact. Progress lines (one per step, with its duration) go to stderr; the summary to stdout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from hyperpod_core import environment, paths
from hyperpod_core.assembly import required_parameters, undeployable_line
from hyperpod_core.atomic import staged_dir
from hyperpod_core.config import load_config
from hyperpod_core.dist_layout import PLACEHOLDERS, DistLayout, apply_commands
from hyperpod_core.errors import CommandFailed, UsageError, run_app
from hyperpod_core.inputs import DeploymentInputs, placeholders, resolve_in_folder, resolve_inputs
from hyperpod_core.staged_model import RECORD_FILE
from hyperpod_core.telemetry.notices import notices
from hyperpod_infra.cdk_cli import cli_context
from hyperpod_k8s.endpoint.props import cold_start_notes, limit_notes
from hyperpod_k8s.main import synth as synth_manifests
from hyperpod_mainjob import summary
from hyperpod_mainjob.lint_worker import SETTINGS_FILE

#: What the main job needs a checkout for (cdk.json's feature flags, .cfnlintrc.yaml, the chart and CRD copies
#: set-up fetched); named in the one-line error when run from an installed wheel.
NEEDS_CHECKOUT = "the main job (./scripts/synth, hyperpod-dpd synth)"
#: cfn-lint children warmed up during the CDK synth: one (the other core runs the synth); it forks once the
#: templates exist (hyperpod_mainjob.lint_worker), when the synth is nearly done.
LINT_WORKERS = 1

#: Set before the first jsii import (the node kernel copies the environment once); see tooling.md. jsii's banner
#: about an unsupported Node.js is not silenced here: scripts/setup says it in one line, and scripts/env.sh then
#: silences the banner for that Node's major version (README.md, "The two commands").
JSII_ENV = {
    "CDK_VALIDATION": "false",
    "AWS_EC2_METADATA_DISABLED": "true",
}


class Progress:
    """One stderr line per step: ``[n/N] what ...`` when it starts, ``done in x.x s`` when it ends."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total, self.n, self.stream = total, 0, stream or sys.stderr

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.n += 1
        start = time.perf_counter()
        print(f"[{self.n}/{self.total}] {what} ...", file=self.stream, flush=True)
        yield
        print(f"      done in {time.perf_counter() - start:.1f} s", file=self.stream, flush=True)


@dataclass(frozen=True, kw_only=True)
class Result:
    cdk_out: Path
    dist: Path
    manifests: list[Path]
    lint_rc: int
    lint_output: str
    input_lines: list[str]
    lint_unchanged: int = 0


def synth_templates(config: Any, config_path: Path, outdir: Path) -> None:
    """The CDK app of ``config`` synthesized into ``outdir`` as ``cdk synth -c config=<config_path>`` would:
    the one synth path (:func:`hyperpod_infra.app_builder.synthesize`) with the CLI's context."""
    from hyperpod_infra.app_builder import synthesize

    synthesize(config, outdir=outdir, context=cli_context(config_path), announce=False)


def reuse_assets(previous: Path, outdir: Path) -> None:
    """Hard-link the content-addressed ``asset.<hash>`` entries of the previous ``cdk.out`` into ``outdir``.

    The CDK stages an asset only when ``asset.<hash>`` is not there yet, so unchanged assets (the 57 MB of
    kubectl and AWS CLI layers) are not copied again. Same hash, same bytes; a failure just means a copy.
    """
    for asset in previous.glob("asset.*"):
        try:
            if asset.is_dir():
                shutil.copytree(asset, outdir / asset.name, copy_function=os.link)
            else:
                os.link(asset, outdir / asset.name)
        except OSError:
            shutil.rmtree(outdir / asset.name, ignore_errors=True)


#: Clean cfn-lint results: an empty file per (cfn-lint version, .cfnlintrc.yaml, region, template bytes) that
#: linted clean, as ``eslint --cache`` or ruff's cache keep them. ``HYPERPOD_CFN_LINT_CACHE`` names another
#: folder, or ``off``. Findings are never cached: a template with findings is linted (and reported) every time.
LINT_CACHE = Path(".cache", "cfn-lint")
"""Relative to the checkout."""


def lint_cache() -> Path | None:
    value = os.environ.get("HYPERPOD_CFN_LINT_CACHE", "")
    return None if value == "off" else Path(value) if value else paths.checkout(NEEDS_CHECKOUT) / LINT_CACHE


def cfn_lint_settings() -> Path:
    """The checkout's ``.cfnlintrc.yaml``: the settings every cfn-lint run of the templates uses."""
    return paths.checkout(NEEDS_CHECKOUT) / SETTINGS_FILE


class CfnLint:
    """cfn-lint in :data:`LINT_WORKERS` warmed-up children (:mod:`hyperpod_mainjob.lint_worker`).

    Started before the CDK synth so their imports and rule loading overlap it; the templates are then split
    between them by size (the platform template alone is about half the work). cfn-lint checks the region
    the config deploys to. A template byte-identical to one that linted clean with the same cfn-lint,
    settings and region is not linted again (:data:`LINT_CACHE`); ``unchanged`` counts those.
    """

    def __init__(self, region: str, cache: Path | None = None) -> None:
        self.region, self.cache, self.settings = region, cache, cfn_lint_settings()
        self.unchanged = 0
        self._keys: list[Path] = []
        cmd = [sys.executable, "-m", "hyperpod_mainjob.lint_worker", str(self.settings), region]
        self.workers = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True) for _ in range(LINT_WORKERS)]

    def key(self, template: Path) -> Path | None:
        """Where a clean result for ``template`` is recorded (``None`` without a cache)."""
        if self.cache is None:
            return None
        from importlib.metadata import version

        digest = hashlib.sha256()
        for part in (version("cfn-lint").encode(), self.settings.read_bytes(), self.region.encode(),
                     template.read_bytes()):
            digest.update(hashlib.sha256(part).digest())
        return self.cache / digest.hexdigest()

    def send(self, cdk_out: Path) -> None:
        todo = []
        for template in sorted(cdk_out.glob("*.template.json"), key=lambda p: -p.stat().st_size):
            key = self.key(template)
            if key is not None and key.is_file():
                self.unchanged += 1
                continue
            todo.append(template)
            if key is not None:
                self._keys.append(key)
        bins: list[list[Path]] = [[] for _ in self.workers]
        sizes = [0] * len(self.workers)
        for template in todo:
            i = sizes.index(min(sizes))
            bins[i].append(template)
            sizes[i] += template.stat().st_size
        for worker, files in zip(self.workers, bins, strict=True):
            assert worker.stdin is not None
            worker.stdin.write("".join(f"{f}\n" for f in files))
            worker.stdin.close()

    def wait(self) -> tuple[int, str]:
        """Worst exit code and the findings of every worker; records the templates that linted clean."""
        outputs, rc = [], 0
        for worker in self.workers:
            assert worker.stdout is not None
            outputs.append(worker.stdout.read())
            rc = max(rc, worker.wait())
        if rc == 0:
            for key in self._keys:
                try:
                    key.parent.mkdir(parents=True, exist_ok=True)
                    key.touch()
                except OSError:
                    pass  # a cache that cannot be written only means linting again next time
        return rc, "".join(outputs).strip()

    def kill(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def run(config_path: Path, cdk_out: Path, dist: Path, outputs_file: Path | None,
        stamp: Callable[[Path], None] | None = None, stream: Any = None,
        staged_model_file: Path | None = None) -> Result:
    """Synthesize everything for ``config_path``; outputs move into place only when every step passed."""
    paths.checkout(NEEDS_CHECKOUT)
    for key, value in JSII_ENV.items():
        os.environ.setdefault(key, value)

    # Bad input fails here, in well under a second, before any progress line or output.
    config = load_config(config_path)
    inputs = resolve_inputs(config, outputs_file, staged_model_file)
    progress = Progress(3, stream)
    lint = CfnLint(config.region, lint_cache())
    try:
        with staged_dir(cdk_out) as tmp_out:
            with progress.step(f"CloudFormation templates (CDK app in-process, cdk-nag) -> {cdk_out}/"):
                reuse_assets(cdk_out, tmp_out)
                synth_templates(config, config_path, tmp_out)
                if stamp is not None:
                    stamp(tmp_out)
            lint.send(tmp_out)

            with staged_dir(dist) as tmp_dist:
                with progress.step(f"Kubernetes manifests (cdk8s app in-process) -> {dist}/"):
                    written = synth_manifests(config, tmp_dist, inputs)
                unchanged = f"; {lint.unchanged} unchanged since they linted clean" if lint.unchanged else ""
                with progress.step(f"cfn-lint on every template ({lint.settings.name}, region {config.region}"
                                   f"{unchanged})"):
                    lint_rc, lint_output = lint.wait()
                if lint_rc != 0:
                    print(lint_output, file=sys.stderr)
                    raise CommandFailed(f"cfn-lint: findings in the templates (listed above); previous "
                                        f"{cdk_out}/ and {dist}/ left as they were")
    finally:
        lint.kill()
    manifests = [dist / p.relative_to(tmp_dist) for p in written]
    return Result(cdk_out=cdk_out, dist=dist, manifests=manifests, lint_rc=lint_rc,
                  lint_output=lint_output, input_lines=inputs.lines(), lint_unchanged=lint.unchanged)


PROG = "python -m hyperpod_mainjob"
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


def main(argv: list[str] | None = None) -> None:
    """The entry point: the command line of :func:`_main_job` (``argv``, else the process's)."""
    run_app(app, argv, PROG)


@app.command(help="The main job: synthesize, validate and summarize one config.")
def _main_job(
        config: Annotated[str | None, typer.Option(metavar="PATH")] = None,
        workdir: Annotated[str | None, typer.Option(
            metavar="DIR", help="folder for cdk.out/ and dist/ (default: the config's, hyperpod_core.environment."
                                "folder_of; another folder is for tests: no command finds it)")] = None,
        outputs_file: Annotated[str | None, typer.Option(
            metavar="PATH", help="cdk deploy outputs (default: cdk-outputs.json in the config's folder when present)")
        ] = None,
        env_name: Annotated[str | None, typer.Option(
            "--env", metavar="NAME", help="environment name (envs/NAME/), instead of --config")] = None,
        via_cli: Annotated[bool, typer.Option("--via-cli", help="print next steps as hyperpod-dpd commands")] = False,
) -> None:
    if bool(env_name) == bool(config):
        raise UsageError("pass exactly one of --config PATH or --env NAME")
    paths.checkout(NEEDS_CHECKOUT)
    env = environment.resolve(config, env_name)
    if workdir:
        env = dataclasses.replace(env, workdir=Path(workdir))
    outputs = Path(outputs_file) if outputs_file else (
        env.outputs_file if env.outputs_file.is_file() else None)
    if outputs_file and not outputs.is_file():  # type: ignore[union-attr]
        raise UsageError(f"--outputs-file {outputs_file!r} does not exist")

    staged = env.workdir / RECORD_FILE  # what stage-model wrote into this environment's folder
    result = run(env.config_path, env.cdk_out, env.dist, outputs, stamp=env.write_stamp,
                 staged_model_file=staged if staged.is_file() else None)
    print("== Endpoint inputs (where each deploy-time value came from)")
    for line in result.input_lines:
        print(f"  {line}")

    for spec in env.config.specs():
        for note in (*limit_notes(spec), *cold_start_notes(spec)):
            print(f"  note: {note}")

    if lines := notices(env.config.observability):
        print("== Alerts and dashboards")
        for line in lines:
            print(f"  note: {line}")
    summary.print_summary(cdk_out=result.cdk_out, dist=result.dist, config=str(env.config_path),
                          lint_rc=result.lint_rc, lint_output=result.lint_output,
                          lint_unchanged=result.lint_unchanged,
                          next_steps=next_steps(env, deployed=outputs is not None, via_cli=via_cli))


def next_steps(env: Any, *, deployed: bool, via_cli: bool) -> list[str]:
    """The exact commands that come next (each acts on the ``cdk.out`` just written, of this config only); first
    how to make the templates deployable when CloudFormation would refuse them (:func:`undeployable_line`)."""
    blocked = undeployable_line(env.cdk_out, ["--all"])
    first = [f"NOT DEPLOYABLE YET: {blocked}",
             "./scripts/setup   # with access to raw.githubusercontent.com (or HYPERPOD_CHART_CACHE): fetches them",
             (f"hyperpod-dpd synth {env.selector}" if via_cli or env.name else f"./scripts/synth {env.config_path}")
             + "   # again: then the templates can deploy"] if blocked else []
    return first + _next_steps(env, deployed=deployed, via_cli=via_cli)


def _apply(env: Any) -> list[str]:
    """Both ways to apply each endpoint's folder, with when each fits: whether the endpoint is live is unknown
    offline (:func:`hyperpod_core.dist_layout.apply_commands`)."""
    lines = []
    specs = env.config.specs()
    for spec in specs:
        folder = DistLayout.of(env.dist, spec.name, spec.endpoint.apply).endpoint_dir
        rollout = f"hyperpod-dpd rollout {env.selector}" + (f" --endpoint {spec.name}" if len(specs) > 1 else "")
        lines += [f"{line}   (exactly one endpoint: {spec.name}, {spec.endpoint.apply})" if i == 0 else line
                  for i, line in enumerate(apply_commands(f"{folder}/", rollout))]
    return lines


def _not_deployable(env: Any, inputs: DeploymentInputs | None) -> str:
    """``<dist>/<endpoint>/placeholders/ is not deployable`` for every endpoint whose own inputs still hold a
    placeholder (each endpoint resolves its own: :func:`hyperpod_k8s.main.layout`), as one phrase; ``inputs``
    ``None``: nothing deployed yet, so every endpoint's."""
    specs = [s for s in env.config.specs() if inputs is None or placeholders(inputs.endpoint(s.name))]
    folders = ", ".join(f"{env.dist / spec.name / PLACEHOLDERS}/" for spec in specs)
    return f"{folders} {'is' if len(specs) == 1 else 'are'} not deployable"


def _stage_model(env: Any, inputs: DeploymentInputs) -> list[str]:
    """One ``stage-model`` line per endpoint whose weights' revision is unknown (``--endpoint NAME`` when the config
    serves several)."""
    specs = env.config.specs()
    unstaged = [s for s in specs if inputs.endpoint(s.name).model_revision.placeholder]
    return [f"hyperpod-dpd stage-model ./<model folder> {env.selector}"
            + (f" --endpoint {s.name}" if len(specs) > 1 else "")
            + f"   # records the weights' revision in {env.workdir / 'staged-model.json'} (or set "
              f"{s.model_field('revision')} in {env.config_path})" for s in unstaged]


def _next_steps(env: Any, *, deployed: bool, via_cli: bool) -> list[str]:
    apply = _apply(env)
    # What the synth could not resolve, read as it reads it: the outputs file and the staged-weights record of this
    # environment folder (a record of another prefix or bucket still leaves the revision a placeholder).
    inputs = resolve_in_folder(env.config, env.workdir) if deployed else None
    missing = placeholders(inputs) if inputs is not None else []
    outputs_missing = [m for m in missing if m != "model_revision"]
    synth = f"hyperpod-dpd synth {env.selector}" if via_cli or env.name else f"./scripts/synth {env.config_path}"
    if deployed:
        if not missing:
            return apply
        first = []
        if outputs_missing:
            deploy = f"hyperpod-dpd deploy {env.selector}" if via_cli or env.name else (
                f"npx cdk deploy --app {env.cdk_out} --all --outputs-file {env.outputs_file}")
            first.append(f"{deploy}   # {', '.join(outputs_missing)}: the outputs file lacks them")
        if inputs is not None and "model_revision" in missing:
            first += _stage_model(env, inputs)
        return [*first, f"{synth}   # again: {_not_deployable(env, inputs)} until "
                        f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} resolved", *apply]
    if via_cli or env.name:
        return [f"hyperpod-dpd preflight {env.selector}", f"hyperpod-dpd deploy {env.selector}"]

    needed = [(stack, name) for stack, names in required_parameters(env.cdk_out, ["--all"]).items()
              for name in names]
    params = [f" --parameters {stack}:{name}=" + ('"$ADMIN_ARN"' if name == "AdminPrincipalArn" else "<value>")
              for stack, name in needed]
    first = (["ADMIN_ARN=$(aws sts get-caller-identity --query Arn --output text | ./scripts/admin-principal-arn)"]
             if any(name == "AdminPrincipalArn" for _, name in needed) else [])
    return [*first, f"npx cdk deploy --app {env.cdk_out} --all --outputs-file {env.outputs_file}{''.join(params)}"
            f"   # deploys exactly the templates just written from {env.config_path}",
            f"./scripts/synth {env.config_path}   # again, with the outputs: {_not_deployable(env, None)}; this writes "
            f"{', '.join(f'{env.dist / s.name}/endpoint/' for s in env.config.specs())}"]
