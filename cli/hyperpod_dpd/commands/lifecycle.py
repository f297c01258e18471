"""``synth``, ``diff``, ``deploy``, ``destroy``, ``init``, ``schema``: the deployment lifecycle of one config.

Thin wrappers over the pinned CLIs (``npx --no-install cdk``, from ``package-lock.json``) that always act on
the files of the config named (``--env NAME`` or ``--config PATH``):

* ``synth`` runs the main job (:mod:`hyperpod_mainjob.job`) into the environment's folder and stamps
  ``cdk.out/`` with the config's SHA-256;
* ``deploy``/``destroy`` show what they will do and ask (``--yes``: do not ask; ``destroy --dry-run``: only show);
  ``destroy`` moves the outputs file aside afterwards (``cdk-outputs.destroyed-<UTC stamp>.json``); ``deploy``
  refuses templates CloudFormation would refuse (a Helm chart set-up could not fetch:
  :func:`hyperpod_core.assembly.undeployable`);
* ``diff``/``deploy``/``destroy`` pass ``--app <that cdk.out>`` (the CDK CLI then deploys the templates as
  synthesized, it does not run the app again) after checking the stamp still matches the config, select stacks
  by their construct IDs (``Network``, ``Cluster``, ... or ``--all``: the CDK CLI's selectors; CloudFormation
  names such as ``hyperpod-dpd-network`` are translated), and ``deploy`` writes ``cdk-outputs.json`` next to
  ``cdk.out/``;
* ``deploy`` passes ``--concurrency`` so that independent stacks deploy side by side (the observability stack
  with the network, the platform with the observability add-on: docs/deploy.md, "Critical path");
* ``diff``/``deploy``/``destroy`` act only in the deployment's region: a ``--region`` naming another is bad input
  before any AWS or CDK CLI call (:func:`hyperpod_dpd.deployment.require_region`); ``--profile`` is passed on as
  the CDK CLI's ``--profile``; without AWS credentials they stop in one line before the CDK CLI runs;
* the CDK CLI runs as :mod:`hyperpod_dpd.cdk_cli` runs it: the command echoed as it can be pasted, its whole output
  kept in ``cdk-<command>.log`` in the config's folder, a failure as one line naming that file;
* the checks ``deploy`` makes around the CDK CLI are in :mod:`hyperpod_dpd.deploy_guards`;
* on an update ``deploy`` keeps the deployed cluster admin (``AdminPrincipalArn`` is not passed, so the CDK CLI
  reuses its previous value) unless ``--admin-principal-arn``, and, before it deploys, reads the change set of
  every deployed stack that holds the HyperPod cluster, the EKS cluster or the model bucket and refuses a
  replacement unless ``--allow-replace <logical ID>`` (or ``all``), and always while a stack that imports the
  resource's exports exists (:mod:`hyperpod_dpd.change_set`; docs/deploy.md, "Updating a deployment"); it refuses an
  in-place update of the HyperPod cluster while nodes are in deep health checks;
* ``diff`` of the HyperPod stack also says when an instance-group change would hit running deep health checks
  (HyperPod refuses ``UpdateCluster`` then: :func:`hyperpod_dpd.preflight.check_deep_health_checks`);
* each prints the exact next command.

All but ``schema`` (printing) need the repository checkout (cdk.json, the pinned CLIs, config/): run from an
installed wheel they say so in one line (exit 2).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from hyperpod_core import environment, outputs, paths
from hyperpod_core.assembly import required_parameters, undeployable_line, with_upstream
from hyperpod_core.atomic import write_text_atomic
from hyperpod_core.config import load_config
from hyperpod_core.config.model import ModelBucketConfig
from hyperpod_core.errors import CommandFailed, ConfigError, UsageError
from hyperpod_dpd import cdk_cli
from hyperpod_dpd.commands.options import (
    ConfigOption,
    DeploymentRegionOption,
    DeployOutputsFileOption,
    EnvOption,
    OutputsFileOption,
    ProfileOption,
)
from hyperpod_dpd.confirm import DryRunOption, YesOption, confirm

StacksArg = Annotated[list[str] | None, typer.Argument(
    metavar="STACK", show_default=False,
    help="Stacks: construct IDs (Network, Observability, Cluster, HyperPod, Platform, ObservabilityAddon) or "
         "CloudFormation names (<name>-network, ...). Default: all.")]
#: ``--yes`` of ``deploy``: it also stands for the question before an old HyperPod cluster is deleted.
DeployYesOption = Annotated[bool, typer.Option(
    "--yes", "-y", help="Do not ask: neither before deploying nor before deleting an old HyperPod cluster "
                        "(--allow-replace). IAM/security-group changes are never asked about separately: review "
                        "them with hyperpod-dpd diff first.")]
AdminPrincipalOption = Annotated[str | None, typer.Option(
    "--admin-principal-arn", metavar="ARN", show_default=False,
    help="IAM role/user given cluster admin (kubectl) when the config names none. Default: the deployed one on an "
         "update, the caller of sts:GetCallerIdentity on the first deploy.")]
AllowReplaceOption = Annotated[list[str] | None, typer.Option(
    "--allow-replace", metavar="RESOURCE|all", show_default=False,
    help="Deploy even when the change set replaces (or removes) this guarded resource, by logical ID as the refusal "
         "names it (HyperPodCluster, the EKS cluster's, ModelBucket24FA8CA2; repeatable), or 'all'; then delete the "
         "old HyperPod cluster (asked once).")]

def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("schema")(schema)
    app.command("synth")(synth)
    app.command("diff")(diff)
    app.command("deploy")(deploy)
    app.command("destroy")(destroy)


# --- init / schema ----------------------------------------------------------------------------------------

def init(name: Annotated[str, typer.Argument(metavar="NAME",
                                             help="Environment name: envs/NAME/ (also the stack-name prefix).")],
         from_config: Annotated[Path | None, typer.Option(
             "--from", metavar="PATH", help="Config to start from. Default: config/default.yaml of the checkout.",
             show_default=False)] = None,
         ) -> None:
    """Create envs/NAME/config.yaml from a config (default: config/default.yaml), named NAME."""
    from hyperpod_dpd.schema import modeline

    root = paths.checkout("hyperpod-dpd init")  # the default config, and the schema the new file points at
    from_config = from_config or root / paths.DEFAULT_CONFIG
    environment.check_env_name(name)
    load_config(from_config)  # the template itself must be valid
    target = environment.envs_dir() / name / environment.ENV_CONFIG  # the checkout's envs/, from any folder
    if target.exists():
        raise UsageError(f"environment {name!r} exists already ({target}); edit it, or pick another name")
    lines = [line for line in from_config.read_text().splitlines() if not line.startswith("# yaml-language-server")]
    text = "\n".join(lines) + "\n"
    text, n = re.subn(r"(?m)^name:.*$", f"name: {name}", text, count=1)
    if not n:
        text = f"name: {name}\n" + text
    text = modeline(target) + "\n" + text
    write_text_atomic(target, text)
    load_config(target)
    print(f"created {target} (name: {name}; stacks {name}-network, ...)")
    print(f"next: edit it, then: hyperpod-dpd synth --env {name}")


def schema(check: Annotated[bool, typer.Option(
               "--check", help="Exit 1 if config/schema.json or docs/config.md is stale.")] = False,
           write: Annotated[bool, typer.Option(
               "--write", help="Rewrite config/schema.json and docs/config.md.")] = False) -> None:
    """Print the JSON Schema of the config (from the pydantic model); --write updates config/schema.json and
    the reference page docs/config.md.

    --write also puts the schema line first in every config/**/*.yaml that lacks it.
    """
    from hyperpod_dpd.schema import committed, config_files, render, render_docs, with_modeline

    if check and write:
        raise UsageError("pass --check or --write, not both")
    if not (check or write):
        sys.stdout.write(render())
        return
    paths.checkout(f"hyperpod-dpd schema {'--check' if check else '--write'}")
    (schema_file, docs_file), text = committed(), render()
    generated = {schema_file: text, docs_file: render_docs()}
    if check:
        stale = [str(p) for p, t in generated.items() if not p.is_file() or p.read_text() != t]
        if stale:
            raise CommandFailed(f"{', '.join(stale)} is stale; run: hyperpod-dpd schema --write")
        unmarked = [str(p) for p in config_files() if with_modeline(p) is not None]
        if unmarked:
            raise CommandFailed(f"{', '.join(unmarked)}: no schema line; run: hyperpod-dpd schema --write")
        print(f"{schema_file}, {docs_file}: up to date")
        return
    for path, generated_text in generated.items():
        write_text_atomic(path, generated_text)
        print(f"wrote {path}")
    for path in config_files():
        marked = with_modeline(path)
        if marked is not None:
            write_text_atomic(path, marked)
            print(f"added the schema line to {path}")


# --- synth ------------------------------------------------------------------------------------------------

def synth(config: ConfigOption = None, env: EnvOption = None,
          outputs_file: Annotated[Path | None, typer.Option(
              "--outputs-file", metavar="PATH",
              help="Deploy outputs to read (default: the environment's cdk-outputs.json).")] = None,
          ) -> None:
    """Synthesize and validate the templates and manifests of THIS config into its own folder."""
    paths.checkout("hyperpod-dpd synth")
    e = environment.resolve(config, env)
    if outputs_file is not None and not outputs_file.is_file():
        raise UsageError(f"--outputs-file {str(outputs_file)!r} does not exist")
    cmd = [sys.executable, "-O", "-m", "hyperpod_mainjob", "--via-cli"]
    cmd += ["--env", e.name] if e.name else ["--config", str(e.config_path)]
    if outputs_file is not None:
        cmd += ["--outputs-file", str(outputs_file)]
    child_env = {**os.environ, **cdk_cli.CLI_ENV, "CDK_VALIDATION": "false"}
    child_env.pop("PYTHONDONTWRITEBYTECODE", None)  # -O needs its own cached bytecode
    rc = subprocess.run(cmd, env=child_env, check=False).returncode
    if rc:
        raise SystemExit(rc)  # the main job printed its one-line error


# --- diff / deploy / destroy -----------------------------------------------------------------------------

#: Construct ID of the stack that holds the HyperPod cluster (hyperpod_infra.app_builder.build).
HYPERPOD_STACK = "HyperPod"


def diff(stacks: StacksArg = None, config: ConfigOption = None, env: EnvOption = None,
         region: DeploymentRegionOption = None, profile: ProfileOption = None,
         outputs_file: OutputsFileOption = None) -> None:
    """Compare the synthesized templates of THIS config with what is deployed (cdk diff --app <cdk.out>); for
    the HyperPod stack, also whether running deep health checks would refuse an instance-group change."""
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd diff")
    e = environment.resolve(config, env, outputs_file=outputs_file)
    home = require_region(e, region, "diff")
    cdk_out = e.require_synthesized().resolve()
    selected = cdk_cli.select_stacks(cdk_out, stacks)
    cdk_cli.require_credentials("diff")
    # `cdk diff` has no --all (aws-cdk's option table): with no stack named it compares every top-level stack.
    ran = cdk_cli.run(["diff", "--app", str(cdk_out), *([] if selected == ["--all"] else selected)],
                      cdk_cli.log_file(e.workdir, "diff"), profile)
    if ran.rc:
        raise cdk_cli.failure("diff", ran, f"fix that, then run hyperpod-dpd diff {e.selector} again")
    sys.stdout.write(ran.output)  # the differences: what this command is for
    if "--all" in selected or HYPERPOD_STACK in selected:
        from hyperpod_dpd import preflight

        check = preflight.check_deep_health_checks(preflight.make_clients(home), e.config.hyperpod, e.config.name)
        print(f"{check.status.lower() if check.status == 'PASS' else check.status}: {check.name}: {check.detail}"
              + (f"; fix: {check.fix}" if check.fix else ""))
    blocked = undeployable_line(cdk_out, selected)
    if blocked:
        print(f"FAIL: {blocked}")
        print(f"next: ./scripts/setup (with that access), then hyperpod-dpd synth {e.selector}")
        return
    print(f"next: hyperpod-dpd deploy {e.selector}")


@dataclass(frozen=True, kw_only=True)
class _Plan:
    """What a deploy deploys, from the synthesized assembly alone (no AWS call)."""

    cdk_out: Path
    selected: list[str]
    """The CDK CLI's selectors (construct IDs, or ``--all``)."""
    ids: dict[str, str]
    """``{construct ID: stack name}`` of the whole assembly."""
    every: dict[str, dict[str, Any]]
    """``{stack name: template}`` of the whole assembly: the stacks that import a guarded resource's exports."""
    chosen: list[str]
    """The construct IDs deployed: the selected stacks and the stacks they depend on."""
    needed: dict[str, list[str]]
    """``{stack name: parameters without a default}`` of the deployed stacks."""
    guarded: list[str]
    """The deployed stacks that hold a guarded resource (:mod:`hyperpod_dpd.change_set`)."""


