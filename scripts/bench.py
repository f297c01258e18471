#!/usr/bin/env python3
"""Benchmark: wall time and peak RSS of the main job and its parts, side by side in one run; start-up of the
command line against a bare interpreter.

    .venv/bin/python scripts/bench.py [--repeat 3] [--pairs 7]   # all of it
    .venv/bin/python scripts/bench.py --cfn-include [--pairs 7]  # python -O app.py against the CfnInclude floor only
    .venv/bin/python scripts/bench.py --cli                      # the command line only (seconds, no set-up)

Bad arguments end in one line (exit 2); a case that fails ends the run in one line with the command, its exit code
and the last line it wrote on stderr (exit 1).

Measures (after set-up, warm caches, one unmeasured warm-up run of each case): the whole main job
(scripts/synth), `python -O app.py` alone, the cdk8s synth alone, and the floor: an empty CDK app with jsii's
runtime type checks off (`python -O`: the generated bindings check types only `if __debug__`) and the built-in
template validation off (CDK_VALIDATION=false, as in every case: cfn-lint replaces it). Prints wall times,
peak RSS (largest process of the command's tree, from wait4 rusage) and the ratios against the floor, all
from one run so that machine load affects them alike; asserts nothing.

The floor of issue 31: ``python -O app.py`` (A) against the same templates rebuilt by the CDK alone (B: each
template of the assembly A wrote included whole with ``aws_cdk.cloudformation_include.CfnInclude`` into a stack and
synthesized, :data:`INCLUDE_APP`), timed in pairs A B A B ... in one run: the ratio of each pair, then the median.
Both run under a wrapper (:data:`PHASED`) that notes when ``cdk.App()`` is called and when ``app.synth()`` starts
and returns, so each part (start-up, construct work, synth, after synth: the exit) gets its own ratio and what it
adds to the whole ratio. Target: <= 2.5x.

Targets (issue 12): python app.py <= 2x the floor, the main job <= 5x. The main job is timed twice: as a rerun
with unchanged templates (cfn-lint's cache of clean results, in a folder of this run, skips them) and with that
cache off (every template linted, as after a change to every stack). For comparison the run also times the
pipeline the main job replaced (CDK and cdk8s CLIs spawned around Python, cfn-lint in series).

Command line (issue 24): ``hyperpod-dpd --help``, a subcommand's ``--help`` and ``validate`` against a bare
``python -c pass`` of the same interpreter, each timed directly (no wrapper process). Target: --help <= 6x.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from hyperpod_core.errors import CommandFailed, guarded, run_app

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
EMPTY_APP = "import aws_cdk as cdk\napp = cdk.App()\ncdk.Stack(app, 'Empty')\napp.synth()\n"
PREVIOUS_MAIN_JOB = (
    "set -e; . scripts/env.sh; ./scripts/setup; .venv/bin/python -m hyperpod_core.config config/default.yaml"
    " >/dev/null; npx --no-install cdk synth --quiet --no-validation -o {out}/cdk.out.previous"
    " -c config=config/default.yaml >/dev/null; CDK8S_CHECK_UPGRADE=false npx --no-install cdk8s synth"
    " --no-check-upgrade >/dev/null 2>&1; .venv/bin/cfn-lint --config-file .cfnlintrc.yaml --"
    " {out}/cdk.out.previous/*.template.json")


#: The floor of issue 31: the same templates rebuilt by the CDK alone. Every template of the cloud assembly that
#: ``python -O app.py`` wrote (argv[1]) is included whole (``aws_cdk.cloudformation_include.CfnInclude``) into a
#: stack of its own (no bootstrap-version rule: the templates carry theirs) and synthesized. A plain CDK app, so it
#: ends with the interpreter's own exit.
INCLUDE_APP = """\
import sys
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import cloudformation_include as cfn_inc

