"""The ``hyperpod-dpd`` Typer application and its guarded entry point.

Commands live in their own modules (:data:`COMMAND_MODULES`); each exposes ``register(app)``. The entry point
turns our errors into one line on stderr with exit code 2 (bad input) or 1 (a check or an action failed).
"""

from __future__ import annotations

import importlib

import typer

from hyperpod_core.errors import guarded

#: Modules that register commands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "hyperpod_dpd.commands.validate",
    "hyperpod_dpd.commands.lifecycle",
    "hyperpod_dpd.commands.preflight",
    "hyperpod_dpd.commands.stage_model",
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
    guarded(lambda: app(args=argv, prog_name="hyperpod-dpd", standalone_mode=True))
