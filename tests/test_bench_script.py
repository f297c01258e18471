"""``scripts/bench.py`` on bad input and when a step fails: one line on stderr, never a traceback or a usage block
(exit 2 for bad arguments, 1 for a failed step). Before, argparse printed its usage above the error, ``--pairs 0``
ran the set-up and two synths to end in ``statistics.StatisticsError`` (a median of nothing), ``--cli`` before
set-up in a ``FileNotFoundError`` traceback, and a failed case printed the last 2,000 characters of its stderr."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "scripts" / "bench.py"


def _bench(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("args", "line"), [
    (("--repeat", "abc"), "error: Invalid value for '--repeat': Input should be a valid integer, unable to parse "
                          "string as an integer"),
    (("--pairs", "0", "--cfn-include"), "error: Invalid value for '--pairs': Input should be greater than or equal "
                                        "to 1"),
    (("--bogus",), "error: No such option: --bogus"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, line) -> None:
    result = _bench(BENCH, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"{line} (see: scripts/bench.py --help)"]


def test_the_cli_bench_before_set_up_says_to_run_it(tmp_path) -> None:
    """A checkout without ``.venv`` (set-up never ran): ``--cli``, which runs no set-up, says so in one line."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(BENCH, tmp_path / "scripts" / "bench.py")
    result = _bench(tmp_path / "scripts" / "bench.py", "--cli")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: {tmp_path / '.venv' / 'bin' / 'python'} does not exist: run ./scripts/setup first"]


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("bench_script", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_a_failed_case_is_one_line_with_its_own_reason() -> None:
    """The command, its exit code and the last line it wrote on stderr (the entry points' one-line error; a
    traceback's last line), from each way the bench runs a case."""
    bench = _load()
    cmd = ["sh", "-c", "echo 'working...' >&2; echo 'error: endpoint.replicas must be >= 1, got 0' >&2; exit 2"]
    for measure in (bench.run, bench.wall):
        with pytest.raises(bench.Failed) as failed:
            measure(cmd, {"PATH": "/usr/bin:/bin"})
        assert str(failed.value) == f"{' '.join(cmd)} failed (exit 2): error: endpoint.replicas must be >= 1, got 0"
