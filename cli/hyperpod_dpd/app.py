"""The ``hyperpod-dpd`` Typer application and its guarded entry point.

Commands live in their own modules (:data:`COMMANDS`); each exposes ``register(app)``. A module is imported
only when one of its commands runs or shows its help (:class:`LazyGroup`, Click's lazy-loading group), so
``hyperpod-dpd --help`` imports none of them and every command imports only its own. That is the one start-up
measure: a help-page cache on disk beside it saved time on ``--help`` pages only, and only when a page was
cached; loading every command eagerly instead cost every command about 0.16 s (docs/cli.md, "Start-up times").

The entry point turns our errors into one line on stderr with exit code 2 (bad input) or 1 (a check or an
action failed), and so does it with the command line parser's errors (``error: No such option: --bogus``,
exit 2); 130 when interrupted.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Annotated, Any

import typer
import typer.main
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # vendored Click: Typer exports no public names
from typer._click.shell_completion import CompletionItem
from typer.core import TyperArgument, TyperGroup

from hyperpod_core.errors import EXIT_INTERRUPTED, guarded, one_line, shown

PROG = "hyperpod-dpd"
#: The distribution ``--version`` reads (pyproject.toml ``[project] name``).
DISTRIBUTION = "hyperpod-dpd-iac"
#: Help pages wrap at the terminal's width, up to this many columns.
MAX_HELP_WIDTH = 120
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": MAX_HELP_WIDTH}


@dataclass(frozen=True)
class CommandSpec:
    module: str
    summary: str
    """The first paragraph of the command's docstring (tests/cli/test_cli_conventions.py keeps them equal): the
    top-level ``--help`` lists it without importing the module."""


#: Every command, in help order: the module that registers it and its one-line summary.
COMMANDS: dict[str, CommandSpec] = {
    "validate": CommandSpec("hyperpod_dpd.commands.validate",
                            "Validate the config (all typed rules; no AWS calls) and print what it deploys."),
    "init": CommandSpec("hyperpod_dpd.commands.lifecycle",
                        "Create envs/NAME/config.yaml from a config (default: config/default.yaml), named NAME."),
    "schema": CommandSpec("hyperpod_dpd.commands.lifecycle",
                          "Print the JSON Schema of the config (from the pydantic model); --write updates "
                          "config/schema.json and the reference page docs/config.md."),
    "synth": CommandSpec("hyperpod_dpd.commands.lifecycle",
                         "Synthesize and validate the templates and manifests of THIS config into its own folder."),
    "diff": CommandSpec("hyperpod_dpd.commands.lifecycle",
                        "Compare the synthesized templates of THIS config with what is deployed (cdk diff --app "
                        "<cdk.out>); for the HyperPod stack, also whether running deep health checks would refuse "
                        "an instance-group change."),
    "deploy": CommandSpec("hyperpod_dpd.commands.lifecycle",
                          "Deploy the templates synthesized from THIS config (shows what and asks; --yes does not "
                          "ask); write the outputs file next to them."),
    "destroy": CommandSpec("hyperpod_dpd.commands.lifecycle",
                           "Destroy the stacks of THIS config (shows what and asks; --yes does not ask). The model "
                           "bucket is kept unless model_bucket.delete_on_destroy; the outputs file is moved aside "
                           "afterwards."),
    "preflight": CommandSpec("hyperpod_dpd.commands.preflight",
                             "Check the templates, credentials, CDK bootstrap, AZ, quotas, training plans, add-on "
                             "versions, principal, bucket."),
    "stage-model": CommandSpec("hyperpod_dpd.commands.stage_model",
                               "Upload the weights to s3://<model bucket>/<model.s3_prefix>: parallel, resumable "
                               "(inside a file too), checksummed by S3."),
    "status": CommandSpec("hyperpod_dpd.commands.status",
                          "HyperPod nodes, EKS add-ons and the endpoint, each with the next step when it is not "
                          "healthy."),
    "smoke": CommandSpec("hyperpod_dpd.commands.smoke",
                         "Send a short and a long prompt (streamed), measure TTFT/TPOT, prove the DPD path from the "
                         "decode log."),
    "rollout": CommandSpec("hyperpod_dpd.commands.rollout",
                           "Change a live endpoint to what synth wrote: blue/green when a second copy fits, else in "
                           "place or delete-then-apply (downtime stated first); --undo returns to the previous "
                           "revision."),
    "logs": CommandSpec("hyperpod_dpd.commands.logs",
                        "Show the logs of one role of this endpoint, with DPD failure signatures highlighted."),
    "sweep": CommandSpec("hyperpod_dpd.commands.sweep",
                         "List what would block `cdk destroy` or survive it, then (asked, or --yes) delete it. Never "
                         "touches S3."),
    "bench": CommandSpec("hyperpod_dpd.commands.bench",
                         "Run the benchmark matrix on DPD, switch to the colocated baseline, run it again "
                         "(resumable; asks first)."),
    "report": CommandSpec("hyperpod_dpd.commands.report",
                          "Compare colocated and DPD from genai-bench result files and write the decision report."),
    "plan": CommandSpec("hyperpod_dpd.commands.plan",
                        "Estimate colocated vs disaggregated prefill/decode for your traffic and recommend a layout."),
}


class MetavarArgument(TyperArgument):
    """An argument shown by its metavar alone, as an option's value is: ``NAME`` in the usage line (``[SRC]`` when
    optional, ``[STACK]...`` when repeatable) and in the Arguments section; Typer would write ``{name}`` and add
    its Python type (``name <str>``, ``stacks... <list[str]>``). Every argument declares an upper-case ``metavar``
    (tests/cli/test_cli_conventions.py)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _rich_display_name(self) -> str:
        return self.display_name_raw + ("..." if self.nargs != 1 else "")

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _commands_of(module: str) -> dict[str, Any]:
    """The Click commands ``module`` registers, built the way Typer builds them, arguments shown as
    :class:`MetavarArgument`."""
    scratch = typer.Typer()
    importlib.import_module(module).register(scratch)
    commands = {str(info.name): typer.main.get_command_from_info(info, pretty_exceptions_short=True,
                                                                 rich_markup_mode=None)
                for info in scratch.registered_commands}
    for command in commands.values():
        for param in command.params:
            if type(param) is TyperArgument:  # Typer builds them itself: no class to pass in
                param.__class__ = MetavarArgument
    return commands


