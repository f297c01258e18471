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
  the CDK CLI's ``--profile``;
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
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from hyperpod_core import environment, paths
from hyperpod_core.assembly import required_parameters
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_dpd import principal
from hyperpod_dpd.commands.options import ConfigOption, DeploymentRegionOption, EnvOption, ProfileOption
from hyperpod_dpd.confirm import DryRunOption, YesOption, confirm

#: Quiet, offline-friendly settings for the CDK CLI (tooling.md §0). Not CDK8S_CHECK_UPGRADE: the CDK CLI reads
#: every CDK* variable as an option and reports that one as the unknown option "--8SCheckUpgrade".
CLI_ENV = {"CDK_DISABLE_CLI_TELEMETRY": "true", "CDK_DISABLE_VERSION_CHECK": "1",
           "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED": "true",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}

StacksArg = Annotated[list[str] | None, typer.Argument(
    metavar="STACK", show_default=False,
    help="Stacks: construct IDs (Network, Observability, Cluster, HyperPod, Platform, ObservabilityAddon) or "
         "CloudFormation names (<name>-network, ...). Default: all.")]

err = Console(stderr=True)


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
    from hyperpod_core.atomic import write_text_atomic
    from hyperpod_core.config import load_config
    from hyperpod_dpd.schema import modeline

    root = paths.checkout("hyperpod-dpd init")  # the default config, and the schema the new file points at
    from_config = from_config or root / paths.DEFAULT_CONFIG
    environment.check_env_name(name)
    load_config(from_config)  # the template itself must be valid
    target = environment.ENVS_DIR / name / "config.yaml"
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
    from hyperpod_core.atomic import write_text_atomic
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
    child_env = {**os.environ, **CLI_ENV, "CDK_VALIDATION": "false"}
    child_env.pop("PYTHONDONTWRITEBYTECODE", None)  # -O needs its own cached bytecode
    rc = subprocess.run(cmd, env=child_env, check=False).returncode
    if rc:
        raise SystemExit(rc)  # the main job printed its one-line error


# --- diff / deploy / destroy -----------------------------------------------------------------------------

def _stack_ids(cdk_out: Path) -> dict[str, str]:
    """``{construct ID: CloudFormation stack name}`` of the synthesized assembly, in manifest order."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    out: dict[str, str] = {}
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact.get("type") == "aws:cloudformation:stack":
            out[artifact_id] = artifact.get("properties", {}).get("stackName", artifact_id)
    return out


def select_stacks(cdk_out: Path, wanted: list[str] | None) -> list[str]:
    """CDK CLI selectors for ``wanted``: construct IDs as given, CloudFormation names translated; ``--all``."""
    ids = _stack_ids(cdk_out)
    if not wanted:
        return ["--all"]
    by_name = {name: sid for sid, name in ids.items()}
    by_lower = {sid.lower(): sid for sid in ids}
    chosen = []
    for w in wanted:
        sid = w if w in ids else by_name.get(w) or by_lower.get(w.lower())
        if sid is None:
            allowed = ", ".join(f"{sid} ({name})" for sid, name in ids.items())
            raise UsageError(f"stack must be one of {allowed}, got {w!r}")
        chosen.append(sid)
    return chosen


def npx_cdk(args: list[str], profile: str | None = None) -> int:
    """Run the pinned CDK CLI from the repository root (where package-lock.json pins it); ``profile``
    (``--profile``) becomes the CDK CLI's own ``--profile`` (a global option of every command)."""
    root = paths.checkout(f"hyperpod-dpd {args[0]}")
    npx = shutil.which("npx")
    if npx is None:
        raise CommandFailed("npx not found on PATH (install Node.js 18+ and run ./scripts/setup)")
    cmd = [npx, "--no-install", "cdk", *args, *(["--profile", profile] if profile else [])]
    err.print(f"[dim]$ {' '.join(cmd[1:])}[/dim]", highlight=False)
    return subprocess.run(cmd, cwd=root, env={**os.environ, **CLI_ENV}, check=False).returncode


#: Construct ID of the stack that holds the HyperPod cluster (hyperpod_infra.app_builder.build).
HYPERPOD_STACK = "HyperPod"


