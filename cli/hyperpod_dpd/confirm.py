"""Asking before a change, one way for every state-changing command (``bench``, ``sweep``, ``deploy``, ``destroy``).

The flags mean one thing each, in every command:

* ``--yes``: do not ask (CI, scripts). Without it the command shows what it will do and asks on the terminal; with
  no terminal to ask on (stdin is not a TTY) it stops before acting, saying to pass ``--yes``;
* ``--dry-run``: show what it would do, change nothing, ask nothing;
* ``--force``: override a guard that would otherwise stop the command (``stage-model``: overwrite objects that hold
  other content). Never "do not ask".

The question goes to stderr (stdout carries data); the answer is ``y``/``yes``. Any other answer is a
cancellation: one line ``cancelled: ...`` and exit 1, not an error.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from hyperpod_core.errors import EXIT_FAILED, UsageError

YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (for CI and scripts).")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show what would happen; change nothing.")]


def confirm(question: str, *, yes: bool, command: str, cancelled: str) -> None:
    """Return when the change may go ahead: ``--yes``, or the person at the terminal answered yes.

    ``command`` names the command for the "pass --yes" line; ``cancelled`` says what was not done.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{command} asks before it changes anything and stdin is not a terminal: pass --yes to go "
                         f"ahead without asking (or --dry-run to see what it would do)")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    raw = sys.stdin.readline()
    if not raw.endswith("\n"):  # end of input (Ctrl-D): nothing echoed the line end
        sys.stderr.write("\n")
    if raw.strip().lower() not in ("y", "yes"):
        print(f"cancelled: {cancelled}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED)
