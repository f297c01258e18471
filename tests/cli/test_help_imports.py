"""``hyperpod-dpd --help`` and every subcommand's ``--help`` load no AWS SDK, Kubernetes client, plotting or CDK
code (issue 19): those load inside the commands that use them. Checked in a fresh interpreter, which runs the
console script's entry point for each ``--help`` and then lists what ``sys.modules`` holds."""

from __future__ import annotations

import json
import subprocess
import sys

#: Heavy third-party packages no ``--help`` may import.
HEAVY = ("boto3", "botocore", "kubernetes", "matplotlib", "aws_cdk", "cdk8s", "jsii")

#: Runs ``hyperpod-dpd --help`` and ``hyperpod-dpd <command> --help`` for every command in one process, then
#: imports the modules named in argv (the guard test's probe) and prints the commands and the heavy packages
#: loaded, as JSON.
_PROBE = f"""
import contextlib, importlib, io, json, sys
import typer
from hyperpod_dpd.app import app, main
commands = sorted(typer.main.get_command(app).commands)
for args in [["--help"], *[[name, "--help"] for name in commands]]:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except SystemExit as exc:
            assert exc.code in (0, None), (args, exc.code)
for module in sys.argv[1:]:
    importlib.import_module(module)
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"commands": commands, "heavy": heavy}}))
"""


def _probe(*modules: str) -> dict[str, list[str]]:
    result = subprocess.run([sys.executable, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    out: dict[str, list[str]] = json.loads(result.stdout)
    return out


def test_help_of_every_command_imports_no_heavy_package() -> None:
    found = _probe()
    assert {"validate", "schema", "plan", "status", "smoke", "logs", "sweep", "report", "synth",
            "deploy"} <= set(found["commands"])
    assert found["heavy"] == []


def test_the_probe_sees_a_heavy_import() -> None:
    """Guards the check: the modules the commands load lazily do bring the heavy packages in."""
    found = _probe("hyperpod_dpd.preflight", "hyperpod_dpd.kube")  # hyperpod_dpd.aws itself loads boto3 on first use
    assert {"botocore", "kubernetes"} <= set(found["heavy"])
