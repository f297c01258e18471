"""How the command line fails: one line on stderr and a documented exit code, never a traceback.

* exit 2: bad input (config, arguments, files): :class:`hyperpod_infra.errors.ConfigError` or
  :class:`UsageError`;
* exit 1: the world is not as required (a check failed, AWS refused, a service is unreachable):
  :class:`CommandFailed`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from hyperpod_infra.errors import EXIT_BAD_INPUT, ConfigError

EXIT_FAILED = 1

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "CommandFailed", "ConfigError", "UsageError", "guarded"]


class UsageError(ConfigError):
    """Bad arguments or input files (exit 2)."""


class CommandFailed(Exception):
    """The command ran but what it checks or does failed (exit 1). The message is one line."""


def guarded(fn: Callable[[], object]) -> None:
    """Run ``fn``; our errors become one line on stderr and exit code 2 (bad input) or 1 (failed)."""
    try:
        fn()
    except ConfigError as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except CommandFailed as exc:
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