def _plan(e: environment.Environment, cdk_out: Path, stacks: list[str] | None) -> _Plan:
    """The stacks to deploy and their parameters; refuses a parameter hyperpod-dpd cannot fill (exit 2) and templates
    CloudFormation would refuse (:func:`hyperpod_core.assembly.undeployable_line`, exit 1)."""
    from hyperpod_dpd import change_set
    from hyperpod_dpd.deploy_guards import ADMIN_PARAMETER

    selected = cdk_cli.select_stacks(cdk_out, stacks)
    needed = required_parameters(cdk_out, with_upstream(cdk_out, selected))
    for stack_name, names in needed.items():
        unknown = [n for n in names if n != ADMIN_PARAMETER]
        if unknown:
            raise UsageError(f"stack {stack_name} needs parameters {', '.join(unknown)} that hyperpod-dpd does not "
                             f"know how to fill; deploy it with npx cdk deploy --app {cdk_out} --parameters ...")
    blocked = undeployable_line(cdk_out, selected)
    if blocked:
        raise CommandFailed(f"{blocked.replace('synthesize again', f'hyperpod-dpd synth {e.selector}')}")
    ids = cdk_cli.stack_ids(cdk_out)
    every = cdk_cli.templates(cdk_out, list(ids))
    chosen = with_upstream(cdk_out, selected if selected != ["--all"] else list(ids))
    return _Plan(cdk_out=cdk_out, selected=selected, ids=ids, every=every, chosen=chosen, needed=needed,
                 guarded=change_set.guarded_stacks({ids[sid]: every[ids[sid]] for sid in chosen}))