def diff(stacks: StacksArg = None, config: ConfigOption = None, env: EnvOption = None,
         region: DeploymentRegionOption = None, profile: ProfileOption = None) -> None:
    """Compare the synthesized templates of THIS config with what is deployed (cdk diff --app <cdk.out>); for
    the HyperPod stack, also whether running deep health checks would refuse an instance-group change."""
    from hyperpod_core.assembly import undeployable_line
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd diff")
    e = environment.resolve(config, env)
    home = require_region(e, region, "diff")
    cdk_out = e.require_synthesized().resolve()
    selected = select_stacks(cdk_out, stacks)
    # `cdk diff` has no --all (aws-cdk's option table): with no stack named it compares every top-level stack.
    rc = npx_cdk(["diff", "--app", str(cdk_out), *([] if selected == ["--all"] else selected)], profile)
    if rc not in (0,):
        raise CommandFailed(f"cdk diff exited {rc}")
    if "--all" in selected or HYPERPOD_STACK in selected:
        from hyperpod_dpd import preflight

        check = preflight.check_deep_health_checks(preflight.make_clients(home), e.config)
        print(f"{check.status.lower() if check.status == 'PASS' else check.status}: {check.name}: {check.detail}"
              + (f"; fix: {check.fix}" if check.fix else ""))
    blocked = undeployable_line(cdk_out, selected)
    if blocked:
        print(f"FAIL: {blocked}")
        print(f"next: ./scripts/setup (with that access), then hyperpod-dpd synth {e.selector}")
        return
    print(f"next: hyperpod-dpd deploy {e.selector}")


#: The cluster stack's parameter for the IAM principal given cluster admin through an EKS access entry (when
#: the config does not name one in eks.admin_principal_arn).
ADMIN_PARAMETER = "AdminPrincipalArn"


def principal_arn(caller_arn: str) -> str:
    """:func:`hyperpod_dpd.principal.principal_arn`, with bad input as a usage error (exit 2)."""
    try:
        return principal.principal_arn(caller_arn)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _caller_principal(region: str) -> str:
    from hyperpod_dpd import aws

    with aws.aws_errors("cannot find who deploys (pass --admin-principal-arn, or set eks.admin_principal_arn)"
                        "; sts:GetCallerIdentity"):
        arn = aws.client("sts", region).get_caller_identity()["Arn"]
    return principal_arn(arn)


