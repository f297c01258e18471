"""What users of ``kubectl``, ``cdk`` and ``hyp`` expect of a command line (issue 24): ``-h``, ``--version``,
completion, one-line parse errors with exit 2, ``--output table|json|yaml`` with a ``schema_version``, full-width
output when stdout is not a terminal, ``NO_COLOR``, and the exit-code table of docs/cli.md."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer
import yaml

from hyperpod_core import errors
from hyperpod_dpd import help_cache
from hyperpod_dpd.app import COMMANDS, _commands_of
from hyperpod_dpd.render import SCHEMA_VERSION

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"


# --- the command table the top-level --help lists without importing any command module -----------------------

def test_every_command_is_in_the_table_with_its_docstring_summary() -> None:
    """COMMANDS names the module of each command and the first paragraph of its docstring, which the top-level
    --help shows; a command added to a module but not to the table, or a changed docstring, fails here."""
    registered: dict[str, str] = {}
    for module in dict.fromkeys(spec.module for spec in COMMANDS.values()):
        for name, command in _commands_of(module).items():
            registered[name] = module
            summary = " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split())
            assert COMMANDS[name].summary == summary, name
    assert registered == {name: spec.module for name, spec in COMMANDS.items()}


def test_h_is_help_for_the_top_level_and_each_command(run_cli: Callable[..., Any]) -> None:
    for path in ([], ["status"], ["plan"]):
        long, short = run_cli(*path, "--help"), run_cli(*path, "-h")
        assert long.exit_code == short.exit_code == 0
        assert long.stdout == short.stdout and long.stdout.startswith(f"Usage: hyperpod-dpd {' '.join(path)}".strip())


def test_flags_show_no_type_and_values_their_metavar(run_cli: Callable[..., Any]) -> None:
    page = run_cli("status", "--help").stdout
    assert "<bool>" not in page
    assert re.search(r"-c, --config PATH\s", page) and re.search(r"-o, --output table\|json\|yaml\s", page)


def test_version_is_the_package_version() -> None:
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = subprocess.run([sys.executable, "-m", "hyperpod_dpd", "--version"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert (result.returncode, result.stdout) == (0, f"hyperpod-dpd {version}\n")


def test_shell_completion_installs_and_completes_command_names() -> None:
    """Typer's own completion: --show-completion prints the script; the script's request lists the commands."""
    script = subprocess.run([sys.executable, "-m", "hyperpod_dpd", "--show-completion", "bash"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert script.returncode == 0 and "complete -o default -F _hyperpod_dpd_completion hyperpod-dpd" in script.stdout
    env = {**os.environ, "_HYPERPOD_DPD_COMPLETE": "complete_bash", "COMP_WORDS": "hyperpod-dpd st",
           "COMP_CWORD": "1"}
    words = subprocess.run([sys.executable, "-m", "hyperpod_dpd"], env=env, capture_output=True, text=True,
                           timeout=60, check=False)
    assert words.stdout.split() == ["stage-model", "status"]


@pytest.mark.parametrize(("args", "message"), [
    (("status", "--bogus"), "error: No such option: --bogus (see: hyperpod-dpd status --help)"),
    (("nosuch",), "error: No such command 'nosuch'. (see: hyperpod-dpd --help)"),
    (("logs",), "error: Missing argument 'ROLE'. (see: hyperpod-dpd logs --help)"),
    (("validate", "--output", "xml"), "error: Invalid value for '--output' / '-o': Value error, 'xml' is not one of "
                                      "'table', 'json', 'yaml'. (see: hyperpod-dpd validate --help)"),
    (("validate", "--config", str(DEFAULT), "--json", "-o", "yaml"),
     "error: --json means --output json, got --output yaml as well"),
])
def test_parse_errors_are_one_line_and_exit_2(run_cli: Callable[..., Any], args: tuple[str, ...],
                                              message: str) -> None:
    result = run_cli(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")


# --- output -----------------------------------------------------------------------------------------------------

def test_json_and_yaml_are_one_document_with_a_schema_version(run_cli: Callable[..., Any]) -> None:
    as_json = json.loads(run_cli("validate", "--config", str(DEFAULT), "--json").stdout)
    assert as_json == json.loads(run_cli("validate", "--config", str(DEFAULT), "-o", "json").stdout)
    assert yaml.safe_load(run_cli("validate", "--config", str(DEFAULT), "--output", "YAML").stdout) == as_json
    assert next(iter(as_json)) == "schema_version" and as_json["schema_version"] == SCHEMA_VERSION
    assert as_json["region"] == "us-west-2"  # config/default.yaml


def test_not_a_terminal_means_full_width(run_cli: Callable[..., Any], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A table or line longer than $COLUMNS is neither cut nor wrapped when stdout is a pipe or a file."""
    deep = tmp_path.joinpath(*["a-long-folder-name"] * 12)
    deep.mkdir(parents=True)
    config = deep / "config.yaml"
    config.write_text(DEFAULT.read_text())
    monkeypatch.setenv("COLUMNS", "40")
    out = run_cli("validate", "--config", str(config)).stdout
    assert f"config {config}: ok (us-west-2, AZ ID usw2-az2)\n" in out


