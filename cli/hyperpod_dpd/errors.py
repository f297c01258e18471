"""How the command line fails: one line on stderr and a documented exit code, never a traceback.

* exit 2: bad input (config, arguments, files): :class:`hyperpod_infra.errors.ConfigError` or
  :class:`UsageError`;
* exit 1: the world is not as required (a check failed, AWS refused, a service is unreachable):
  :class:`CommandFailed`.
"""

from __future__ import annotations

from hyperpod_infra.errors import EXIT_BAD_INPUT, ConfigError

EXIT_FAILED = 1

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "CommandFailed", "ConfigError", "UsageError"]


class UsageError(ConfigError):
    """Bad arguments or input files (exit 2)."""


class CommandFailed(Exception):
    """The command ran but what it checks or does failed (exit 1). The message is one line."""