def _templates(cdk_out: Path, stack_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``{CloudFormation stack name: template}`` of the stacks ``stack_ids`` (construct IDs) of the assembly."""
    artifacts = json.loads((cdk_out / "manifest.json").read_text())["artifacts"]
    out: dict[str, dict[str, Any]] = {}
    for sid in stack_ids:
        props = artifacts[sid].get("properties", {})
        out[props.get("stackName", sid)] = json.loads((cdk_out / props["templateFile"]).read_text())
    return out


def _admin(needed: list[str], state: dict[str, dict[str, Any] | None], given: str | None,
           region: str) -> tuple[dict[str, str], str]:
    """The admin principal to pass to each stack of ``needed`` (``{stack name: ARN}``; a stack that keeps its
    deployed one is left out), and what the summary says of it.

    An access entry's ``PrincipalArn`` is create-only (``AWS::EKS::AccessEntry``: a new value replaces the entry,
    so the previous admin loses access, and fails 409 ``ResourceInUseException`` when the new principal already has
    an entry). So on an update the deployed value stays: the parameter is not passed, and the CDK CLI sends
    ``UsePreviousValue: true`` for a template parameter that is not given but is set on the deployed stack
    (``--previous-parameters``, default true: aws-cdk's ``cdk deploy`` reference, and the pinned CLI's
    ``ParameterValues``, node_modules/aws-cdk/lib/index.js). ``--admin-principal-arn`` changes it on purpose; a
    first deploy takes the caller."""
    from hyperpod_dpd import change_set

    passed: dict[str, str] = {}
    said = ""
    for stack_name in needed:
        kept = change_set.parameter(state.get(stack_name), ADMIN_PARAMETER)
        if given is None and kept is not None:
            said = f"cluster admin {kept} (deployed; kept: pass --admin-principal-arn to change it)"
            continue
        admin = passed[stack_name] = given or _caller_principal(region)
        said = f"cluster admin {admin}" + (f" (replaces {kept}, which loses its access entry)"
                                           if kept is not None and kept != admin else "")
    return passed, said


def _parameters(admins: dict[str, str], stacks: Any = None) -> list[str]:
    """``--parameters STACK:AdminPrincipalArn=ARN`` (the CDK CLI keys them by stack name) for ``stacks`` (all)."""
    return [x for stack_name, admin in admins.items() if stacks is None or stack_name in stacks
            for x in ("--parameters", f"{stack_name}:{ADMIN_PARAMETER}={admin}")]


def _change_sets(cdk_out: Path, updated: dict[str, str], admins: dict[str, str], cloudformation: Any,
                 profile: str | None) -> dict[str, list[dict[str, Any]]]:
    """``{stack name: DescribeChangeSet Changes}`` of what deploying would change in the stacks ``updated`` (``{stack
    name: construct ID}``, all deployed): the pinned CDK CLI creates their change sets without executing them, they
    are read and deleted (:mod:`hyperpod_dpd.change_set`)."""
    from hyperpod_dpd import aws, change_set

    # --method=prepare-change-set: "creates a change set without executing it" (the pinned CLI's option table,
    # node_modules/aws-cdk/lib/cli/cli-config.js; aws-cdk's cdk deploy reference); --exclusively: these stacks
    # only. Never skipped for an unchanged template, and nothing to approve: nothing runs.
    rc = npx_cdk(["deploy", "--app", str(cdk_out), *updated.values(), "--exclusively",
                  "--method=prepare-change-set", "--change-set-name", change_set.CHANGE_SET_NAME,
                  "--concurrency", str(len(updated)), "--require-approval", "never",
                  *_parameters(admins, updated)], profile)
    if rc:
        raise CommandFailed(f"cdk deploy --method=prepare-change-set exited {rc}: the change set of a stack could not "
                            "be created (the CDK CLI's output above says which and why), so nothing was deployed. A "
                            "stack that imports a value a stack before it has not deployed yet cannot have one: "
                            "deploy that stack first (hyperpod-dpd deploy <stack>), then all")
    changes: dict[str, list[dict[str, Any]]] = {}
    try:
        with aws.aws_errors("reading the replacement check's change sets; cloudformation:DescribeChangeSet"):
            for stack_name in updated:
                changes[stack_name] = change_set.read(cloudformation, stack_name)
    finally:  # also when reading failed: a change set left behind could be executed by mistake
        with aws.aws_errors("deleting the replacement check's change sets; cloudformation:DeleteChangeSet"):
            change_set.discard(cloudformation, updated)
    return changes


def _allow_replace(values: list[str] | None, templates: dict[str, dict[str, Any]]) -> list[str]:
    """``--allow-replace`` values, checked: ``all`` or the logical ID of a guarded resource of the assembly."""
    from hyperpod_dpd import change_set

    known = list(dict.fromkeys(lid for template in templates.values()
                               for lid, r in (template.get("Resources") or {}).items()
                               if change_set.guard_of(str(r.get("Type", "")), lid) is not None))
    for value in values or []:
        if value != change_set.ALLOW_ALL and value not in known:
            raise UsageError(f"--allow-replace must be {change_set.ALLOW_ALL} or the logical ID of a resource the "
                             f"replacement check guards ({', '.join(known)}), got {value!r}")
    return list(values or [])


def _check_replacements(found: list[Any], templates: dict[str, dict[str, Any]], cloudformation: Any,
                        allow: list[str], ids: dict[str, str], selector: str) -> None:
    """Refuse the deploy when ``found`` holds a replacement that ``allow`` does not allow, or one that the stacks
    importing its exports make impossible (even when allowed); otherwise say what each allowed one does."""
    from hyperpod_dpd import aws, change_set

    held: dict[Any, list[str]] = {}
    with aws.aws_errors("reading the stacks that import a replaced resource's exports; cloudformation:DescribeStacks"):
        for r in found:
            names = [n for n in change_set.importers_of(templates, r) if change_set.exists(cloudformation, n)]
            if names:
                held[r] = names
    # A certain replacement (or removal) of an imported resource fails late and rolls back: refused even when allowed.
    blocking = {r: names for r, names in held.items() if r.replacement == "True"}
    if blocking:
        raise CommandFailed(change_set.held_by_imports(blocking, {name: sid for sid, name in ids.items()}, selector))
    refused = [r for r in found if not change_set.allowed(r, allow)]
    if refused:
        raise CommandFailed(change_set.refusal(refused))
    for r in found:
        then = ("it is deleted" if r.action == change_set.REMOVE else f"the old one is {r.guard.afterwards}")
        if r in held:  # Conditional: it may not be replaced at all (the ChangeSource says why CloudFormation is unsure)
            then += (f"; should CloudFormation replace it, the update fails while {', '.join(held[r])} import its "
                     "exports, and rolls back")
        print(f"--allow-replace: {r.describe()}; {then}", file=sys.stderr)


def _refuse_during_deep_health_checks(config: Any, region: str, modified: tuple[str, ...]) -> None:
    """The HyperPod stack's change set modifies the HyperPod cluster in place (an ``UpdateCluster``, which HyperPod
    does not carry out as expected while deep health checks run: AWS HyperPod EKS deep health check page): refuse
    while nodes are in them (:func:`hyperpod_dpd.preflight.check_deep_health_checks`)."""
    from hyperpod_dpd import preflight

    check = preflight.check_deep_health_checks(preflight.make_clients(region), config, modified=modified)
    if check.status == "FAIL":
        raise CommandFailed(f"{check.detail}. Nothing was deployed; fix: {check.fix}")
    if check.status != "PASS":
        print(f"note: {check.name} not checked: {check.detail}" + (f"; fix: {check.fix}" if check.fix else ""),
              file=sys.stderr)


def _old_clusters(found: list[Any], cloudformation: Any) -> list[tuple[Any, str | None, str]]:
    """``(replacement, physical ID now, error)`` of each HyperPod cluster ``found`` replaces (a Modify with a
    previous physical ID): ``now`` is ``None`` and ``error`` says why when it could not be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    from hyperpod_dpd import change_set
    from hyperpod_dpd.aws import explain

    out: list[tuple[Any, str | None, str]] = []
    for r in found:
        if r.guard is not change_set.HYPERPOD_CLUSTER or not r.physical_id or r.action == change_set.REMOVE:
            continue
        try:
            now = cloudformation.describe_stack_resource(StackName=r.stack, LogicalResourceId=r.logical_id)[
                "StackResourceDetail"].get("PhysicalResourceId")
        except (BotoCoreError, ClientError) as exc:
            out.append((r, None, f"{explain(exc).code}: {explain(exc).message}"))
            continue
        out.append((r, now, ""))
    return out