app = cdk.App()
for template in sorted(Path(sys.argv[1]).glob("*.template.json")):
    stack = cdk.Stack(app, template.name.removesuffix(".template.json"),
                      synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    cfn_inc.CfnInclude(stack, "Template", template_file=str(template))
app.synth()
"""
#: Runs the script argv[1] (argv[2:] its arguments) as ``__main__`` and appends ``<phase> <time.monotonic()>`` to
#: $BENCH_MARKS when ``cdk.App()`` is called (start-up over: interpreter, imports, config) and when ``app.synth()``
#: starts (construct work over) and returns (synth over). The parent reads the process's start and end on the same
#: clock (CLOCK_MONOTONIC is system-wide on Linux), so the time after synth is the rest of the process: the
#: findings report and the exit.
PHASED = """\
import os, runpy, sys, time

import aws_cdk


def mark(phase):
    with open(os.environ["BENCH_MARKS"], "a") as marks:
        marks.write(f"{phase} {time.monotonic()}\\n")


init, synth = aws_cdk.App.__init__, aws_cdk.App.synth


def timed_init(self, *args, **kwargs):
    mark("start-up")
    init(self, *args, **kwargs)


def timed_synth(self, *args, **kwargs):
    mark("construct work")
    result = synth(self, *args, **kwargs)
    mark("synth")
    return result


aws_cdk.App.__init__, aws_cdk.App.synth = timed_init, timed_synth
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
PHASES = ("start-up", "construct work", "synth", "after synth")
PHASE_NOTES = {"start-up": "interpreter, imports, config: until cdk.App()",
               "construct work": "cdk.App() until app.synth()",
               "synth": "app.synth(): aspects (ours, cdk-nag), templates, assets",
               "after synth": "app.py: findings report; then the exit"}


class Failed(CommandFailed):
    """A step of the bench failed: one line on stderr (``error: ...``), exit 1 (:func:`guarded`)."""


def _last_line(output: str | None) -> str:
    """The last line of a failed command's stderr: its own reason (ours is one line; a traceback's is its last)."""
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _failed(cmd: list[str], rc: int, stderr: str | None) -> Failed:
    return Failed(f"{' '.join(cmd)} failed (exit {rc}): {_last_line(stderr)}")


def _require_setup() -> None:
    """The venv set-up makes (``--cli`` times it without running set-up)."""
    if not Path(PY).is_file():
        raise Failed(f"{PY} does not exist: run ./scripts/setup first")


#: Runs one command and prints the peak RSS (KiB) of the largest process in its tree: a fresh wrapper per
#: measurement, because RUSAGE_CHILDREN accumulates over everything a process has waited for.
_WRAPPER = ("import resource, subprocess, sys\n"
            "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(rc)\n")


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the largest process in the command's tree."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], cwd=ROOT, env=env, capture_output=True,
                            text=True, check=False)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise _failed(cmd, result.returncode, result.stderr)
    return wall, int(result.stdout.split()[-1]) / 1024


