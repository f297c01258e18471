"""``hyperpod-dpd preflight``: PASS/WARN/FAIL of what a deploy of THIS config needs, each with its fix.

The composition root of the checks (:mod:`hyperpod_dpd.preflight`): :func:`target` reads what they need from the
config once, every model bucket the deployment does not create among it (the deployment's and each endpoint's own).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from hyperpod_core import environment
from hyperpod_core.config import Config
from hyperpod_dpd.commands.options import (
    ConfigOption,
    DeploymentRegionOption,
    EnvOption,
    JsonOption,
    OutputOption,
    ProfileOption,
)
from hyperpod_dpd.render import console, emit, output_format

if TYPE_CHECKING:  # botocore loads when the checks run, not for --help
    from hyperpod_dpd.preflight import ModelBucket, Target

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "UNKNOWN": "bold magenta"}


def register(app: typer.Typer) -> None:
    app.command("preflight")(preflight)


def model_buckets(config: Config) -> tuple[ModelBucket, ...]:
    """Every bucket the weights are read from that the deployment does not create, once: ``model_bucket.existing_name``
    (the endpoints without a ``model.bucket`` read from it), then each endpoint's own ``model.bucket`` with its
    ``model.kms_key_arn`` (endpoints naming one bucket share its checks)."""
    from hyperpod_dpd.preflight import ModelBucket

    found: dict[str, ModelBucket] = {}
    mb = config.model_bucket
    if mb.existing_name:
        found[mb.existing_name] = ModelBucket(name=mb.existing_name, kms_key_arn=mb.existing_kms_key_arn,
                                              field="model_bucket.existing_name",
                                              key_field="model_bucket.existing_kms_key_arn")
    for spec in config.specs():
        name = spec.model.bucket
        if name is None:
            continue
        if name in found:
            had = found[name]
            if had.endpoints:  # another endpoint's own bucket: one check for both
                found[name] = ModelBucket(name=name, kms_key_arn=had.kms_key_arn, field=had.field,
                                          key_field=had.key_field, endpoints=(*had.endpoints, spec.name))
            continue
        found[name] = ModelBucket(name=name, kms_key_arn=spec.model.kms_key_arn, field=spec.model_field("bucket"),
                                  key_field=spec.model_field("kms_key_arn"), endpoints=(spec.name,))
    return tuple(found.values())


def target(config: Config) -> Target:
    """What the checks need of ``config`` (:class:`hyperpod_dpd.preflight.Target`)."""
    from hyperpod_dpd.preflight import Target

    return Target(deployment=config.name, region=config.region, network=config.network, eks=config.eks,
                  hyperpod=config.hyperpod, accounts=frozenset(config.arn_accounts()),
                  model_buckets=model_buckets(config))


def preflight(config: ConfigOption = None, env: EnvOption = None, as_json: JsonOption = False,
              output: OutputOption = None, region: DeploymentRegionOption = None,
              profile: ProfileOption = None) -> None:
    """Check the templates, credentials, CDK bootstrap, AZ, quotas, training plans, add-on versions, principal,
    bucket.

    Read-only AWS calls, in the deployment's region (--region must be that one). Exit 1 when any check FAILs or could
    not be made (UNKNOWN) (CI: --json).
    """
    from hyperpod_dpd import preflight as checks
    from hyperpod_dpd.deployment import require_region

    fmt = output_format(output, as_json)
    e = environment.resolve(config, env)
    region = require_region(e, region, "preflight")  # its checks are of the deployment's region
    templates = checks.check_templates(e)
    if fmt.data:
        results = [templates, *checks.run(target(e.config), checks.make_clients(region))]
    else:
        with Console(stderr=True).status(f"preflight: read-only checks in {region} ..."):
            results = [templates, *checks.run(target(e.config), checks.make_clients(region))]
    failed = [c for c in results if c.status in checks.NOT_OK]
    if fmt.data:
        emit(json.loads(checks.as_json(results)), fmt)
    else:
        table = Table(title=f"preflight: {e.config_path} ({region})", show_lines=False)
        for column in ("check", "result", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for c in results:
            table.add_row(c.name, f"[{_STYLE[c.status]}]{c.status}[/]", c.detail, c.fix)
        console().print(table)
        counts = {s: sum(c.status == s for c in results) for s in ("PASS", "WARN", "FAIL", "UNKNOWN")}
        print(f"{counts['PASS']} passed, {counts['WARN']} warnings, {counts['FAIL']} failed, "
              f"{counts['UNKNOWN']} could not be checked")
        if not failed:
            print(f"next: hyperpod-dpd deploy {e.selector}")
        elif not counts["FAIL"]:
            print("not ready to say 'deploy': fix what kept the UNKNOWN checks from completing, then run preflight "
                  "again")
    if failed:
        raise typer.Exit(1)