def _delete_retained_clusters(found: list[Any], cloudformation: Any, region: str, yes: bool) -> None:
    """After a deploy with ``--allow-replace``: delete each HyperPod cluster the update replaced, which
    ``UpdateReplacePolicy: Retain`` left running, by its previous physical ID (its ARN; ``DeleteCluster`` takes
    the name or the ARN), asked once (``--yes`` answers)."""
    from hyperpod_dpd import aws

    for r, now, error in _old_clusters(found, cloudformation):
        if error:
            raise CommandFailed(f"reading {r.stack} {r.logical_id} failed ({error}; cloudformation:"
                                f"DescribeStackResource): if the old HyperPod cluster {r.physical_id} was replaced, "
                                f"delete it with: aws sagemaker delete-cluster --cluster-name {r.physical_id} "
                                f"--region {region}")
        if now == r.physical_id:
            print(f"{r.stack}: {r.logical_id} was not replaced (Replacement {r.replacement}): nothing to delete")
            continue
        confirm(f"delete the old HyperPod cluster {r.physical_id}, replaced by {now} and still running?", yes=yes,
                command="hyperpod-dpd deploy", cancelled=f"the old HyperPod cluster {r.physical_id} keeps running; "
                f"delete it with: aws sagemaker delete-cluster --cluster-name {r.physical_id} --region {region}")
        with aws.aws_errors(f"deleting the old HyperPod cluster {r.physical_id}; sagemaker:DeleteCluster"):
            aws.client("sagemaker", region).delete_cluster(ClusterName=r.physical_id)
        print(f"deleting the old HyperPod cluster {r.physical_id} (its nodes go with it)")


