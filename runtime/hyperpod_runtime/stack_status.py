"""Whether a custom resource's Delete may clean up: only while the stack holding it is being deleted.

CloudFormation sends a custom resource ``Delete`` not only when the stack is deleted. It also sends one when the
resource leaves the template or is replaced (a changed physical ID, or a changed logical ID: the old one is
deleted in the update's cleanup phase, ``UPDATE_COMPLETE_CLEANUP_IN_PROGRESS``), and when a failed update that
created it rolls back (its new resources are removed in ``UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS``). Sources:
CloudFormation User Guide, "Delete" custom resource request type ("When the template developer deletes the stack
or removes the custom resource from the stack", crpg-ref-requesttypes-delete.html); "Monitor the progress of a
stack update" ("if CloudFormation needs to replace an existing resource, it first creates a new resource and then
deletes the old resource", using-cfn-updating-stacks-monitor-stack.html); AWS Knowledge Center "stack stuck in
UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS or UPDATE_COMPLETE_CLEANUP_IN_PROGRESS" (CloudFormation "is still
removing old resources", repost.aws/knowledge-center/cloudformation-stack-cleanup-stuck); the status names are
the ``StackStatus`` values of the CloudFormation API (DescribeStacks; the tests check them against botocore's
service model). A handler whose Delete destroys what outlives the resource (the endpoint janitor: every inference
endpoint of the cluster; the log-group adopters: live log groups) reads the status of the stack named by the
event's ``StackId`` (``DescribeStacks``) and cleans up only in :data:`CLEANUP_STATUSES`: the stack is being
deleted, or a failed first create is rolling back (the whole stack goes). In any other status it logs what it
skips and succeeds, so the update goes on with nothing deleted.

When ``DescribeStacks`` itself fails, nothing is deleted:

- :class:`StackStatusUnavailable` (throttled, a network error or a 5xx, after botocore's own retries) may clear
  up: the janitor tries again on its next poll until its deadline, then fails naming the error;
- :class:`StackStatusDenied` (access denied) may be IAM's eventual consistency: the handler's policy can be
  seconds old when a failed first create rolls back and sends the Delete (IAM User Guide, "Troubleshoot IAM":
  "Changes that I make are not always immediately visible"). The janitor treats it as transient until half its
  deadline, then fails as for a refusal;
- :class:`StackStatusRefused` (no such stack, an event without ``StackId``; access denied once it counts as
  lasting) will not clear up by itself: the Delete fails with a message saying what to grant and, if this is a
  stack deletion, how to finish it without this cleanup.

Failing loudly is the choice that never deletes live resources during an update and never lets a stack deletion
go on silently without the cleanup (the janitor's leftovers would then block the network stack's deletion). A
failed Delete during an update's cleanup phase does not fail the update: CloudFormation makes three attempts,
then removes the resource from the stack and completes the update with a ``DELETE_FAILED`` event ("Monitor the
progress of a stack update").

Standard library and botocore only: it is bundled into the handlers' assets (``hyperpod_infra.bundle``).
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

LOG = logging.getLogger(__name__)

#: Statuses in which a Delete is the stack going away (User Guide, "Stack status codes"): DELETE_IN_PROGRESS, the
#: stack's deletion (``cdk destroy``); ROLLBACK_IN_PROGRESS, the removal of a stack whose creation failed.
CLEANUP_STATUSES = frozenset({"DELETE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS"})
#: Error codes of a throttled call (CloudFormation answers ``Throttling``); worth trying again later.
THROTTLING_CODES = frozenset({"Throttling", "ThrottlingException", "RequestLimitExceeded"})
#: Error codes of a call IAM denied (CloudFormation answers ``AccessDenied``).
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException"})


class StackStatusUnavailable(Exception):
    """``DescribeStacks`` failed in a way a later try may not (throttled, network, 5xx). Nothing was deleted."""


class StackStatusRefused(RuntimeError):
    """``DescribeStacks`` was refused (access denied, no such stack) or the event names no stack. Nothing was
    deleted."""


class StackStatusDenied(StackStatusRefused):
    """``DescribeStacks`` was denied: lasting, or a policy too new to be visible yet (module docstring). Nothing
    was deleted."""


def stack_status(cloudformation: Any, stack_id: str) -> str:
    """The ``StackStatus`` of ``stack_id`` (``DescribeStacks``); raises :class:`StackStatusUnavailable` or
    :class:`StackStatusRefused`."""
    if not stack_id:
        raise StackStatusRefused("the event carries no StackId, so the stack's status cannot be read")
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_id)["Stacks"]
    except BotoCoreError as err:  # no connection, a timeout (botocore retried them already)
        raise StackStatusUnavailable(f"DescribeStacks {stack_id}: {err}") from err
    except ClientError as err:
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        http_status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = f"DescribeStacks {stack_id}: {code} {error.get('Message', '')}".strip()
        if code in THROTTLING_CODES or http_status >= 500:
            raise StackStatusUnavailable(message) from err
        raise (StackStatusDenied if code in DENIED_CODES else StackStatusRefused)(message) from err
    if not stacks:
        raise StackStatusRefused(f"DescribeStacks {stack_id}: no such stack")
    return str(stacks[0]["StackStatus"])


def may_clean_up(cloudformation: Any, event: dict[str, Any], *, skipped: str) -> bool:
    """True when the Delete ``event`` is part of its stack's deletion (:data:`CLEANUP_STATUSES`). Otherwise logs
    that ``skipped`` (what the cleanup would have deleted) is left as it is, and returns False.

    Raises :class:`StackStatusUnavailable` or :class:`StackStatusRefused` (module docstring); the message of a
    refusal says what helps."""
    stack_id = str(event.get("StackId", ""))
    try:
        status = stack_status(cloudformation, stack_id)
    except StackStatusRefused as err:
        logical_id = event.get("LogicalResourceId", "<logical id>")
        # The same class (a denial stays a denial): the janitor tells a possibly passing one apart. The retain hint
        # is for a stack deletion only: during an update, delete-stack would delete the whole stack.
        raise type(err)(
            f"{err}. Nothing was deleted: {skipped} is deleted only while its stack is being deleted, and the "
            f"stack's status could not be read. Grant cloudformation:DescribeStacks on the stack to the handler's "
            f"role and retry; if this is a stack deletion, it can also be finished keeping what this resource "
            f"would have deleted: aws cloudformation delete-stack --stack-name {stack_id or '<stack>'} "
            f"--retain-resources {logical_id}") from err
    if status in CLEANUP_STATUSES:
        LOG.info("stack %s is %s: cleaning up %s", stack_id, status, skipped)
        return True
    LOG.info("stack %s is %s, not being deleted: this Delete is part of an update (a removed, replaced or "
             "rolled-back resource), so %s is left as it is", stack_id, status, skipped)
    return False
