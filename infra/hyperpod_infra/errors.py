"""Errors meant for humans, and the guard every entry point runs under."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

#: Exit code of every entry point for bad input (config, arguments, missing files).
EXIT_BAD_INPUT = 2
#: Longest value an error message shows, and longest message printed: bad input may be huge (an alias bomb,
#: a pasted file), and the message must stay one readable line.
MAX_SHOWN_VALUE = 80
MAX_MESSAGE = 500


class ConfigError(Exception):
    """Bad input. The message is one line that names the field, the bad value and what is allowed.

    Deliberately not a ``ValueError``: pydantic would wrap it, and we want it to reach the entry point as is.
    """


def shown(value: object, limit: int = MAX_SHOWN_VALUE) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages. Never reprs a huge container whole."""
    if isinstance(value, (dict, list, tuple, set, frozenset)) and len(value) > limit:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit 2."""
    line = message.splitlines()[0] if message else "bad input"
    if len(line) > MAX_MESSAGE:
        line = line[:MAX_MESSAGE] + "..."
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def run_guarded(main: Callable[[], None]) -> None:
    """Run an entry point; a :class:`ConfigError` becomes one stderr line and exit code 2, never a traceback."""
    try:
        main()
    except ConfigError as exc:
        fail(str(exc) or type(exc).__name__)