def _report_retained_clusters(found: list[Any], cloudformation: Any, region: str) -> None:
    """After a failed deploy with ``--allow-replace``: a HyperPod stack updated before another stack failed keeps
    its new cluster, and ``UpdateReplacePolicy: Retain`` the old one running outside the stack. Say which, with the
    command that deletes it (never deleted here: the deploy failed)."""
    for r, now, error in _old_clusters(found, cloudformation):
        hint = f"aws sagemaker delete-cluster --cluster-name {r.physical_id} --region {region}"
        if error:
            print(f"note: could not read {r.stack} {r.logical_id} ({error}): if the old HyperPod cluster "
                  f"{r.physical_id} was replaced, it keeps running outside the stack; delete it with: {hint}",
                  file=sys.stderr)
        elif now != r.physical_id:
            print(f"note: the old HyperPod cluster {r.physical_id} was replaced by {now} before the deploy failed and "
                  f"keeps running, and billing, outside the stack; delete it with: {hint}", file=sys.stderr)
        else:  # not replaced, or replaced and rolled back: CloudFormation removes what a failed update created [I]
            print(f"note: {r.stack} {r.logical_id} is still {r.physical_id} (not replaced, or rolled back); see every "
                  f"HyperPod cluster with: aws sagemaker list-clusters --region {region}", file=sys.stderr)


def deploy(stacks: StacksArg = None, config: ConfigOption = None, env: EnvOption = None,
           approve: Annotated[bool, typer.Option(
               "--yes", "-y", help="Do not ask: neither before deploying nor before IAM/security-group changes "
                                   "(--require-approval never), nor before deleting an old HyperPod cluster "
                                   "(--allow-replace).")] = False,
           admin_principal_arn: Annotated[str | None, typer.Option(
               "--admin-principal-arn", metavar="ARN", show_default=False,
               help="IAM role/user given cluster admin (kubectl) when the config names none. Default: the deployed "
                    "one on an update, the caller of sts:GetCallerIdentity on the first deploy.")] = None,
           allow_replace: Annotated[list[str] | None, typer.Option(
               "--allow-replace", metavar="RESOURCE|all",
               help="Deploy even when the change set replaces (or removes) this guarded resource, by logical ID as "
                    "the refusal names it (HyperPodCluster, the EKS cluster's, ModelBucket24FA8CA2; repeatable), or "
                    "'all'; then delete the old HyperPod cluster (asked once).", show_default=False)] = None,
           region: DeploymentRegionOption = None, profile: ProfileOption = None,
           ) -> None:
    """Deploy the templates synthesized from THIS config (shows what and asks; --yes does not ask); write the
    outputs file next to them.

    Before it deploys a stack that exists, it reads the stack's change set and stops when the HyperPod cluster,
    the EKS cluster or the model bucket would be replaced (--allow-replace RESOURCE: go ahead), and when an update
    of the HyperPod cluster would meet running deep health checks.
    """
    from hyperpod_core.assembly import undeployable_line, with_upstream
    from hyperpod_dpd import aws, change_set
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd deploy")
    e = environment.resolve(config, env)
    home = require_region(e, region, "deploy")
    cdk_out = e.require_synthesized().resolve()
    if admin_principal_arn is not None:
        admin_principal_arn = principal_arn(admin_principal_arn)
    selected = select_stacks(cdk_out, stacks)
    needed = required_parameters(cdk_out, with_upstream(cdk_out, selected))
    for stack_name, names in needed.items():
        unknown = [n for n in names if n != ADMIN_PARAMETER]
        if unknown:
            raise UsageError(f"stack {stack_name} needs parameters {', '.join(unknown)} that hyperpod-dpd does not "
                             f"know how to fill; deploy it with npx cdk deploy --app {cdk_out} --parameters ...")
    blocked = undeployable_line(cdk_out, selected)
    if blocked:
        raise CommandFailed(f"{blocked.replace('synthesize again', f'hyperpod-dpd synth {e.selector}')}")
    ids = _stack_ids(cdk_out)
    every = _templates(cdk_out, list(ids))  # the whole assembly: the stacks that import a guarded resource's exports
    allow = _allow_replace(allow_replace, every)
    chosen = with_upstream(cdk_out, selected if selected != ["--all"] else list(ids))
    guarded = change_set.guarded_stacks({ids[sid]: every[ids[sid]] for sid in chosen})
    by_name = {ids[sid]: sid for sid in chosen}
    state: dict[str, dict[str, Any] | None] = {}
    cloudformation = aws.client("cloudformation", home) if needed or guarded else None
    with aws.aws_errors("reading the deployed stacks; cloudformation:DescribeStacks"):
        for stack_name in dict.fromkeys([*needed, *guarded]):
            state[stack_name] = change_set.deployed(cloudformation, stack_name)
    admins, admin = _admin(list(needed), state, admin_principal_arn, home)
    # As many at once as the assembly has stacks: their dependencies decide what runs side by side.
    args = ["deploy", "--app", str(cdk_out), *selected, "--outputs-file", str(e.outputs_file.resolve()),
            "--concurrency", str(len(ids)), *_parameters(admins)]
    deployed = [ids[sid] for sid in chosen]
    print(f"deploy: {len(deployed)} stacks of {e.config.name} ({', '.join(deployed)}) from {cdk_out} to "
          f"{home}" + (f"; {admin}" if admin else "") + f"; outputs to {e.outputs_file}", file=sys.stderr)
    confirm(f"deploy {len(deployed)} stacks of {e.config.name} to {home}?", yes=approve,
            command="hyperpod-dpd deploy", cancelled="nothing deployed")
    updated = {name: by_name[name] for name in guarded if state[name] is not None}  # a new stack replaces nothing
    changes = _change_sets(cdk_out, updated, admins, cloudformation, profile) if updated else {}
    found = [r for stack_name, cs in changes.items() for r in change_set.replacements(stack_name, cs)]
    _check_replacements(found, every, cloudformation, allow, ids, e.selector)
    modified = change_set.modified_properties(changes.get(ids.get(HYPERPOD_STACK, ""), []),
                                              str(change_set.HYPERPOD_CLUSTER.logical_id))
    if modified is not None:
        _refuse_during_deep_health_checks(e.config, home, modified)
    if approve:
        args += ["--require-approval", "never"]
    rc = npx_cdk(args, profile)
    if rc:
        if found:
            _report_retained_clusters(found, cloudformation, home)
        raise CommandFailed(f"cdk deploy exited {rc}: its output above names the stack and the reason; a stack "
                            "whose update failed was rolled back, stacks deployed before it in this run stay "
                            f"deployed. See what differs now: hyperpod-dpd diff {e.selector}")
    print(f"wrote {e.outputs_file}")
    if found:
        _delete_retained_clusters(found, cloudformation, home, approve)
    print(f"next: hyperpod-dpd synth {e.selector}   # manifests with the deployed bucket, roles, AMP workspace")
    print(f"      hyperpod-dpd stage-model ./<model folder> {e.selector}")


