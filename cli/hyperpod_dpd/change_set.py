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
A ``Remove`` of the HyperPod or EKS cluster (its logical ID changed, or it left the template) deletes it under its
``DeletionPolicy: Delete`` (User Guide, "DeletionPolicy attribute": it "also applies to stack update operations that
lead to resources being deleted from stacks"), so it counts as ``Replacement: True``. Each changed property is
named with the ``ChangeSource`` and ``CausingEntity`` of its ``ResourceChangeDetail`` (API reference,
API_ResourceChangeDetail.html: e.g. ``DirectModification``, or ``ResourceAttribute`` and the ``Fn::GetAtt`` that
triggered it), so that a ``Conditional`` that cannot replace anything can be told from one that can.

CloudFormation cannot replace a resource whose attribute feeds an export that another stack imports: "After
another stack imports an output value, you can't delete the stack that is exporting the output value or modify the
exported output value. All the imports must be removed before you can delete the exporting stack or modify the
output value" (User Guide, ``Fn::ImportValue``). In this app the Platform stack imports the HyperPod cluster's ARN,
and the HyperPod, Platform and ObservabilityAddon stacks import the EKS cluster's ARN and name: such an update
fails, after the new cluster was created, and rolls back. :func:`importers` finds the importing stacks in the
synthesized templates (``Outputs[].Export.Name``, ``Fn::ImportValue``: offline, no IAM needed);
:func:`held_by_imports` says how to replace anyway (destroy them first, replace, deploy them again).
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


#: The value of ``--allow-replace`` that allows every guarded resource to be replaced.
ALLOW_ALL = "all"
#: ``ResourceChange.Action`` of a resource that leaves the stack (deleted under its ``DeletionPolicy``).
REMOVE = "Remove"


@dataclass(frozen=True, kw_only=True)
class Guarded:
    """One resource a deploy must not replace without ``--allow-replace``."""

    resource_type: str
    logical_id: str | None
    """Its logical ID in the synthesized template; ``None``: every resource of the type."""
    what: str
    afterwards: str
    """What CloudFormation does with the old resource after a replacement (its ``UpdateReplacePolicy``)."""
    removal_deletes: bool
    """A ``Remove`` deletes it (``DeletionPolicy: Delete``), so a Remove is guarded like a replacement."""


HYPERPOD_CLUSTER = Guarded(
    resource_type="AWS::SageMaker::Cluster", logical_id="HyperPodCluster", what="the HyperPod cluster",
    afterwards="retained (UpdateReplacePolicy: Retain): it keeps running, and billing, outside the stack",
    removal_deletes=True)
#: Logical IDs as pinned by tests/infra/test_replacement_guard.py (``HyperPodCluster``: override_logical_id in
#: hyperpod_constructs.hyperpod_cluster) and tests/platform/test_platform_stack.py (the model bucket's).
GUARDED = (
    HYPERPOD_CLUSTER,
    # No UpdateReplacePolicy: CloudFormation deletes the old cluster in the update's cleanup phase. In this app
    # that can only happen once the stacks that import its exports are gone (held_by_imports).
    Guarded(resource_type="AWS::EKS::Cluster", logical_id=None, what="the EKS cluster",
            afterwards="deleted by CloudFormation after the update (no UpdateReplacePolicy), with every node and "
                       "workload on it", removal_deletes=True),
    # A Remove keeps it (DeletionPolicy: Retain unless model_bucket.delete_on_destroy, which asked for deletion):
    # model_bucket.existing_name removes it from the template on purpose.
    Guarded(resource_type="AWS::S3::Bucket", logical_id="ModelBucket24FA8CA2", what="the model bucket",
            afterwards="retained with its data (UpdateReplacePolicy: Retain); the new bucket is empty",
            removal_deletes=False),
)


def guard_of(resource_type: str, logical_id: str) -> Guarded | None:
    for g in GUARDED:
        if g.resource_type == resource_type and g.logical_id in (None, logical_id):
            return g
    return None


@dataclass(frozen=True, kw_only=True)
class Replacement:
    """A guarded resource the change set of ``stack`` replaces (or may replace), or removes."""

    stack: str
    logical_id: str
    physical_id: str | None
    """The resource's physical ID now, i.e. the old resource's (``None`` when CloudFormation gives none)."""
    replacement: str
    """``True`` or ``Conditional`` (``True`` for a Remove)."""
    properties: tuple[str, ...]
    """The changed properties whose change requires recreation (``Always`` or ``Conditionally``), each with what
    changed it: ``ClusterName: DirectModification``, ``VpcConfig: ResourceAttribute Sg.GroupId``."""
    guard: Guarded
    action: str = "Modify"
    """``Modify`` (a replacement) or ``Remove`` (the resource leaves the stack and is deleted)."""

    def short(self) -> str:
        """``demo-hyperpod HyperPodCluster (Replacement True, property ClusterName: DirectModification)``."""
        what = ("Action Remove" if self.action == REMOVE else
                f"Replacement {self.replacement}" + "".join(f", property {p}" for p in self.properties))
        return f"{self.stack} {self.logical_id} ({what})"

    def describe(self) -> str:
        what = (f"{self.stack}: {self.guard.what} {self.logical_id} ({self.guard.resource_type}"
                + (f" {self.physical_id}" if self.physical_id else "") + ")")
        if self.action == REMOVE:
            return f"{what} Action Remove (DeletionPolicy Delete: the resource is deleted; its logical ID changed, " \
                   "or it left the template)"
        changed = ", ".join(f"property {p}" for p in self.properties) or "no property named by CloudFormation"
        return f"{what} Replacement {self.replacement} ({changed})"


def _cause(detail: Mapping[str, Any]) -> str:
    """What triggered a change (``ChangeSource``, and ``CausingEntity`` unless a DirectModification)."""
    return " ".join(str(x) for x in (detail.get("ChangeSource"), detail.get("CausingEntity")) if x)


def replacements(stack: str, changes: Iterable[Mapping[str, Any]]) -> list[Replacement]:
    """The guarded resources that ``changes`` (``DescribeChangeSet``'s ``Changes`` of ``stack``) replace or may
    replace, or remove when that deletes them, in the change set's order. Pure: reads nothing else."""
    found: list[Replacement] = []
    for change in changes:
        rc = change.get("ResourceChange") or {}
        guard = guard_of(str(rc.get("ResourceType", "")), str(rc.get("LogicalResourceId", "")))
        if guard is None:
            continue
        logical_id, physical_id = str(rc["LogicalResourceId"]), rc.get("PhysicalResourceId") or None
        if rc.get("Action") == REMOVE:  # no Replacement field: it is documented for the Modify action only
            if guard.removal_deletes:
                found.append(Replacement(stack=stack, logical_id=logical_id, physical_id=physical_id, guard=guard,
                                         replacement="True", properties=(), action=REMOVE))
            continue
        if rc.get("Replacement") not in REPLACING:
            continue
        names: list[str] = []
        for detail in rc.get("Details") or []:
            target = detail.get("Target") or {}
            name = target.get("Name")
            if target.get("Attribute") == "Properties" and target.get("RequiresRecreation") in RECREATING and name:
                named = f"{name}: {_cause(detail)}" if _cause(detail) else str(name)
                if named not in names:
                    names.append(named)
        found.append(Replacement(stack=stack, logical_id=logical_id, physical_id=physical_id, guard=guard,
                                 replacement=str(rc["Replacement"]), properties=tuple(names)))
    return found


def modified_properties(changes: Iterable[Mapping[str, Any]], logical_id: str) -> tuple[str, ...] | None:
    """The properties of ``logical_id`` that ``changes`` modify in place or may (``Modify`` without ``Replacement:
    True``), or ``None`` when they do not modify it."""
    for change in changes:
        rc = change.get("ResourceChange") or {}
        if rc.get("LogicalResourceId") == logical_id and rc.get("Action") == "Modify" \
                and rc.get("Replacement") != "True":
            targets = [d.get("Target") or {} for d in rc.get("Details") or []]
            return tuple(dict.fromkeys(str(t["Name"]) for t in targets
                                       if t.get("Attribute") == "Properties" and t.get("Name")))
    return None


def refusal(found: list[Replacement]) -> str:
    """One line naming every replacement found, and the way to go ahead on purpose."""
    ids = " ".join(f"--allow-replace {lid}" for lid in dict.fromkeys(r.logical_id for r in found))
    return ("deploy would replace " + "; ".join(r.describe() for r in found)
            + ". Nothing was deployed. A create-only setting changed (docs/cluster.md, 'Changing create-only "
              f"settings'): undo it, or pass {ids} (the old HyperPod cluster is then deleted, asked once)")


def allowed(r: Replacement, allow: Iterable[str]) -> bool:
    """Whether ``--allow-replace`` values ``allow`` let ``r`` go ahead: ``all`` or its logical ID."""
    return any(a in (ALLOW_ALL, r.logical_id) for a in allow)


def _references(node: Any, logical_id: str) -> bool:
    """Whether ``node`` (a template value) refers to ``logical_id`` (``Ref``, ``Fn::GetAtt`` in either form)."""
    if isinstance(node, Mapping):
        if node.get("Ref") == logical_id:
            return True
        att = node.get("Fn::GetAtt")
        if (isinstance(att, list) and att and att[0] == logical_id) or (
                isinstance(att, str) and att.split(".", 1)[0] == logical_id):
            return True
        return any(_references(v, logical_id) for v in node.values())
    if isinstance(node, list):
        return any(_references(v, logical_id) for v in node)
    return False


def _imports(node: Any) -> set[str]:
    """Every export name ``node`` imports (``Fn::ImportValue`` of a literal name, as aws-cdk-lib writes them)."""
    if isinstance(node, Mapping):
        found = {node["Fn::ImportValue"]} if isinstance(node.get("Fn::ImportValue"), str) else set()
        return found.union(*(_imports(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_imports(v) for v in node))
    return set()


def importers(templates: Mapping[str, Mapping[str, Any]], stack: str, logical_id: str) -> list[str]:
    """The stacks of ``templates`` (``{stack name: template}``, the whole assembly) that import an export of
    ``stack`` whose value refers to ``logical_id``, in ``templates`` order. Export names are literal strings:
    CloudFormation allows no ``Ref`` or ``GetAtt`` of a resource in them (User Guide, ``Fn::ImportValue``)."""
    outputs = (templates.get(stack) or {}).get("Outputs") or {}
    exported = {str(o["Export"]["Name"]) for o in outputs.values()
                if isinstance((o.get("Export") or {}).get("Name"), str) and _references(o.get("Value"), logical_id)}
    return [name for name, template in templates.items() if name != stack and exported & _imports(template)]


def importers_of(templates: Mapping[str, Mapping[str, Any]], r: Replacement) -> list[str]:
    """:func:`importers` of what ``r`` replaces. A Remove's resource is no longer in the template: when its logical
    ID changed, the resource of the same type that takes its place exports what it did (aws-cdk-lib names an export
    after the logical ID, so the name changes and the old export is removed), and the same stacks import it."""
    if r.action != REMOVE:
        return importers(templates, r.stack, r.logical_id)
    resources = (templates.get(r.stack) or {}).get("Resources") or {}
    same_type = [lid for lid, res in resources.items() if res.get("Type") == r.guard.resource_type]
    return list(dict.fromkeys(name for lid in same_type for name in importers(templates, r.stack, lid)))


def held_by_imports(held: Mapping[Replacement, list[str]], ids: Mapping[str, str], selector: str) -> str:
    """One line (under the 500 characters an error line keeps): the replacements ``held`` (each with the deployed
    stacks that import its exports) cannot happen while those stacks exist, and the procedure. ``ids``: ``{stack
    name: construct ID}``."""
    stacks = list(dict.fromkeys(s for names in held.values() for s in names))
    allow = " ".join(f"--allow-replace {lid}" for lid in dict.fromkeys(r.logical_id for r in held))
    return ("deploy cannot replace " + "; ".join(f"{r.short()} while {', '.join(names)} import its exports"
                                                 for r, names in held.items())
            + ": CloudFormation refuses to modify an exported value in use (Fn::ImportValue), also with "
              "--allow-replace. Nothing was deployed. Undo the create-only setting (docs/cluster.md), or: "
              f"hyperpod-dpd destroy {' '.join(ids.get(s, s) for s in stacks)} {selector}, then hyperpod-dpd deploy "
              f"{selector} {allow}")


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


def exists(cloudformation: Any, stack: str) -> bool:
    """Whether ``stack`` exists in any status (``DescribeStacks``; a stack that does not exist answers
    ``ValidationError`` "Stack with id NAME does not exist"). An importing stack counts while it exists at all: only
    its deletion removes its imports [I: whether a stack in ROLLBACK_COMPLETE still holds them is not documented]."""
    from botocore.exceptions import ClientError

    try:
        found = cloudformation.describe_stacks(StackName=stack).get("Stacks") or []
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            return False
        raise
    return bool(found) and found[0].get("StackStatus") != "DELETE_COMPLETE"


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
