"""What ``hyperpod-dpd deploy`` checks and fills before and after the CDK CLI deploys (docs/deploy.md).

* the cluster admin: ``AdminPrincipalArn`` is passed on a first deploy (``--admin-principal-arn``, else the caller of
  ``sts:GetCallerIdentity``), kept on an update (:func:`admins_to_pass`);
* no silent replacement: the change set of every deployed stack that holds a guarded resource is prepared by the CDK
  CLI, read and deleted (:func:`change_sets`); a replacement is refused unless ``--allow-replace``, and always while a
  stack imports the resource's exports (:func:`check_replacements`); an in-place update of the HyperPod cluster is
  refused during deep health checks (:func:`refuse_during_deep_health_checks`);
* after an allowed replacement of the HyperPod cluster, the old one (``UpdateReplacePolicy: Retain``) is deleted,
  asked once (:func:`delete_retained_clusters`), or named when the deploy failed (:func:`report_retained_clusters`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hyperpod_core.config.cluster import HyperPodConfig
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_dpd import aws, cdk_cli, change_set, principal
from hyperpod_dpd.aws import explain
from hyperpod_dpd.confirm import confirm

#: The cluster stack's parameter for the IAM principal given cluster admin through an EKS access entry (when
#: the config does not name one in eks.admin_principal_arn).
ADMIN_PARAMETER = "AdminPrincipalArn"


def principal_arn(caller_arn: str) -> str:
    """:func:`hyperpod_dpd.principal.principal_arn`, with bad input as a usage error (exit 2)."""
    try:
        return principal.principal_arn(caller_arn)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def caller_principal(region: str) -> str:
    with aws.aws_errors("cannot find who deploys (pass --admin-principal-arn, or set eks.admin_principal_arn)"
                        "; sts:GetCallerIdentity"):
        arn = aws.client("sts", region).get_caller_identity()["Arn"]
    return principal_arn(arn)


def admins_to_pass(needed: list[str], state: dict[str, dict[str, Any] | None], given: str | None,
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
    passed: dict[str, str] = {}
    said = ""
    for stack_name in needed:
        kept = change_set.parameter(state.get(stack_name), ADMIN_PARAMETER)
        if given is None and kept is not None:
            said = f"cluster admin {kept} (deployed; kept: pass --admin-principal-arn to change it)"
            continue
        admin = passed[stack_name] = given or caller_principal(region)
        said = f"cluster admin {admin}" + (f" (replaces {kept}, which loses its access entry)"
                                           if kept is not None and kept != admin else "")
    return passed, said


def parameter_args(admins: dict[str, str], stacks: Any = None) -> list[str]:
    """``--parameters STACK:AdminPrincipalArn=ARN`` (the CDK CLI keys them by stack name) for ``stacks`` (all)."""
    return [x for stack_name, admin in admins.items() if stacks is None or stack_name in stacks
            for x in ("--parameters", f"{stack_name}:{ADMIN_PARAMETER}={admin}")]


def change_sets(cdk_out: Path, updated: dict[str, str], admins: dict[str, str], cloudformation: Any,
                profile: str | None, log: Path) -> dict[str, list[dict[str, Any]]]:
    """``{stack name: DescribeChangeSet Changes}`` of what deploying would change in the stacks ``updated`` (``{stack
    name: construct ID}``, all deployed): the pinned CDK CLI creates their change sets without executing them, they
    are read and deleted (:mod:`hyperpod_dpd.change_set`)."""
    # --method=prepare-change-set: "creates a change set without executing it" (the pinned CLI's option table,
    # node_modules/aws-cdk/lib/cli/cli-config.js; aws-cdk's cdk deploy reference); --exclusively: these stacks
    # only. Never skipped for an unchanged template, and nothing to approve: nothing runs.
    ran = cdk_cli.run(["deploy", "--app", str(cdk_out), *updated.values(), "--exclusively",
                       "--method=prepare-change-set", "--change-set-name", change_set.CHANGE_SET_NAME,
                       "--concurrency", str(len(updated)), "--require-approval", "never",
                       *parameter_args(admins, updated)], log, profile)
    if ran.rc:
        raise cdk_cli.failure("deploy --method=prepare-change-set", ran,
                              "the change set of a stack could not be created, so nothing was deployed. A stack that "
                              "imports a value a stack before it has not deployed yet cannot have one: deploy that "
                              "stack first (hyperpod-dpd deploy <stack>), then all")
    changes: dict[str, list[dict[str, Any]]] = {}
    try:
        with aws.aws_errors("reading the replacement check's change sets; cloudformation:DescribeChangeSet"):
            for stack_name in updated:
                changes[stack_name] = change_set.read(cloudformation, stack_name)
    finally:  # also when reading failed: a change set left behind could be executed by mistake
        with aws.aws_errors("deleting the replacement check's change sets; cloudformation:DeleteChangeSet"):
            change_set.discard(cloudformation, updated)
    return changes


def allow_replace(values: list[str] | None, templates: dict[str, dict[str, Any]]) -> list[str]:
    """``--allow-replace`` values, checked: ``all`` or the logical ID of a guarded resource of the assembly."""
    known = list(dict.fromkeys(lid for template in templates.values()
                               for lid, r in (template.get("Resources") or {}).items()
                               if change_set.guard_of(str(r.get("Type", "")), lid) is not None))
    for value in values or []:
        if value != change_set.ALLOW_ALL and value not in known:
            raise UsageError(f"--allow-replace must be {change_set.ALLOW_ALL} or the logical ID of a resource the "
                             f"replacement check guards ({', '.join(known)}), got {value!r}")
    return list(values or [])


def check_replacements(found: list[Any], templates: dict[str, dict[str, Any]], cloudformation: Any,
                        allow: list[str], ids: dict[str, str], selector: str) -> None:
    """Refuse the deploy when ``found`` holds a replacement that ``allow`` does not allow, or one that the stacks
    importing its exports make impossible (even when allowed); otherwise say what each allowed one does."""
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


def refuse_during_deep_health_checks(hyperpod: HyperPodConfig, deployment: str, region: str,
                                     modified: tuple[str, ...]) -> None:
    """The HyperPod stack's change set modifies the HyperPod cluster in place (an ``UpdateCluster``, which HyperPod
    does not carry out as expected while deep health checks run: AWS HyperPod EKS deep health check page): refuse
    while nodes are in them (:func:`hyperpod_dpd.preflight.check_deep_health_checks`). ``hyperpod``: the config's
    section; ``deployment``: its ``name``."""
    from hyperpod_dpd import preflight

    check = preflight.check_deep_health_checks(preflight.make_clients(region), hyperpod, deployment,
                                               modified=modified)
    if check.status == "FAIL":
        raise CommandFailed(f"{check.detail}. Nothing was deployed; fix: {check.fix}")
    if check.status != "PASS":
        print(f"note: {check.name} not checked: {check.detail}" + (f"; fix: {check.fix}" if check.fix else ""),
              file=sys.stderr)


def old_clusters(found: list[Any], cloudformation: Any) -> list[tuple[Any, str | None, str]]:
    """``(replacement, physical ID now, error)`` of each HyperPod cluster ``found`` replaces (a Modify with a
    previous physical ID): ``now`` is ``None`` and ``error`` says why when it could not be read."""
    from botocore.exceptions import BotoCoreError, ClientError

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


def delete_retained_clusters(found: list[Any], cloudformation: Any, region: str, yes: bool) -> None:
    """After a deploy with ``--allow-replace``: delete each HyperPod cluster the update replaced, which
    ``UpdateReplacePolicy: Retain`` left running, by its previous physical ID (its ARN; ``DeleteCluster`` takes
    the name or the ARN), asked once (``--yes`` answers)."""
    for r, now, error in old_clusters(found, cloudformation):
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


def report_retained_clusters(found: list[Any], cloudformation: Any, region: str) -> None:
    """After a failed deploy with ``--allow-replace``: a HyperPod stack updated before another stack failed keeps
    its new cluster, and ``UpdateReplacePolicy: Retain`` the old one running outside the stack. Say which, with the
    command that deletes it (never deleted here: the deploy failed)."""
    for r, now, error in old_clusters(found, cloudformation):
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

