"""Provider-framework entry point of :class:`AdoptedLogGroups`: ``index.on_event``.

A log group that a service creates by itself under a fixed name (EKS's ``/aws/eks/<cluster>/cluster``, which
EKS's service-linked role re-creates from late deliveries after the cluster is gone; HyperPod's
``/aws/sagemaker/Clusters/<name>/<id>``) cannot be an ``AWS::Logs::LogGroup``: the next create of the same
name fails "already exists". This resource adopts it instead.

Properties (strings): ``LogGroupName`` and ``RetentionInDays``: on Create and Update create the group if it is
missing (``ResourceAlreadyExistsException`` is the adoption) and set its retention. ``DeleteOnDelete``
(``"true"``): delete it on Delete (missing is fine). ``DeletePrefix`` instead of a name: nothing on Create and
Update, and on Delete every group whose name starts with the prefix. ``LegacyLogicalId`` with
``LegacyRetained`` (``"true"``/``"false"``): the upgrade guard, see :func:`check_legacy`.

The physical ID is the group name (``prefix:<prefix>`` for a prefix). A Delete acts only when its physical ID
is the one its properties give (a renamed group's old resource gets its old properties; the Provider
framework answers a Delete that follows a failed Create itself), and only while the stack is being deleted (or a
failed first create rolls back): it reads the stack's status from the event's ``StackId`` first
(``hyperpod_runtime.stack_status``, bundled beside this file). CloudFormation also sends Delete during an update (a
resource removed or replaced, its logical ID changed, a failed update that added it rolled back); the live group
then stays, the skip is logged and the Delete succeeds. A status that cannot be read (after botocore's retries)
deletes nothing and fails the Delete with a message saying what helps. Standard library and boto3 only, plus
that bundled module.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_runtime.stack_status import may_clean_up

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
_BOTO_CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=10, read_timeout=30)
PREFIX_ID = "prefix:"


def _client(service: str) -> Any:
    return boto3.client(service, region_name=os.environ.get("AWS_REGION"), config=_BOTO_CONFIG)


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _unless(code: str, call: Callable[[], object]) -> bool:
    """``call()``; ``False`` instead of raising when AWS answers ``code`` (the state asked for is there)."""
    try:
        call()
        return True
    except ClientError as err:
        if _code(err) != code:
            raise
        return False


def adopt(logs: Any, name: str, retention_days: int) -> None:
    """Create ``name`` unless it exists, then set its retention (both idempotent)."""
    created = _unless("ResourceAlreadyExistsException", lambda: logs.create_log_group(logGroupName=name))
    LOG.info("created %s" if created else "adopted %s, which already existed", name)
    logs.put_retention_policy(logGroupName=name, retentionInDays=retention_days)


def delete(logs: Any, name: str) -> None:
    deleted = _unless("ResourceNotFoundException", lambda: logs.delete_log_group(logGroupName=name))
    LOG.info("deleted %s" if deleted else "%s was already gone", name)


def delete_prefix(logs: Any, prefix: str) -> list[str]:
    names = [g["logGroupName"] for page in logs.get_paginator("describe_log_groups").paginate(
        logGroupNamePrefix=prefix) for g in page.get("logGroups", [])]
    for name in names:
        delete(logs, name)
    return names


def check_legacy(cloudformation: Any, stack_id: str, logical_id: str, retained: bool, name: str,
                 was_retained: bool = False) -> None:
    """Refuse the two upgrade mistakes before anything changes (the update then rolls back untouched).

    A stack deployed before this resource existed holds the group as the ``AWS::Logs::LogGroup``
    ``logical_id`` with ``DeletionPolicy: Delete``. An update that removes it makes CloudFormation delete the
    live group under the *deployed* template's policy (CloudFormation User Guide, DeletionPolicy attribute:
    it "applies to stack update operations that lead to resources being deleted from stacks"). The template
    keeps that resource, with ``Retain``, only while the parameter says ``retain``; so: the stack still holds
    it and ``retained`` is false -> refuse, unless the deployed template already retains it (``was_retained``:
    the previous properties said ``retain``; CloudFormation removes the resource only in the cleanup phase after
    this update, under that Retain, so the live group stays); ``retained`` is true but the stack never held it ->
    refuse too (its create would fail on the existing group)."""
    try:
        cloudformation.describe_stack_resource(StackName=stack_id, LogicalResourceId=logical_id)
        held = True
    except ClientError as err:
        if _code(err) != "ValidationError":  # "Resource ... does not exist for stack ..."
            raise
        held = False
    if held and not retained and not was_retained:
        raise RuntimeError(
            f"AdoptedLogGroups: this stack still holds {name} as the log group resource {logical_id} of an "
            "earlier release, with DeletionPolicy Delete; this update would delete the live group. Deploy "
            "this stack once with --parameters <stack>:LegacyControlPlaneLogGroup=retain (docs/deploy.md, "
            "\"Upgrade\"), which keeps it with DeletionPolicy Retain; nothing was changed.")
    if retained and not held:
        raise RuntimeError(
            f"AdoptedLogGroups: LegacyControlPlaneLogGroup=retain is only for a stack that holds {logical_id} "
            f"from an earlier release; this one does not (its create would fail on the existing {name}). "
            "Deploy with LegacyControlPlaneLogGroup=none; nothing was changed.")


def on_event(event: dict[str, Any], context: Any = None, *, logs: Any = None,
             cloudformation: Any = None) -> dict[str, Any]:
    props = event.get("ResourceProperties") or {}
    name, prefix = props.get("LogGroupName"), props.get("DeletePrefix")
    physical_id = name if name else PREFIX_ID + str(prefix)
    request = event["RequestType"]
    logs = logs or _client("logs")
    if request in ("Create", "Update"):
        if props.get("LegacyLogicalId"):
            old = (event.get("OldResourceProperties") or {}) if request == "Update" else {}
            check_legacy(cloudformation or _client("cloudformation"), event["StackId"], props["LegacyLogicalId"],
                         props.get("LegacyRetained") == "true", str(name),
                         was_retained=old.get("LegacyRetained") == "true")
        if name:
            adopt(logs, name, int(props["RetentionInDays"]))
        return {"PhysicalResourceId": physical_id}
    current = event.get("PhysicalResourceId")
    if current != physical_id:
        return {"PhysicalResourceId": current or physical_id}
    # What this Delete would delete: only on the stack's deletion (module docstring).
    skipped = (f"log group {name}" if name and props.get("DeleteOnDelete") == "true"
               else f"every log group under {prefix}" if prefix and not name else None)
    if skipped is not None and may_clean_up(cloudformation or _client("cloudformation"), event, skipped=skipped):
        if name:
            delete(logs, str(name))
        else:
            LOG.info("deleted %s", delete_prefix(logs, str(prefix)))
    return {"PhysicalResourceId": current}
