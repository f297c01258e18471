"""The config matrix: every config under ``config/`` (the default and ``config/examples/*.yaml``) synthesized
once per test session, the way the main job does it, for every check that runs on every config.

One synthesis per config gives everything the checks read: the CDK app through the one synth path
(:func:`hyperpod_infra.app_builder.synthesize`: every stack, cdk-nag, with the context ``cdk synth`` hands the
app, so ``cdk.json``'s feature flags apply as on a deploy), its unacknowledged cdk-nag findings, and the cdk8s
app's manifests. cfn-lint and checkov then run once over all of them (tests/infra/test_validation.py), and the
deployment facts (tests/test_deploy_facts.py) read the same templates.

All matrix tests share one xdist worker (group :data:`MATRIX_GROUP`, added by the root conftest), so the
per-worker session cache holds each config exactly once. A crash in either app is kept as the traceback text
and fails each check of that config with it; :data:`KNOWN_FAILURES` marks what fails today because of a bug
another helper is fixing, as strict xfails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hyperpod_core.config import Config, load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "default.yaml"
MATRIX_CONFIGS: list[Path] = [DEFAULT_CONFIG_PATH, *sorted((REPO_ROOT / "config" / "examples").glob("*.yaml"))]
MATRIX_NAMES: list[str] = [p.name for p in MATRIX_CONFIGS]

#: The xdist group of every test that reads a matrix synthesis: one worker, so each config is built once.
MATRIX_GROUP = "config-matrix"

#: Fails today because of a bug another helper is fixing in parallel (issue 20): ``(config file, test function
#: or "*" for all of that config's matrix tests) -> reason``. Each becomes ``xfail(strict=True)``: the fix turns
#: it into a failure, and its entry must go.
KNOWN_FAILURES: dict[tuple[str, str], str] = {
}


def known_failure(config_name: str, test_name: str) -> str | None:
    return KNOWN_FAILURES.get((config_name, test_name)) or KNOWN_FAILURES.get((config_name, "*"))


@dataclass
class Synthesized:
    """One config through both apps, as the main job builds it (``cdk.out/`` and ``dist/``)."""

    path: Path
    config: Config
    cdk_out: Path
    dist: Path
    templates: dict[str, dict] = field(default_factory=dict)
    """CloudFormation stack name -> template, as written to ``cdk_out``."""
    template_files: dict[str, Path] = field(default_factory=dict)
    """CloudFormation stack name -> template file."""
    nag_findings: list[str] = field(default_factory=list)
    """Unacknowledged cdk-nag findings (``rule at path``); empty when synth passed."""
    manifests: list[dict] = field(default_factory=list)
    dependencies: dict[str, set[str]] = field(default_factory=dict)
    """CloudFormation stack name -> the stack names it deploys after (the cloud assembly's ``dependencies``)."""
    crash: str | None = None
    """Traceback of an exception in either app (a valid config must never raise one)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per phase: ``cdk`` (build + synth + cdk-nag), ``cdk8s``."""

    @property
    def name(self) -> str:
        return self.path.name

    def require(self) -> Synthesized:
        """This synthesis, or the test fails with the crash's traceback."""
        if self.crash is not None:
            import pytest

            pytest.fail(f"{self.name} crashed during synth:\n{self.crash}", pytrace=False)
        return self

    def require_manifests(self) -> Synthesized:
        """This synthesis, or the test fails with the cdk8s app's crash: for the checks that read the manifests
        only (the two apps are synthesized one after the other, each crash kept with its phase)."""
        if self.crash is not None and "[cdk8s] " in self.crash:
            import pytest

            pytest.fail(f"{self.name}'s cdk8s app crashed during synth:\n{self.crash}", pytrace=False)
        return self


def _cdk(entry: Synthesized) -> None:
    from hyperpod_core.errors import CommandFailed
    from hyperpod_infra.app_builder import synthesize
    from hyperpod_infra.cdk_cli import cli_context

    # The context `cdk synth -c config=<path>` hands the app (cdk.json's feature flags included); assets are
    # not copied (57 MB of Lambda layers per config; their hashes in the templates are the same).
    context = {**cli_context(entry.path), "aws:cdk:disable-asset-staging": True}
    # CommandFailed: unacknowledged findings, listed in nag-findings.json; the templates are written.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            contextlib.suppress(CommandFailed):
        synthesize(entry.config, outdir=entry.cdk_out, context=context)
    report = json.loads((entry.cdk_out / "nag-findings.json").read_text())
    entry.nag_findings = [f"{f['rule']} at {f['path']}" for f in report["findings"] if f["acknowledged_by"] is None]
    manifest = json.loads((entry.cdk_out / "manifest.json").read_text())
    stacks = {aid: a["properties"]["stackName"] for aid, a in manifest["artifacts"].items()
              if a["type"] == "aws:cloudformation:stack"}
    for aid, stack_name in stacks.items():
        artifact = manifest["artifacts"][aid]
        path = entry.cdk_out / artifact["properties"]["templateFile"]
        entry.template_files[stack_name] = path
        entry.templates[stack_name] = json.loads(path.read_text())
        entry.dependencies[stack_name] = {stacks[d] for d in artifact.get("dependencies", []) if d in stacks}


def _cdk8s(entry: Synthesized) -> None:
    """The cdk8s entry point as ``python -m hyperpod_k8s.main --config <path>`` runs it, without outputs file."""
    from hyperpod_k8s import main

    # A copy outside the checkout: its folder (hyperpod_core.environment.folder_of) holds no cdk-outputs.json, so no
    # stray outputs file of the checkout's is read.
    config = entry.dist.parent / f"cdk8s-{entry.path.name}"
    shutil.copy(entry.path, config)
    saved_env, saved_cwd = os.environ.pop(main.OUTPUTS_ENV, None), Path.cwd()
    os.chdir(entry.dist.parent)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main.main(["--config", str(config), "--outdir", str(entry.dist)])
    finally:
        os.chdir(saved_cwd)
        if saved_env is not None:
            os.environ[main.OUTPUTS_ENV] = saved_env
    entry.manifests = [d for p in sorted(entry.dist.rglob("*.k8s.yaml"))
                       for d in yaml.load_all(p.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def synthesize(path: Path, workdir: Path) -> Synthesized:
    """``path`` through the CDK app (with cdk-nag) and the cdk8s app into ``workdir``/{cdk.out,dist}."""
    workdir.mkdir(parents=True, exist_ok=True)
    entry = Synthesized(path=path, config=load_config(path), cdk_out=workdir / "cdk.out", dist=workdir / "dist")
    for phase, step in (("cdk", _cdk), ("cdk8s", _cdk8s)):
        start = time.perf_counter()
        try:
            step(entry)
        except Exception:  # kept, and reported by every check of this config
            entry.crash = (entry.crash or "") + f"[{phase}] " + traceback.format_exc()
        entry.seconds[phase] = time.perf_counter() - start
    return entry


def matrix_param(value: Any) -> str | None:
    """The matrix config a collected test runs on: a parameter value that names one."""
    return value if isinstance(value, str) and value in MATRIX_NAMES else None