def _replacements(e: environment.Environment, plan: _Plan, state: dict[str, dict[str, Any] | None],
                  admins: dict[str, str], cloudformation: Any, allow: list[str], home: str,
                  profile: str | None) -> list[Any]:
    """The guarded resources the deploy replaces (checked: refused unless allowed), from the change sets of the
    deployed stacks that hold one; refuses an in-place HyperPod cluster update during deep health checks."""
    from hyperpod_dpd import change_set
    from hyperpod_dpd import deploy_guards as guards

    by_name = {plan.ids[sid]: sid for sid in plan.chosen}
    updated = {name: by_name[name] for name in plan.guarded if state[name] is not None}  # a new stack replaces nothing
    changes = guards.change_sets(plan.cdk_out, updated, admins, cloudformation, profile,
                                 cdk_cli.log_file(e.workdir, "deploy")) if updated else {}
    found = [r for stack_name, cs in changes.items() for r in change_set.replacements(stack_name, cs)]
    guards.check_replacements(found, plan.every, cloudformation, allow, plan.ids, e.selector)
    modified = change_set.modified_properties(changes.get(plan.ids.get(HYPERPOD_STACK, ""), []),
                                              str(change_set.HYPERPOD_CLUSTER.logical_id))
    if modified is not None:
        guards.refuse_during_deep_health_checks(e.config.hyperpod, e.config.name, home, modified)
    return found


