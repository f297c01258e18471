"""The ``hyperpod-dpd`` Typer application and its guarded entry point.

Commands live in their own modules (:data:`COMMAND_MODULES`); each exposes ``register(app)``. The entry point
turns our errors into one line on stderr with exit code 2 (bad input) or 1 (a check or an action failed).
"""

from __future__ import annotations

import importlib
import sys

import typer

from hyperpod_dpd.errors import EXIT_BAD_INPUT, EXIT_FAILED, CommandFailed, ConfigError

#: Modules that register commands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "hyperpod_dpd.commands.validate",
    "hyperpod_dpd.commands.status", "hyperpod_dpd.commands.smoke", "hyperpod_dpd.commands.logs",
    "hyperpod_dpd.commands.sweep",
    "hyperpod_dpd.commands.bench", "hyperpod_dpd.commands.report",
    "hyperpod_dpd.commands.plan",
)

app = typer.Typer(
    name="hyperpod-dpd", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Operate a disaggregated prefill/decode (DPD) deployment on SageMaker HyperPod.")



@app.callback()
def _root() -> None:
    """Operate a disaggregated prefill/decode (DPD) deployment on SageMaker HyperPod."""


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``hyperpod-dpd``)."""
    try:
        app(args=argv, prog_name="hyperpod-dpd", standalone_mode=True)
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
