"""The ``hyperpod-dpd`` console script: installed by pyproject.toml, one config named explicitly, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"


def _cli(*args: str, cwd: Path = REPO_ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "HYPERPOD_CONFIG"} | env
    return subprocess.run([sys.executable, "-m", "hyperpod_dpd", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_console_script_is_installed_by_pyproject() -> None:
    """``pip install -e .`` (scripts/setup) puts ``hyperpod-dpd`` next to the interpreter."""
    script = Path(sys.executable).parent / "hyperpod-dpd"
    assert script.is_file(), "scripts/setup must install the console script declared in [project.scripts]"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "validate" in result.stdout


def test_validate_reports_the_named_config_as_json() -> None:
    result = _cli("validate", "--config", str(DEFAULT), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["config"] == str(DEFAULT)
    assert report["workdir"] == "."  # the checkout's root, where ./scripts/synth and the raw CLIs write (README)


def test_a_command_never_falls_back_to_a_config_nobody_named() -> None:
    result = _cli("validate")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: name the config: --config PATH, --env NAME or $HYPERPOD_CONFIG"


def test_env_folder_selects_its_own_config(tmp_path: Path) -> None:
    (tmp_path / "envs" / "staging").mkdir(parents=True)
    shutil.copy(DEFAULT, tmp_path / "envs" / "staging" / "config.yaml")
    result = _cli("validate", "--env", "staging", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["workdir"] == str(Path("envs") / "staging")


@pytest.mark.parametrize(("args", "message"), [
    (("--env", "nowhere"), "error: --env 'nowhere': envs/nowhere/config.yaml does not exist"),
    (("--env", "a", "--config", "b.yaml"), "error: pass either --config or --env, not both"),
    (("--config", "missing.yaml"), "error: config file 'missing.yaml' cannot be read"),
])
def test_bad_selection_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _cli("validate", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.stderr
