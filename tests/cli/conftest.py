"""Run the ``hyperpod-dpd`` entry point in-process (so moto and monkeypatches apply), with its error guard."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lifecycle_fixtures import cli_process


@dataclass(frozen=True)
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """``run_cli("stage-model", ...)``: exit code, stdout and stderr of ``hyperpod_dpd.app.main``."""
    from hyperpod_dpd.app import main

    def run(*args: str) -> Ran:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


@pytest.fixture(scope="session")
def demo_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``hyperpod-dpd init demo`` then ``hyperpod-dpd synth --env demo`` in a temp folder ``cwd`` (environments in
    ``cwd/envs``, the temp folder ``cwd/temp``), once per session: ``(cwd, the synth's result)``."""
    cwd = tmp_path_factory.mktemp("ops")
    init = cli_process("init", "demo", cwd=cwd)
    assert init.returncode == 0, init.stderr
    (cwd / "temp").mkdir()
    result = cli_process("synth", "--env", "demo", cwd=cwd, TMPDIR=str(cwd / "temp"))
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd, result