#: An SGR sequence that sets a foreground colour (30-38, 90-97); bold and the like are not colour (no-color.org).
_COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-8]|9[0-7])(?:;\d+)*m")


def test_no_color_is_honoured(run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """FORCE_COLOR turns Rich's colours on off a terminal (force-color.org); NO_COLOR beside it turns them off."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert _COLOUR.search(run_cli("validate", "--config", str(DEFAULT)).stdout)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _COLOUR.search(run_cli("validate", "--config", str(DEFAULT)).stdout)


def _command(name: str) -> typer.core.TyperCommand:
    command = _commands_of(COMMANDS[name].module)[name]
    assert isinstance(command, typer.core.TyperCommand)
    return command


def _options(name: str) -> set[str]:
    return {opt for p in _command(name).params for opt in p.opts}


@pytest.mark.parametrize("name", ["validate", "preflight", "status", "smoke", "sweep", "plan", "report"])
def test_reading_commands_take_output_and_json(name: str) -> None:
    assert {"--output", "-o", "--json"} <= _options(name)


@pytest.mark.parametrize("name", ["preflight", "status", "smoke", "logs", "sweep", "report"])
def test_commands_that_call_aws_take_region_and_profile(name: str) -> None:
    assert {"--region", "--profile"} <= _options(name)


# --- exit codes -------------------------------------------------------------------------------------------------

def test_the_exit_code_table_of_docs_cli_md_is_the_code() -> None:
    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    table = dict(re.findall(r"^\| `(\d+)` \| (.+?) \|", text, flags=re.MULTILINE))
    assert {int(k) for k in table} == {0, errors.EXIT_FAILED, errors.EXIT_BAD_INPUT, errors.EXIT_INTERRUPTED}
    assert "bad input" in table[str(errors.EXIT_BAD_INPUT)] and "interrupted" in table[str(errors.EXIT_INTERRUPTED)]


def test_interrupt_is_one_line_and_exit_130(run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.commands import validate

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(validate.environment, "resolve", interrupted)
    result = run_cli("validate", "--config", str(DEFAULT))
    assert (result.exit_code, result.stderr) == (errors.EXIT_INTERRUPTED, "error: interrupted\n")


# --- the help cache ---------------------------------------------------------------------------------------------

def test_a_cached_page_is_served_until_a_source_it_was_rendered_from_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "some_module.py"
    source.write_text("HELP = 1\n")
    module = ModuleType("some_module")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, "some_module", module)
    monkeypatch.setenv(help_cache.CACHE_ENV, str(tmp_path / "cache"))
    help_cache.save(["status"], 80, "the page\n")
    assert help_cache.load(["status"], 80) == "the page\n"
    assert help_cache.load(["status"], 120) is None  # another width is another page
    source.write_text("HELP = 22\n")
    assert help_cache.load(["status"], 80) is None
    monkeypatch.setenv(help_cache.CACHE_ENV, "off")
    help_cache.save(["status"], 80, "the page\n")
    assert help_cache.load(["status"], 80) is None


@pytest.mark.parametrize(("args", "path"), [
    (["--help"], []), (["-h"], []), (["status", "--help"], ["status"]), (["logs", "decode", "-f", "-h"], ["logs"]),
    (["--help", "status"], []), (["status"], None), (["status", "--", "--help"], None), (["nosuch", "-h"], None),
])
def test_which_page_the_arguments_ask_for(args: list[str], path: list[str] | None) -> None:
    assert help_cache.help_path(args, known=COMMANDS) == path
