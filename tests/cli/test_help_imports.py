"""``hyperpod-dpd --help`` and every subcommand's ``--help`` load no AWS SDK, Kubernetes client, plotting or CDK
code (issue 19), and the top-level ``--help`` loads no command module, no config model (pydantic) and no Rich
(issue 24): the lazy group (``hyperpod_dpd.app.LazyGroup``) is the command line's start-up measure. Checked in
fresh interpreters that run the console script's entry point and then list what ``sys.modules`` holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hyperpod_dpd.app import COMMANDS

#: Heavy third-party packages no ``--help`` may import.
HEAVY = ("boto3", "botocore", "kubernetes", "matplotlib", "aws_cdk", "cdk8s", "jsii")

#: Runs ``hyperpod-dpd <argv...> --help`` for each JSON argv list given in argv[1], through the console script's
#: entry point, then imports the modules named in argv[2:] (the guard test's probe) and prints the top-level
#: packages loaded.
_PROBE = """
import contextlib, importlib, io, json, sys
from hyperpod_dpd.app import main
for args in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except SystemExit as exc:
            assert exc.code in (0, None), (args, exc.code)
for module in sys.argv[2:]:
    importlib.import_module(module)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} | {m for m in sys.modules if m.startswith("hyperpod")})))
"""


def _loaded(runs: list[list[str]], *modules: str, env: dict[str, str] | None = None) -> set[str]:
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(runs), *modules], capture_output=True,
                            text=True, timeout=120, check=False, env=env)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout))


def test_help_of_every_command_imports_no_heavy_package() -> None:
    assert {"validate", "schema", "plan", "status", "smoke", "logs", "sweep", "report", "synth",
            "deploy"} <= set(COMMANDS)
    loaded = _loaded([["--help"], *[[name, "--help"] for name in COMMANDS], ["status", "-h"]])
    assert loaded & set(HEAVY) == set()


def test_top_level_help_imports_no_command_module_no_config_and_no_rich() -> None:
    loaded = _loaded([["--help"], ["-h"]])
    assert not {m for m in loaded if m.startswith("hyperpod_dpd.commands")}
    assert not loaded & {"pydantic", "yaml", "rich", "hyperpod_core.config", *HEAVY}


def test_a_subcommand_help_imports_only_its_own_command_module() -> None:
    loaded = _loaded([["validate", "--help"]])
    assert {m for m in loaded if m.startswith("hyperpod_dpd.commands.")} == {"hyperpod_dpd.commands.validate",
                                                                               "hyperpod_dpd.commands.options"}


def test_a_help_page_is_rendered_each_time_and_nothing_is_kept_on_disk(tmp_path: Path) -> None:
    """One start-up measure, the lazy group: no help-page cache beside it (docs/cli.md, "Start-up times")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERPOD_DPD_")}
    loaded = _loaded([["status", "--help"], ["--help"]], env={**env, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                                                                "HOME": str(tmp_path)})
    assert "hyperpod_dpd.commands.status" in loaded  # rendered from the command's own module
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_the_probe_sees_a_heavy_import() -> None:
    """Guards the check: the modules the commands load lazily do bring the heavy packages in."""
    # hyperpod_dpd.aws loads boto3 on first use, not on import: preflight's checks and the Kubernetes client do
    assert {"botocore", "kubernetes"} <= _loaded([], "hyperpod_dpd.preflight", "hyperpod_dpd.kube")
