"""Options every command that acts on a deployment takes, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

ConfigOption = Annotated[str | None, typer.Option(
    "--config", "-c", help="Config YAML of the deployment (or $HYPERPOD_CONFIG).", show_default=False)]
EnvOption = Annotated[str | None, typer.Option(
    "--env", "-e", help="Environment folder envs/NAME/ holding config.yaml.", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
