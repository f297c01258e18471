"""What a deploy would replace, read from CloudFormation change sets before anything is executed.

Three resources must never be replaced by accident: the HyperPod cluster (its replacement is created beside the
old one, which ``UpdateReplacePolicy: Retain`` leaves running and billed outside any stack), the EKS cluster
(deleted after its replacement is created, with every node and workload on it) and the model bucket (retained
with the weights; the new one is empty). ``hyperpod-dpd deploy`` has the pinned CDK CLI create a change set of
every stack that holds one of them and already exists (``cdk deploy --method=prepare-change-set
--change-set-name NAME``: creates the change set, executes nothing), reads it here (``DescribeChangeSet``) and
refuses when :func:`replacements` finds any, unless ``--allow-replace``.

The decision reads what CloudFormation documents for each change (API reference, ``ResourceChange``:
https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_ResourceChange.html): ``Replacement`` is
``True`` (the resource will be replaced), ``Conditional`` (it may be: the property's new value is only known
during the update) or ``False``; ``Details[].Target`` (``ResourceTargetDefinition``) names each changed
``Attribute``/``Name`` and whether it ``RequiresRecreation`` (``Never``, ``Conditionally``, ``Always``).
A first deploy needs no check: a stack that does not exist yet has nothing to replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The name of the change sets the replacement check creates (and deletes after reading); the CDK CLI deletes an
#: earlier change set of the same name before it creates one.
CHANGE_SET_NAME = "hyperpod-dpd-replacement-check"

#: ``ResourceChange.Replacement`` values that refuse the deploy (the API reference's ``True | False |
#: Conditional``).
REPLACING = ("True", "Conditional")
#: ``ResourceTargetDefinition.RequiresRecreation`` values that name the property causing a replacement.
RECREATING = ("Always", "Conditionally")


@dataclass(frozen=True, kw_only=True)
class Guarded:
    """One resource a deploy must not replace without ``--allow-replace``."""

    resource_type: str
    logical_id: str | None
    """Its logical ID in the synthesized template; ``None``: every resource of the type."""
    what: str
    afterwards: str
    """What CloudFormation does with the old resource after a replacement (its ``UpdateReplacePolicy``)."""


HYPERPOD_CLUSTER = Guarded(
    resource_type="AWS::SageMaker::Cluster", logical_id="HyperPodCluster", what="the HyperPod cluster",
    afterwards="retained (UpdateReplacePolicy: Retain): it keeps running, and billing, outside the stack")
#: Logical IDs as pinned by tests/infra/test_replacement_guard.py (``HyperPodCluster``: override_logical_id in
#: hyperpod_constructs.hyperpod_cluster) and tests/platform/test_platform_stack.py (the model bucket's).
GUARDED = (
    HYPERPOD_CLUSTER,
    Guarded(resource_type="AWS::EKS::Cluster", logical_id=None, what="the EKS cluster",
            afterwards="deleted by CloudFormation once the new one exists, with every node and workload on it"),
    Guarded(resource_type="AWS::S3::Bucket", logical_id="ModelBucket24FA8CA2", what="the model bucket",
            afterwards="retained with its data (UpdateReplacePolicy: Retain); the new bucket is empty"),
)


def guard_of(resource_type: str, logical_id: str) -> Guarded | None:
    for g in GUARDED:
        if g.resource_type == resource_type and g.logical_id in (None, logical_id):
            return g
    return None


@dataclass(frozen=True, kw_only=True)
class Replacement:
    """A guarded resource the change set of ``stack`` replaces (or may replace)."""

    stack: str
    logical_id: str
    physical_id: str | None
    """The resource's physical ID now, i.e. the old resource's (``None`` when CloudFormation gives none)."""
    replacement: str
    """``True`` or ``Conditional``."""
    properties: tuple[str, ...]
    """The changed properties whose change requires recreation (``Always`` or ``Conditionally``)."""
    guard: Guarded

    def describe(self) -> str:
        changed = ", ".join(self.properties) or "no property named by CloudFormation"
        return (f"{self.stack}: {self.guard.what} {self.logical_id} ({self.guard.resource_type}"
                + (f" {self.physical_id}" if self.physical_id else "")
                + f") Replacement {self.replacement} (property {changed})")


def replacements(stack: str, changes: Iterable[Mapping[str, Any]]) -> list[Replacement]:
    """The guarded resources that ``changes`` (``DescribeChangeSet``'s ``Changes`` of ``stack``) replace or may
    replace, in the change set's order. Pure: reads nothing else."""
    found: list[Replacement] = []
    for change in changes:
        rc = change.get("ResourceChange") or {}
        guard = guard_of(str(rc.get("ResourceType", "")), str(rc.get("LogicalResourceId", "")))
        if guard is None or rc.get("Replacement") not in REPLACING:  # documented for the Modify action
            continue
        names: list[str] = []
        for detail in rc.get("Details") or []:
            target = detail.get("Target") or {}
            name = target.get("Name")
            if (target.get("Attribute") == "Properties" and target.get("RequiresRecreation") in RECREATING
                    and name and name not in names):
                names.append(str(name))
        found.append(Replacement(stack=stack, logical_id=str(rc["LogicalResourceId"]),
                                 physical_id=rc.get("PhysicalResourceId") or None,
                                 replacement=str(rc["Replacement"]), properties=tuple(names), guard=guard))
    return found


def refusal(found: list[Replacement]) -> str:
    """One line naming every replacement found, and the way to go ahead on purpose."""
    return ("deploy would replace " + "; ".join(r.describe() for r in found)
            + ". Nothing was deployed. A create-only setting changed (docs/cluster.md, 'Changing create-only "
              "settings'): undo it, or pass --allow-replace to replace on purpose (the old HyperPod cluster is then "
              "deleted after the update, asked once)")


def guarded_stacks(templates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The stack names, of ``{stack name: template}``, whose templates hold a guarded resource."""
    return [stack for stack, template in templates.items()
            if any(guard_of(str(r.get("Type", "")), logical_id) is not None
                   for logical_id, r in (template.get("Resources") or {}).items())]


#: Statuses of a stack that the CDK CLI creates anew instead of updating: it deletes a stack whose first create
#: failed (``ROLLBACK_COMPLETE``, ``ROLLBACK_FAILED``) and creates one held ``REVIEW_IN_PROGRESS`` (a create change
#: set never executed) with a ``CREATE`` change set (the pinned aws-cdk 2.1148 CLI's ``deployStack``,
#: node_modules/aws-cdk/lib/index.js: ``isCreationFailure``, and ``update`` only when not ``REVIEW_IN_PROGRESS``).
NOT_UPDATED = frozenset({"ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "REVIEW_IN_PROGRESS", "DELETE_COMPLETE",
                         "DELETE_IN_PROGRESS"})


def deployed(cloudformation: Any, stack: str) -> dict[str, Any] | None:
    """``DescribeStacks``' description of ``stack`` when a deploy updates it; ``None`` when the deploy creates it
    (no such stack: CloudFormation answers ``ValidationError`` "Stack with id NAME does not exist"; or a status in
    :data:`NOT_UPDATED`)."""
    from botocore.exceptions import ClientError

    try:
        found = cloudformation.describe_stacks(StackName=stack).get("Stacks") or []
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            return None
        raise
    if not found or found[0].get("StackStatus") in NOT_UPDATED:
        return None
    return dict(found[0])


def parameter(description: Mapping[str, Any] | None, key: str) -> str | None:
    """The value of parameter ``key`` of a deployed stack (``DescribeStacks`` ``Parameters``), or ``None``."""
    for p in (description or {}).get("Parameters") or []:
        if p.get("ParameterKey") == key:
            return str(p.get("ResolvedValue") or p.get("ParameterValue") or "") or None
    return None


def read(cloudformation: Any, stack: str, name: str = CHANGE_SET_NAME) -> list[dict[str, Any]]:
    """Every ``Changes`` entry of change set ``name`` of ``stack`` (``DescribeChangeSet``, all pages)."""
    changes: list[dict[str, Any]] = []
    for page in cloudformation.get_paginator("describe_change_set").paginate(StackName=stack, ChangeSetName=name):
        changes += page.get("Changes") or []
    return changes


def discard(cloudformation: Any, stacks: Iterable[str], name: str = CHANGE_SET_NAME) -> None:
    """Delete the check's change sets (``DeleteChangeSet``): a deploy that goes ahead creates its own, and a
    refused one leaves none waiting to be executed by mistake."""
    for stack in stacks:
        cloudformation.delete_change_set(StackName=stack, ChangeSetName=name)
