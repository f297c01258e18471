"""Errors meant for humans, and the one guard every entry point runs under.

* exit 2: bad input (config, arguments, files): :class:`ConfigError` or its :class:`UsageError`;
* exit 1: the world is not as required (a check failed, AWS refused, a service is unreachable):
  :class:`CommandFailed`;
* exit 130: interrupted.

Whatever the cause, the entry point prints one line on stderr, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

#: Exit code of every entry point for bad input (config, arguments, missing files).
EXIT_BAD_INPUT = 2
#: Exit code of a command whose check or action failed.
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
#: Longest value an error message shows, and longest message printed: bad input may be huge (an alias bomb,
#: a pasted file), and the message must stay one readable line.
MAX_SHOWN_VALUE = 80
MAX_MESSAGE = 500


class ConfigError(Exception):
    """Bad input. The message is one line that names the field, the bad value and what is allowed.

    Deliberately not a ``ValueError``: pydantic would wrap it, and we want it to reach the entry point as is.
    """


class UsageError(ConfigError):
    """Bad arguments or input files (exit 2)."""


class CommandFailed(Exception):
    """The command ran but what it checks or does failed (exit 1). The message is one line."""


def shown(value: object, limit: int = MAX_SHOWN_VALUE) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages. Never reprs a huge container whole."""
    if isinstance(value, (dict, list, tuple, set, frozenset)) and len(value) > limit:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


def one_line(exc: BaseException | str) -> str:
    """The first line of an error, cut to :data:`MAX_MESSAGE` characters."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else (type(exc).__name__ if isinstance(exc, BaseException) else "error")
    return line[:MAX_MESSAGE] + "..." if len(line) > MAX_MESSAGE else line


def guarded(fn: Callable[[], object]) -> None:
    """Run an entry point; our errors become one line on stderr and exit code 2 (bad input), 1 (failed) or
    130 (interrupted), never a traceback."""
    try:
        fn()
    except ConfigError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except CommandFailed as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None


def run_app(app: Callable[..., object], argv: Sequence[str] | None, prog: str) -> None:
    """Run ``app``, a Typer application (the one command line framework of every entry point), the way
    :func:`guarded` expects an entry point to behave. Typer runs it with ``standalone_mode=False``, so nothing is
    printed or exited behind the guard's back:

    * a parser error (Click's ``UsageError``, raised with ``exit_code`` 2 and ``format_message()``) becomes a
      :class:`UsageError`: one line naming the option and the value, exit 2;
    * Ctrl-C, which Typer answers with exit code 130, becomes ``KeyboardInterrupt`` ("interrupted", 130);
    * a command that returns a non-zero int exits with it; ``--help`` prints the page and returns.

    Duck-typed on Click's exception attributes: the core imports no command line framework."""
    try:
        code = app(args=None if argv is None else list(argv), prog_name=prog, standalone_mode=False)
    except Exception as exc:
        message = getattr(exc, "format_message", None)
        if getattr(exc, "exit_code", None) != EXIT_BAD_INPUT or not callable(message):
            raise
        raise UsageError(f"{' '.join(str(message()).split())} (see: {prog} --help)") from None
    if code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    if isinstance(code, int) and not isinstance(code, bool) and code:
        raise SystemExit(code)
