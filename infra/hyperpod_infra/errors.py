"""Errors meant for humans, and the guard every entry point runs under."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

#: Exit code of every entry point for bad input (config, arguments, missing files).
EXIT_BAD_INPUT = 2


class ConfigError(Exception):
    """Bad input. The message is one line that names the field, the bad value and what is allowed.

    Deliberately not a ``ValueError``: pydantic would wrap it, and we want it to reach the entry point as is.
    """


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT)


def run_guarded(main: Callable[[], None]) -> None:
    """Run an entry point; a :class:`ConfigError` becomes one stderr line and exit code 2, never a traceback."""
    try:
        main()
    except ConfigError as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