def deploy_args(cdk_out: Path, selected: list[str], outputs_file: Path, stacks: int,
                parameters: list[str]) -> list[str]:
    """The CDK CLI's ``deploy`` arguments. As many stacks at once as the assembly has (their dependencies decide what
    runs side by side), so the CDK CLI cannot ask its own IAM/security-group question ("--require-approval" needs
    concurrency 1 and a terminal, and its output goes to the log file): it is always told not to ask, after our own
    question (or ``--yes``). The security changes are what ``hyperpod-dpd diff`` shows before a deploy."""
    return ["deploy", "--app", str(cdk_out), *selected, "--outputs-file", str(outputs_file.resolve()),
            "--concurrency", str(stacks), *parameters, "--require-approval", "never"]


def deploy(stacks: StacksArg = None, config: ConfigOption = None, env: EnvOption = None,
           approve: DeployYesOption = False, admin_principal_arn: AdminPrincipalOption = None,
           allow_replace: AllowReplaceOption = None, region: DeploymentRegionOption = None,
           profile: ProfileOption = None, outputs_file: DeployOutputsFileOption = None) -> None:
    """Deploy the templates synthesized from THIS config (shows what and asks; --yes does not ask); write the
    outputs file next to them.

    Before it deploys a stack that exists, it reads the stack's change set and stops when the HyperPod cluster,
    the EKS cluster or the model bucket would be replaced (--allow-replace RESOURCE: go ahead), and when an update
    of the HyperPod cluster would meet running deep health checks.
    """
    from hyperpod_dpd import aws, change_set
    from hyperpod_dpd import deploy_guards as guards
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd deploy")
    e = environment.resolve(config, env, outputs_file=outputs_file)
    home = require_region(e, region, "deploy")
    cdk_out = e.require_synthesized().resolve()
    given_admin = None if admin_principal_arn is None else guards.principal_arn(admin_principal_arn)
    plan = _plan(e, cdk_out, stacks)
    allow = guards.allow_replace(allow_replace, plan.every)
    cdk_cli.require_credentials("deploy")
    cloudformation = aws.client("cloudformation", home) if plan.needed or plan.guarded else None
    with aws.aws_errors("reading the deployed stacks; cloudformation:DescribeStacks"):
        state = {name: change_set.deployed(cloudformation, name) for name in dict.fromkeys(
            [*plan.needed, *plan.guarded])}
    admins, admin = guards.admins_to_pass(list(plan.needed), state, given_admin, home)
    deployed = [plan.ids[sid] for sid in plan.chosen]
    print(f"deploy: {len(deployed)} stacks of {e.config.name} ({', '.join(deployed)}) from {cdk_out} to "
          f"{home}" + (f"; {admin}" if admin else "") + f"; outputs to {e.outputs_file}", file=sys.stderr)
    confirm(f"deploy {len(deployed)} stacks of {e.config.name} to {home} (IAM and security-group changes "
            f"included: hyperpod-dpd diff {e.selector} lists them)?", yes=approve,
            command="hyperpod-dpd deploy", cancelled="nothing deployed")
    found = _replacements(e, plan, state, admins, cloudformation, allow, home, profile)
    ran = cdk_cli.run(deploy_args(cdk_out, plan.selected, e.outputs_file, len(plan.ids),
                                  guards.parameter_args(admins)),
                      cdk_cli.log_file(e.workdir, "deploy"), profile)
    if ran.rc:
        if found:
            guards.report_retained_clusters(found, cloudformation, home)
        raise cdk_cli.failure("deploy", ran, "a stack whose update failed was rolled back, stacks deployed before it "
                                             f"in this run stay deployed; see what differs now: hyperpod-dpd diff "
                                             f"{e.selector}")
    print(f"wrote {e.outputs_file}")
    if found:
        guards.delete_retained_clusters(found, cloudformation, home, approve)
    print(f"next: hyperpod-dpd synth {e.selector}   # manifests with the deployed bucket, roles, AMP workspace")
    print(f"      hyperpod-dpd stage-model ./<model folder> {e.selector}")