def with_downstream(cdk_out: Path, selected: list[str]) -> list[str]:
    """Construct IDs of ``selected`` and every stack that depends on them (what ``cdk destroy`` removes: it
    selects a stack's dependents too), in manifest order; every stack for ``--all``."""
    artifacts = json.loads((cdk_out / "manifest.json").read_text())["artifacts"]
    ids = list(_stack_ids(cdk_out))
    if selected == ["--all"]:
        return ids
    chosen = set(selected)
    changed = True
    while changed:
        changed = False
        for sid in ids:
            if sid not in chosen and chosen & set(artifacts[sid].get("dependencies", [])):
                chosen.add(sid)
                changed = True
    return [sid for sid in ids if sid in chosen]


def set_outputs_aside(outputs_file: Path, destroyed: list[str], now: dt.datetime | None = None) -> Path | None:
    """After a successful destroy: move the outputs file to ``cdk-outputs.destroyed-<UTC stamp>.json`` so that no
    later command uses the destroyed deployment's names; when stacks remain, the outputs file keeps only theirs."""
    from hyperpod_core.atomic import write_text_atomic

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
            region: DeploymentRegionOption = None, profile: ProfileOption = None) -> None:
    """Destroy the stacks of THIS config (shows what and asks; --yes does not ask). The model bucket is kept
    unless model_bucket.delete_on_destroy; the outputs file is moved aside afterwards."""
    from hyperpod_dpd.deployment import require_region

    paths.checkout("hyperpod-dpd destroy")
    e = environment.resolve(config, env)
    require_region(e, region, "destroy")
    cdk_out = e.require_synthesized().resolve()
    selected = select_stacks(cdk_out, stacks)
    ids = _stack_ids(cdk_out)
    gone = [ids[sid] for sid in reversed(with_downstream(cdk_out, selected))]
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
    rc = npx_cdk(["destroy", "--app", str(cdk_out), *selected, "--force"], profile)  # --force: asked above
    if rc:
        raise CommandFailed(f"cdk destroy exited {rc}: its output above names the stack that failed; "
                            f"{e.outputs_file.name} is kept. Run hyperpod-dpd sweep {e.selector} (what blocks a "
                            f"destroy), then destroy again")
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
    from pydantic import ValidationError

    from hyperpod_core import outputs
    from hyperpod_core.config.model import ModelBucketConfig
    from hyperpod_core.errors import ConfigError
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