class LazyGroup(TyperGroup):
    """The root group: lists :data:`COMMANDS` from the table, imports a command's module when it is asked for."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands.update(_commands_of(COMMANDS[cmd_name].module))
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Click's, with Typer's "Did you mean ...?" chosen among every command of the table (Typer's own looks at
        the commands a group holds, and this one holds none until one is asked for: its suggestions are off)."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            matches = get_close_matches(args[0], list(COMMANDS)) if args else []
            if exc.message.startswith("No such command") and matches:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(repr(m) for m in matches)}?"
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # Whole summaries, wrapped (Click would cut them to the width left beside the names).
        with formatter.section("Commands"):
            formatter.write_dl([(name, spec.summary) for name, spec in COMMANDS.items()])

    def shell_complete(self, ctx: Any, incomplete: str) -> list[Any]:
        names = [CompletionItem(name, help=spec.summary) for name, spec in COMMANDS.items()
                 if name.startswith(incomplete)]
        return names + super(TyperGroup, self).shell_complete(ctx, incomplete)  # the options (Click's own)


app = typer.Typer(
    name=PROG, cls=LazyGroup, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
    suggest_commands=False, context_settings=CONTEXT_SETTINGS,
    help="Operate a disaggregated prefill/decode (DPD) deployment on SageMaker HyperPod.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"{PROG} {version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False) -> None:
    """Operate a disaggregated prefill/decode (DPD) deployment on SageMaker HyperPod.

    Every command acts on one config, named with --env NAME or --config PATH. Exit codes: 0 ok, 1 a check or
    an action failed, 2 bad input, 130 interrupted.
    """


def parse_error(exc: Any) -> str:
    """The parser's message in our words: Typer converts values with pydantic, whose messages carry its own prefix
    ("Value error, ...") or leave the value out ("Input should be a valid integer"); the line names the option, what
    it allows and the value given."""
    cause = exc.__cause__ or exc.__context__
    errors = getattr(cause, "errors", None)
    if isinstance(exc, typer.BadParameter) and callable(errors) and errors():
        first = errors()[0]
        text = str(first.get("msg", "")).removeprefix("Value error, ")
        if text.startswith("Input should be "):
            allowed = text.removeprefix("Input should be ").split(", unable to parse")[0]
            text = f"must be {allowed}, got {shown(first.get('input'))}"
        exc.message = text
    return str(exc.format_message())


def _run(args: list[str]) -> None:
    try:
        rc = app(args=args, prog_name=PROG, standalone_mode=False)
    except NoArgsIsHelpError as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except typer.TyperException as exc:  # Click's usage errors and bad parameters
        ctx = getattr(exc, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        print(f"error: {' '.join(one_line(parse_error(exc)).split())}{hint}", file=sys.stderr)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        raise SystemExit(1) from None
    if rc == EXIT_INTERRUPTED:
        print("error: interrupted", file=sys.stderr)
    raise SystemExit(rc if isinstance(rc, int) else 0)  # as in Click's standalone mode


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``hyperpod-dpd``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    guarded(lambda: _run(args))
