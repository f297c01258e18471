"""The operator commands that need no checkout work from the installed wheel, outside the checkout (issue 19).

The wheel (``pip wheel --no-deps`` of a copy of the sources, so the build leaves nothing in the checkout) goes
into a fresh venv without network (``--no-index``); the third-party dependencies come from the project's venv
through a ``.pth`` line, which puts that folder on ``sys.path`` without running its ``.pth`` files, so the
editable install's finder (``__editable__*.pth``) never loads and only the wheel's copy of our packages can be
imported. Then ``hyperpod-dpd`` runs from a folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

#: pip builds and installs a wheel (~6 CPU s): once, on one xdist worker, for every test of the module.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from: pyproject.toml and the source folders it maps (tests/test_layout.py).
SOURCES = ("core", "runtime", "infra", "constructs", "k8s", "cli", "analysis", "mainjob")


def _run(cmd: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYPERPOD_CONFIG", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel; returns its ``bin/``."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    shutil.copy2(REPO_ROOT / "pyproject.toml", src)
    for folder in SOURCES:
        shutil.copytree(REPO_ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "wheels"), str(src)],
                 cwd=tmp, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "wheels").glob("hyperpod_dpd_iac-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                 str(wheel)], cwd=tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp).stdout.strip())
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working folder outside the checkout, holding a copy of the default config."""
    shutil.copy2(REPO_ROOT / "config" / "default.yaml", tmp_path / "my.yaml")
    return tmp_path


def test_the_wheel_runs_its_own_copy_without_a_checkout(installed: Path, elsewhere: Path) -> None:
    probe = _run([str(installed / "python"), "-c",
                  "import sys, hyperpod_core.paths as p, hyperpod_dpd.app as a; "
                  "print(p.CHECKOUT, a.__file__, any('editable' in str(f) for f in sys.meta_path))"], cwd=elsewhere)
    checkout, source, editable_finder = probe.stdout.split()
    assert (checkout, editable_finder) == ("None", "False"), probe.stderr
    assert Path(source).is_relative_to(installed.parent), source


def test_validate_works_from_the_installed_wheel(installed: Path, elsewhere: Path) -> None:
    result = _run([str(installed / "hyperpod-dpd"), "validate", "--config", "my.yaml", "--json"], cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["config"], report["workdir"]) == ("my.yaml", "my.out")
    schema = _run([str(installed / "hyperpod-dpd"), "schema"], cwd=elsewhere)
    assert schema.returncode == 0, schema.stderr
    assert json.loads(schema.stdout)["title"] == "Config"


@pytest.mark.parametrize("command", [["synth", "--config", "my.yaml"], ["init", "staging"]])
def test_a_checkout_only_command_says_it_needs_the_checkout(installed: Path, elsewhere: Path,
                                                            command: list[str]) -> None:
    result = _run([str(installed / "hyperpod-dpd"), *command], cwd=elsewhere)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: hyperpod-dpd {command[0]} needs the repository checkout")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["my.yaml"], "nothing written"