def wall(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run of ``cmd`` (output discarded; it must succeed)."""
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise _failed(cmd, result.returncode, result.stderr)
    return elapsed


def cli_bench(repeat: int) -> None:
    """Start-up of ``hyperpod-dpd`` against ``python -c pass``, in one run (medians of ``repeat``, interleaved
    so that machine load affects every case alike)."""
    cli = str(ROOT / ".venv" / "bin" / "hyperpod-dpd")
    cases = {
        "python -c pass (floor)": [PY, "-c", "pass"],
        "hyperpod-dpd --help": [cli, "--help"],
        "hyperpod-dpd status --help": [cli, "status", "--help"],
        "hyperpod-dpd validate -c config/default.yaml": [cli, "validate", "-c", "config/default.yaml"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for cmd in cases.values():
        wall(cmd, dict(os.environ))  # warm-up: bytecode
    for _ in range(repeat):
        for name, cmd in cases.items():
            times[name].append(wall(cmd, dict(os.environ)))
    floor = statistics.median(times["python -c pass (floor)"])
    print(f"{'command line start-up':<48} {'wall s (median)':>16} {'min':>6} {'max':>6} {'/ floor':>8}")
    for name, walls in times.items():
        median = statistics.median(walls)
        print(f"{name:<48} {median:>16.3f} {min(walls):>6.3f} {max(walls):>6.3f} {median / floor:>7.1f}x")
    ratio = statistics.median(times["hyperpod-dpd --help"]) / floor
    sub = statistics.median(times["hyperpod-dpd status --help"]) / floor
    print(f"\nhyperpod-dpd --help / python -c pass: {ratio:.1f}x (target <= 6x), status --help {sub:.1f}x")


def phased(script: list[str], env: dict[str, str], marks: Path) -> dict[str, float]:
    """Wall seconds of one run of ``python -O <script>`` (it must succeed) and of each of :data:`PHASES`."""
    marks.unlink(missing_ok=True)
    start = time.monotonic()
    result = subprocess.run([PY, "-O", "-c", PHASED, *script], cwd=ROOT, env={**env, "BENCH_MARKS": str(marks)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    end = time.monotonic()
    if result.returncode != 0:
        raise _failed(["python", "-O", *script], result.returncode, result.stderr)
    at = {phase: float(t) for phase, t in (line.rsplit(" ", 1) for line in marks.read_text().splitlines())}
    times = [start, at["start-up"], at["construct work"], at["synth"], end]
    return {"whole process": end - start, **{p: b - a for p, a, b in zip(PHASES, times[:-1], times[1:], strict=True)}}


def floor_pairs(env: dict[str, str], tmp: Path, pairs: int) -> None:
    """``python -O app.py`` (A) against the CfnInclude app of the templates it wrote (B), A B A B ... in one run:
    the ratio of each pair, then the median; each phase likewise, and what it adds to the ratio ((A - B) of the
    phase over B's whole process: the excesses sum to the ratio minus 1)."""
    include = tmp / "include_app.py"
    include.write_text(INCLUDE_APP)
    app_out = tmp / "cdk.out.app"
    a_env, b_env = {**env, "CDK_OUTDIR": str(app_out)}, {**env, "CDK_OUTDIR": str(tmp / "cdk.out.include")}
    a_cmd, b_cmd = [str(ROOT / "app.py")], [str(include), str(app_out)]
    marks = tmp / "marks"
    phased(a_cmd, a_env, marks)  # warm-up, and the templates the floor includes
    phased(b_cmd, b_env, marks)
    a_runs, b_runs = [], []
    for _ in range(pairs):
        a_runs.append(phased(a_cmd, a_env, marks))
        b_runs.append(phased(b_cmd, b_env, marks))
    templates = len(list(app_out.glob("*.template.json")))
    print(f"\npython -O app.py (A) against its {templates} templates rebuilt by CfnInclude alone (B, the floor), "
          f"{pairs} pairs A B A B ...: wall seconds, medians")
    print(f"{'part':<16} {'A':>7} {'B':>7} {'A/B per pair':>13} {'min':>6} {'max':>6} {'adds to A/B':>12}   what")
    for part in ("whole process", *PHASES):
        ratios = [a[part] / b[part] for a, b in zip(a_runs, b_runs, strict=True)]
        excess = [(a[part] - b[part]) / b["whole process"] for a, b in zip(a_runs, b_runs, strict=True)]
        adds = "" if part == "whole process" else f"{statistics.median(excess):+.2f}x"
        print(f"{part:<16} {statistics.median(a[part] for a in a_runs):>7.2f} "
              f"{statistics.median(b[part] for b in b_runs):>7.2f} {statistics.median(ratios):>12.2f}x "
              f"{min(ratios):>5.2f}x {max(ratios):>5.2f}x {adds:>12}   {PHASE_NOTES.get(part, '')}")
    ratio = statistics.median(a["whole process"] / b["whole process"] for a, b in zip(a_runs, b_runs, strict=True))
    print(f"\npython -O app.py / CfnInclude floor: {ratio:.2f}x (median of {pairs} pairs; target <= 2.5x)")


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="\n\n".join(f"\b\n{paragraph}" for paragraph in __doc__.split("\n\n")))  # as written
def _bench(repeat: Annotated[int, typer.Option(metavar="N", min=1, help="runs of each case")] = 3,
           pairs: Annotated[int, typer.Option(
               metavar="N", min=1, help="pairs of python -O app.py and the CfnInclude floor")] = 7,
           cli: Annotated[bool, typer.Option("--cli", help="time the command line's start-up only")] = False,
           cfn_include: Annotated[bool, typer.Option(
               "--cfn-include", help="time python -O app.py against the CfnInclude floor only")] = False) -> None:
    if cli:
        _require_setup()
        cli_bench(max(repeat, 5))
        return
    # scripts/setup (run first) says in one line when this Node.js is past jsii's support; as scripts/env.sh does,
    # jsii's banner is then silenced for its major version.
    node = shutil.which("node")
    if node is None:
        raise Failed("node is not on PATH: install Node.js 22 or 24 (README.md, \"The two commands\")")
    node_major = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": node_major.strip().lstrip("v").split(".")[0],
           "CDK_VALIDATION": "false",
           "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # -O reads .opt-1.pyc: let the warm-up run write them
    setup = ROOT / "scripts" / "setup"
    rc = subprocess.run([str(setup)], cwd=ROOT, check=False).returncode if setup.is_file() else 127
    if rc != 0:
        raise Failed(f"{setup} failed (exit {rc}): see its line above" if rc != 127 else f"{setup} does not exist")
    if cfn_include:
        with tempfile.TemporaryDirectory() as tmp:
            floor_pairs(env, Path(tmp), pairs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env["HYPERPOD_CFN_LINT_CACHE"] = str(Path(tmp) / "cfn-lint-cache")  # filled by the warm-up run
        empty = Path(tmp) / "empty_app.py"
        empty.write_text(EMPTY_APP)
        cases = {
            "main job (scripts/synth), templates unchanged": [str(ROOT / "scripts" / "synth")],
            "main job, cfn-lint cache off": ["env", "HYPERPOD_CFN_LINT_CACHE=off", str(ROOT / "scripts" / "synth")],
            # The main job as it was: the CLIs spawned around Python, validation on, cfn-lint in series.
            "CLI-spawned pipeline (previous main job)": ["bash", "-c", PREVIOUS_MAIN_JOB.format(out=tmp)],
            "python -O app.py": [PY, "-O", "app.py"],
            "cdk8s synth (python -O -m hyperpod_k8s.main)": [PY, "-O", "-m", "hyperpod_k8s.main", "--outdir",
                                                             str(Path(tmp) / "dist")],
            "empty CDK app, type checks off (floor)": [PY, "-O", str(empty)],
        }
        print(f"{'command':<48} {'wall s (median)':>16} {'min':>6} {'max':>6} {'peak RSS MiB':>13}")
        results = {}
        for name, cmd in cases.items():
            case_env = {**env, "CDK_OUTDIR": str(Path(tmp) / "cdk.out")} if "app" in name else env
            run(cmd, case_env)  # warm-up: bytecode and jsii package cache
            walls, rss = [], 0.0
            for _ in range(repeat):
                wall, peak = run(cmd, case_env)
                walls.append(wall)
                rss = max(rss, peak)
            results[name] = statistics.median(walls)
            print(f"{name:<48} {results[name]:>16.2f} {min(walls):>6.2f} {max(walls):>6.2f} {rss:>13.0f}")
        floor = results["empty CDK app, type checks off (floor)"]
        app_ratio = results["python -O app.py"] / floor
        job_ratio = results["main job (scripts/synth), templates unchanged"] / floor
        cold_ratio = results["main job, cfn-lint cache off"] / floor
        previous_ratio = results["CLI-spawned pipeline (previous main job)"] / floor
        print(f"\npython -O app.py / floor: {app_ratio:.2f}x (target <= 2x)")
        print(f"main job / floor:         {job_ratio:.2f}x templates unchanged, {cold_ratio:.2f}x cfn-lint cache off "
              f"(target <= 5x); CLI-spawned pipeline / floor: {previous_ratio:.2f}x")
        floor_pairs(env, Path(tmp), pairs)
    print()
    cli_bench(max(repeat, 5))


def main(argv: list[str] | None = None) -> None:
    run_app(app, argv, "scripts/bench.py")


if __name__ == "__main__":
    guarded(main)