def set_outputs_aside(outputs_file: Path, destroyed: list[str], now: dt.datetime | None = None) -> Path | None:
    """After a successful destroy: move the outputs file to ``cdk-outputs.destroyed-<UTC stamp>.json`` so that no
    later command uses the destroyed deployment's names; when stacks remain, the outputs file keeps only theirs."""
    if not outputs_file.is_file():
        return None
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    aside = outputs_file.with_name(f"{outputs_file.stem}.destroyed-{stamp}{outputs_file.suffix}")
    try:
        data = json.loads(outputs_file.read_text())
    except ValueError:
        data = None
    remaining = {k: v for k, v in data.items() if k not in destroyed} if isinstance(data, dict) else {}
    outputs_file.replace(aside)
    if remaining:
        write_text_atomic(outputs_file, json.dumps(remaining, indent=2) + "\n")
    return aside


def destroy(stacks: StacksArg = None, config: ConfigOption = None, env: EnvOption = None,
            yes: YesOption = False, dry_run: DryRunOption = False,
            region: DeploymentRegionOption = None, profile: ProfileOption = None,
            outputs_file: OutputsFileOption = None) -> None:
    """Destroy the stacks of THIS config (shows what and asks; --yes does not ask). The model bucket is kept
    unless model_bucket.delete_on_destroy; the outputs file is moved aside afterwards."""
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd destroy")
    e = environment.resolve(config, env, outputs_file=outputs_file)
    require_region(e, region, "destroy")
    cdk_out = e.require_synthesized().resolve()
    selected = cdk_cli.select_stacks(cdk_out, stacks)
    ids = cdk_cli.stack_ids(cdk_out)
    gone = [ids[sid] for sid in reversed(cdk_cli.with_downstream(cdk_out, selected))]
    if not dry_run:
        cdk_cli.require_credentials("destroy")
    mb = e.config.model_bucket
    bucket = (f"the model bucket {mb.existing_name} is not touched (model_bucket.existing_name)" if mb.existing_name
              else "the model bucket is deleted (model_bucket.delete_on_destroy: true)" if mb.delete_on_destroy
              else "the model bucket is kept (model_bucket.delete_on_destroy: false)")
    print(f"destroy: {len(gone)} stacks of {e.config.name} in {e.config.region}, in this order: {', '.join(gone)}; "
          f"{bucket if f'{e.config.name}-platform' in gone else 'no bucket is touched'}", file=sys.stderr)
    if dry_run:
        print("dry run: nothing destroyed")
        return
    confirm(f"destroy {len(gone)} stacks of {e.config.name} in {e.config.region}?", yes=yes,
            command="hyperpod-dpd destroy", cancelled="nothing destroyed")
    ran = cdk_cli.run(["destroy", "--app", str(cdk_out), *selected, "--force"],  # --force: asked above
                      cdk_cli.log_file(e.workdir, "destroy"), profile)
    if ran.rc:
        raise cdk_cli.failure("destroy", ran, f"{e.outputs_file.name} is kept. Run hyperpod-dpd sweep {e.selector} "
                                              "(what blocks a destroy), then destroy again")
    aside = set_outputs_aside(e.outputs_file, gone)
    if aside is not None:
        print(f"moved {e.outputs_file} to {aside.name}: no later command uses the destroyed stacks' names"
              + (f" ({e.outputs_file.name} keeps the remaining stacks')" if e.outputs_file.is_file() else ""))
    if f"{e.config.name}-platform" in gone and not mb.existing_name and not mb.delete_on_destroy:
        print(kept_model_bucket(aside, e.config_path))
    print(f"next: hyperpod-dpd synth {e.selector} && hyperpod-dpd deploy {e.selector}   # to recreate")


