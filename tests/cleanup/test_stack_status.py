"""The one check both destructive handlers make before a Delete deletes anything (``hyperpod_runtime.stack_status``).

Statuses come from the CloudFormation service model botocore ships; the stack is moto's, its status set on moto's
backend object (``stack_fakes``); refused and throttled calls come from botocore's Stubber on the same real model.
"""

from __future__ import annotations

import re
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from janitor_fakes import REGION
from stack_fakes import DELETE_STATUSES, UPDATE_STATUSES, set_stack_status, stack_statuses

from hyperpod_runtime.stack_status import (
    CLEANUP_STATUSES,
    StackStatusDenied,
    StackStatusRefused,
    StackStatusUnavailable,
    may_clean_up,
)

#: What CloudFormation removes in a status in which it sends a custom resource Delete, as AWS describes each status
#: (User Guide, "Stack status codes": https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/
#: view-stack-events.html#cfn-console-view-stack-data-resources-status-codes). The whole stack: a cleanup may run.
STACK_REMOVED = {
    "DELETE_IN_PROGRESS": "Ongoing removal of one or more stacks",
    "ROLLBACK_IN_PROGRESS": "removal ... after a failed stack creation",
}
#: Resources of a stack that stays: the Delete belongs to an update and must delete nothing live.
RESOURCES_REMOVED_IN_AN_UPDATE = {
    "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS": "removal of old resources ... after a successful stack update",
    "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS": "removal of new resources ... after a failed stack update",
}


def test_the_cleanup_statuses_are_the_ones_aws_describes_as_a_stack_going_away() -> None:
    """Checked against AWS's descriptions (above) and the real service model's ``StackStatus`` enum (a misspelt
    status would never match), not against a copy of the project's own constant."""
    assert set(STACK_REMOVED) | set(RESOURCES_REMOVED_IN_AN_UPDATE) <= set(stack_statuses())
    assert set(CLEANUP_STATUSES) == set(STACK_REMOVED)
    assert set(UPDATE_STATUSES) <= set(stack_statuses())


def test_only_a_stack_going_away_allows_a_cleanup(aws: dict[str, Any]) -> None:
    """Every status CloudFormation can report but DELETE_IN_PROGRESS and ROLLBACK_IN_PROGRESS (the rollback of a
    failed first create) means the Delete is part of an update, or worse: skip."""
    event = {"StackId": aws["stack_id"], "LogicalResourceId": "X"}
    allowed = set()
    for status in stack_statuses():
        set_stack_status(aws["stack_id"], status)
        if may_clean_up(aws["cloudformation"], event, skipped="x"):
            allowed.add(status)
    assert allowed == set(DELETE_STATUSES)


@pytest.mark.parametrize(("code", "http_status", "error"), [
    ("Throttling", 400, StackStatusUnavailable),
    ("InternalFailure", 500, StackStatusUnavailable),
    ("AccessDenied", 403, StackStatusDenied),  # a refusal the janitor may retry (IAM eventual consistency)
])
def test_a_failed_status_read_is_transient_or_refused(aws: dict[str, Any], code: str, http_status: int,
                                                      error: type[Exception]) -> None:
    client = boto3.client("cloudformation", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_client_error("describe_stacks", service_error_code=code, http_status_code=http_status)
    with stubber, pytest.raises(error, match=f"DescribeStacks {re.escape(aws['stack_id'])}: {code}"):
        may_clean_up(client, {"StackId": aws["stack_id"]}, skipped="x")


def test_a_stack_that_does_not_exist_or_an_event_without_a_stack_id_is_refused(aws: dict[str, Any]) -> None:
    missing = aws["stack_id"].rsplit("/", 1)[0] + "/00000000-0000-0000-0000-000000000000"
    with pytest.raises(StackStatusRefused, match=r"ValidationError Stack with id .* does not exist"):
        may_clean_up(aws["cloudformation"], {"StackId": missing}, skipped="x")
    with pytest.raises(StackStatusRefused, match="the event carries no StackId"):
        may_clean_up(aws["cloudformation"], {}, skipped="x")
