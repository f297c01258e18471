"""``hyperpod-dpd validate``: check a config offline and say what it deploys."""

from __future__ import annotations

import typer

from hyperpod_core import environment
from hyperpod_core.config.az_ids import published_az_ids
from hyperpod_dpd.commands.options import ConfigOption, EnvOption, JsonOption, OutputOption
from hyperpod_dpd.render import console, emit, output_format


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)


def validate(config: ConfigOption = None, env: EnvOption = None, output: OutputOption = None,
             as_json: JsonOption = False) -> None:
    """Validate the config (all typed rules; no AWS calls) and print what it deploys."""
    fmt = output_format(output, as_json)
    e = environment.resolve(config, env)
    c = e.config
    groups = [{"name": g.name, "instance_type": g.instance_type, "instance_count": g.instance_count,
               "pool": g.pool} for g in c.hyperpod.instance_groups]
    if fmt.data:
        emit({"config": str(e.config_path), "name": c.name, "region": c.region,
              "availability_zone_id": c.network.gpu_availability_zone_id,
              "instance_groups": groups, "workdir": str(e.workdir)}, fmt)
        return
    out = console()
    out.print(f"config {e.config_path}: ok ({c.region}, AZ ID {c.network.gpu_availability_zone_id})")
    for g in groups:
        out.print(f"  instance group {g['name']}: {g['instance_count']}x {g['instance_type']} ({g['pool']})")
    if published_az_ids(c.region) is None:
        out.print(f"  AZ IDs: {c.region} is not in the offline table of published AZ IDs (its region prefix is "
                  "checked); preflight checks them in your account")
    out.print(f"  files of this config: {e.workdir}/")