#: Where docs/platform.md says how to delete what a destroy keeps (a versioned bucket: ``aws s3 rb --force`` fails).
DELETE_KEPT_DATA = 'docs/platform.md, "Deleting the kept model data anyway"'


def kept_model_bucket(outputs_file: Path | None, config_path: Path) -> str:
    """What ``destroy`` prints when it kept the model bucket: the ``model_bucket`` lines that let the next deployment
    read it again, from the destroyed deployment's outputs (``ModelBucketName``, ``ModelBucketKeyArn``), and where the
    deletion procedure is. Only values that load into ``model_bucket`` are printed as config lines."""
    from hyperpod_core.inputs import read_outputs_file

    try:
        found = {k: v for k, (_, v) in read_outputs_file(outputs_file).items()} if outputs_file else {}
    except ConfigError:
        found = {}

    def loads(**values: str | None) -> bool:
        try:
            ModelBucketConfig.model_validate(values)
        except ValidationError:
            return False
        return True

    name, key = found.get(outputs.MODEL_BUCKET_NAME), found.get(outputs.MODEL_BUCKET_KEY_ARN)
    lines = ["model bucket kept, with its KMS key and its access-log bucket (model_bucket.delete_on_destroy: false)"]
    if name and loads(existing_name=name):
        lines += [f"to read it again, put these lines into {config_path} (in place of its model_bucket block):",
                  "model_bucket:", f"  existing_name: {name}"]
        lines.append(f"  existing_kms_key_arn: {key}" if key and loads(existing_name=name, existing_kms_key_arn=key)
                     else f"  # existing_kms_key_arn: the key of the bucket's default encryption (aws s3api "
                          f"get-bucket-encryption --bucket {name}; no {outputs.MODEL_BUCKET_KEY_ARN} output)")
    else:
        lines.append(f"to read it again, set model_bucket.existing_name and existing_kms_key_arn to the platform "
                     f"stack's outputs {outputs.MODEL_BUCKET_NAME} and {outputs.MODEL_BUCKET_KEY_ARN} (not in "
                     f"{outputs_file or 'an outputs file here'})")
    lines.append(f"to delete the bucket, its key and the access-log bucket instead: {DELETE_KEPT_DATA} (the bucket "
                 "is versioned: aws s3 rb --force cannot empty it)")
    return "\n".join(lines)
