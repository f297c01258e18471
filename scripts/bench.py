#!/usr/bin/env python3
"""Benchmark: wall time and peak RSS of the main job and its parts, side by side in one run.

    .venv/bin/python scripts/bench.py [--repeat 3]

Measures (after set-up, warm caches): the whole main job (scripts/synth), `python app.py` alone, the cdk8s
synth alone, and an empty CDK app as the floor. Peak RSS is the largest resident set of any process in the
command's tree (from wait4 rusage of children). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
EMPTY_APP = "import aws_cdk as cdk\napp = cdk.App()\ncdk.Stack(app, 'Empty')\napp.synth()\n"


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
        raise SystemExit(f"{' '.join(cmd)} failed: {result.stderr[-2000:]}")
    return wall, int(result.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false",
           "AWS_EC2_METADATA_DISABLED": "true", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    subprocess.run([str(ROOT / "scripts" / "setup")], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty_app.py"
        empty.write_text(EMPTY_APP)
        cases = {
            "main job (scripts/synth)": [str(ROOT / "scripts" / "synth")],
            "python app.py": [PY, "app.py"],
            "cdk8s synth (python -m hyperpod_k8s.main)": [PY, "-m", "hyperpod_k8s.main", "--outdir",
                                                          str(Path(tmp) / "dist")],
            "empty CDK app (floor)": [PY, str(empty)],
        }
        print(f"{'command':<44} {'wall s (median)':>16} {'min':>6} {'max':>6} {'peak RSS MiB':>13}")
        results = {}
        for name, cmd in cases.items():
            walls, rss = [], 0.0
            for _ in range(args.repeat):
                case_env = {**env, "CDK_OUTDIR": str(Path(tmp) / "cdk.out")} if "app" in name else env
                wall, peak = run(cmd, case_env)
                walls.append(wall)
                rss = max(rss, peak)
            results[name] = statistics.median(walls)
            print(f"{name:<44} {results[name]:>16.2f} {min(walls):>6.2f} {max(walls):>6.2f} {rss:>13.0f}")
        ratio = results["python app.py"] / results["empty CDK app (floor)"]
        print(f"\npython app.py / empty-app floor: {ratio:.2f}x (target <= 2x); "
              f"main job {results['main job (scripts/synth)']:.1f} s (target <= 15 s)")


if __name__ == "__main__":
    sys.exit(main())
