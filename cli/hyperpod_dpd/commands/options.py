"""Options every command that acts on a deployment takes, declared once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hyperpod_core.errors import UsageError
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
#: ``--endpoint`` of every command that acts on one endpoint of the deployment (``status``: on one, else on all):
#: :func:`hyperpod_dpd.deployment.endpoint_of` picks it, or refuses in one line naming the endpoints there are.
EndpointOption = Annotated[str | None, typer.Option(
    "--endpoint", metavar="NAME", show_default=False,
    help="The endpoint to act on (its endpoints[].name). Default: the config's only endpoint; a config of several "
         "needs it (status then shows every endpoint).")]


def _use_profile(value: str | None) -> str | None:
    """``--profile NAME`` becomes ``AWS_PROFILE``, so that boto3, the CDK CLI and kubeconfig's ``aws eks get-token``
    all use it; a profile the AWS config files do not define is bad input."""
    if value:
        import botocore.session

        known = botocore.session.Session().available_profiles
        if value not in known:
            raise UsageError(f"--profile must be a profile of the AWS config files (~/.aws/config, "
                             f"$AWS_CONFIG_FILE): {', '.join(sorted(known)) or 'none defined'}, got {value!r}")
        os.environ["AWS_PROFILE"] = value
    return value


RegionOption = Annotated[str | None, typer.Option(
    "--region", metavar="REGION", show_default=False,
    help="AWS region of the calls this command makes. Default: the config's region.")]
#: ``--region`` of a command that changes, deletes or checks a deployment (``deploy``, ``diff``, ``destroy``,
#: ``sweep``, ``stage-model``, ``bench``, ``preflight``): only the deployment's own region is accepted
#: (:func:`hyperpod_dpd.deployment.require_region`).
DeploymentRegionOption = Annotated[str | None, typer.Option(
    "--region", metavar="REGION", show_default=False,
    help="The deployment's region (its outputs file's Region, else the config's region); this command acts on that "
         "deployment, so another region is refused: a deployment of the same name there is another deployment.")]
ProfileOption = Annotated[str | None, typer.Option(
    "--profile", metavar="NAME", show_default=False, callback=_use_profile,
    help="AWS named profile (the same as AWS_PROFILE=NAME). Default: the usual credential chain.")]


def _existing_outputs_file(value: Path | None) -> Path | None:
    if value is not None and not value.is_file():
        raise UsageError(f"--outputs-file {str(value)!r} does not exist")
    return value


#: ``--outputs-file`` of a command that reads the deploy outputs: the file ``npx cdk deploy --outputs-file`` wrote, when
#: it is not the config's own ``cdk-outputs.json`` (:func:`hyperpod_core.environment.folder_of`).
OutputsFileOption = Annotated[Path | None, typer.Option(
    "--outputs-file", metavar="PATH", show_default=False, callback=_existing_outputs_file,
    help="Deploy outputs to read (cdk deploy --outputs-file). Default: cdk-outputs.json in the config's folder.")]
#: ``--outputs-file`` of ``deploy``: where the CDK CLI writes the outputs.
DeployOutputsFileOption = Annotated[Path | None, typer.Option(
    "--outputs-file", metavar="PATH", show_default=False,
    help="Where to write the deploy outputs. Default: cdk-outputs.json in the config's folder, where every other "
         "command reads them.")]
#: ``--ready-timeout`` of the commands that wait for an endpoint to be ready, or gone (``bench``, ``rollout``).
ReadyTimeoutOption = Annotated[float, typer.Option(
    "--ready-timeout", metavar="SECONDS", min=1.0,
    help="Seconds to wait for an endpoint to be ready, or gone (the CRD's maxDeployTimeInSeconds default).")]
