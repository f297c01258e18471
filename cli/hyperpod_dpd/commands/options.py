"""Options every command that acts on a deployment takes, declared once."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from hyperpod_dpd.render import OutputFormat

ConfigOption = Annotated[str | None, typer.Option(
    "--config", "-c", metavar="PATH", help="Config YAML of the deployment (or $HYPERPOD_CONFIG).",
    show_default=False)]
EnvOption = Annotated[str | None, typer.Option(
    "--env", "-e", metavar="NAME", help="Environment folder envs/NAME/ holding config.yaml.", show_default=False)]
OutputOption = Annotated[OutputFormat | None, typer.Option(
    "--output", "-o", metavar="table|json|yaml", case_sensitive=False, show_default=False,
    help="Output format: a table (default), or one JSON/YAML document with a schema_version.")]
JsonOption = Annotated[bool, typer.Option("--json", help="The same as --output json.")]


def _use_profile(value: str | None) -> str | None:
    # The environment variable, so that boto3, the CDK CLI and kubeconfig's `aws eks get-token` all use it.
    if value:
        os.environ["AWS_PROFILE"] = value
    return value


RegionOption = Annotated[str | None, typer.Option(
    "--region", metavar="REGION", show_default=False,
    help="AWS region of the calls this command makes. Default: the config's region.")]
ProfileOption = Annotated[str | None, typer.Option(
    "--profile", metavar="NAME", show_default=False, callback=_use_profile,
    help="AWS named profile (the same as AWS_PROFILE=NAME). Default: the usual credential chain.")]
