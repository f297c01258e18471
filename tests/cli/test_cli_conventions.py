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
from typing import Any

import pytest
import typer
import yaml

from hyperpod_core import errors
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


#: A metavar: a placeholder in capitals (PATH, NAME, INSTANCE_TYPE=USD, STACK...), or the values allowed, separated
#: by '|' (table|json|yaml, RESOURCE|all): what kubectl, cdk and Click's own pages show.
METAVAR = re.compile(r"^(?:[A-Z][A-Z0-9_]*(?:=[A-Z][A-Z0-9_]*)?|[A-Za-z0-9-]+(?:\|[A-Za-z0-9-]+)+)(?:\.\.\.)?$")
#: Python's type names as Typer writes them when a parameter has no metavar (``<str>``, ``<list[str]>``,
#: ``<float range>``, ``<path>``).
PYTHON_TYPE = re.compile(r"\b(str|int|float|bool|list|dict|tuple|path|range)\b")


def _entries(page: str) -> list[str]:
    """The name column of the Arguments and Options sections of a rendered help page (option names with their
    metavar, or an argument's metavar)."""
    out, section = [], None
    for line in page.splitlines():
        if line and not line.startswith(" "):
            section = line.rstrip(":")
        elif section in ("Arguments", "Options") and re.match(r"^  \S", line):
            out.append(re.split(r"\s{2,}", line.strip())[0])
    return out


@pytest.mark.parametrize("path", [[], *([name] for name in COMMANDS)], ids=lambda p: " ".join(p) or "top")
def test_every_help_page_shows_metavars_in_one_style_and_no_python_type(
        path: list[str], run_cli: Callable[..., Any]) -> None:
    """Every option that takes a value, and every argument, shows an upper-case placeholder (or the values allowed),
    never a Python type, and the usage line names arguments the same way (issue 31, newcomer friction 15)."""
    shown = run_cli(*path, "--help")
    assert shown.exit_code == 0, shown.stderr
    page = shown.stdout
    usage = page.splitlines()[0]
    assert "<" not in usage and "{" not in usage, usage
    for entry in _entries(page):
        shown = [w for w in re.split(r",? ", entry) if not w.startswith("-")]
        assert "<" not in entry and not PYTHON_TYPE.search(" ".join(shown)), (path, entry)
        assert all(METAVAR.match(w) for w in shown), (path, entry)
    for module in {COMMANDS[name].module for name in path}:
        for name, command in _commands_of(module).items():
            for param in command.params:
                if not getattr(param, "is_flag", False) and not param.hidden:
                    assert param.metavar and METAVAR.match(param.metavar), (name, param.name, param.metavar)


def test_help_lists_the_same_options_as_the_page_shown_without_arguments(run_cli: Callable[..., Any]) -> None:
    """``hyperpod-dpd --help`` and ``hyperpod-dpd`` alone show the same page: completion options included."""
    asked, bare = run_cli("--help"), run_cli()
    assert (asked.exit_code, bare.exit_code) == (0, 2)
    assert asked.stdout == bare.stderr
    assert "--install-completion" in asked.stdout and "--show-completion" in asked.stdout


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
    # A typo of any command, imported yet or not (friction 16: "No such command 'stauts'." without a suggestion;
    # Typer suggests only among the commands a lazy group has already loaded).
    (("stauts",), "error: No such command 'stauts'. Did you mean 'status'? (see: hyperpod-dpd --help)"),
    (("stage-modle",), "error: No such command 'stage-modle'. Did you mean 'stage-model'? (see: hyperpod-dpd --help)"),
    (("logs",), "error: Missing argument 'ROLE'. (see: hyperpod-dpd logs --help)"),
    (("validate", "--output", "xml"), "error: Invalid value for '--output' / '-o': 'xml' is not one of 'table', "
                                      "'json', 'yaml'. (see: hyperpod-dpd validate --help)"),
    (("smoke", "--max-tokens", "many"), "error: Invalid value for '--max-tokens': must be a valid integer, got 'many' "
                                        "(see: hyperpod-dpd smoke --help)"),
    (("bench", "--poll-seconds", "-1"), "error: Invalid value for '--poll-seconds': must be greater than or equal to "
                                        "0, got '-1' (see: hyperpod-dpd bench --help)"),
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


