"""Endpoint manifests, synthesized once per config per session through the real entry point."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
#: libyaml's safe loader: the same documents, ~10x faster on the 160 kB benchmark chart (parsed per test).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: case -> (config file, CDK outputs file or None). Snapshots live in snapshots/<case>/.
CASES: dict[str, tuple[Path, Path | None]] = {
    "default": (REPO_ROOT / "config" / "default.yaml", None),
    "p5en-two-prefill": (REPO_ROOT / "config" / "examples" / "p5en-two-prefill.yaml",
                         FIXTURES / "p5en-cdk-outputs.json"),
}


@dataclass(frozen=True)
class Synth:
    files: dict[str, str]
    """file name -> YAML text (names are unique across the dist/ folders: hyperpod_core.dist_layout)"""
    stdout: str
    stderr: str
    folders: dict[str, str]
    """file name -> its folder relative to dist/ (``<endpoint>/endpoint``, ``<endpoint>/placeholders/alternate``,
    ...)"""
    dist: Path

    def docs(self, file_suffix: str = "") -> list[dict]:
        return [d for name, text in sorted(self.files.items()) if name.endswith(file_suffix)
                for d in yaml.load_all(text, Loader=_LOADER) if d]

    def one(self, file_suffix: str) -> dict:
        (doc,) = self.docs(file_suffix)
        return doc


def _run(config: Path, outputs_file: Path | None, outdir: Path) -> Synth:
    from hyperpod_k8s import main

    # A copy outside the checkout: its folder (hyperpod_core.environment.folder_of) holds no cdk-outputs.json, so no
    # stray outputs file of the checkout's is read.
    shutil.copy(config, outdir.parent / f"cdk8s-{config.name}")
    argv = ["--config", str(outdir.parent / f"cdk8s-{config.name}"), "--outdir", str(outdir)]
    if outputs_file is not None:
        argv += ["--outputs-file", str(outputs_file)]
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = os.environ.pop(main.OUTPUTS_ENV, None), Path.cwd()
    os.chdir(outdir.parent)  # no stray ./cdk-outputs.json can leak into the default case
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main.main(argv)
    finally:
        os.chdir(saved_cwd)
        if saved_env is not None:
            os.environ[main.OUTPUTS_ENV] = saved_env
    paths = sorted(outdir.rglob("*.k8s.yaml"))
    files = {p.name: p.read_text(encoding="utf-8") for p in paths}
    assert len(files) == len(paths), "a file name repeats across the dist/ folders"
    folders = {p.name: str(p.parent.relative_to(outdir)) for p in paths}
    return Synth(files=files, stdout=out.getvalue(), stderr=err.getvalue(), folders=folders, dist=outdir)


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synth]:
    return {case: _run(cfg, outs, tmp_path_factory.mktemp(case) / "dist") for case, (cfg, outs) in CASES.items()}


@pytest.fixture(scope="session")
def crd_validator():
    from tests.k8s.crd_schema import CrdValidator

    from hyperpod_k8s.crd_source import resolve_crd

    return CrdValidator.from_file(resolve_crd())
