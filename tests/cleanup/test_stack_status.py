"""The one check both destructive handlers make before a Delete deletes anything (``hyperpod_core.stack_status``).

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

from hyperpod_core.stack_status import (
    CLEANUP_STATUSES,
    StackStatusRefused,
    StackStatusUnavailable,
    may_clean_up,
)


def test_every_status_named_is_one_cloudformation_reports() -> None:
    """A misspelt status would never match: each is a ``StackStatus`` value of the real service model."""
    assert set(CLEANUP_STATUSES) == set(DELETE_STATUSES)
    assert set(DELETE_STATUSES) | set(UPDATE_STATUSES) <= set(stack_statuses())


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
    ("AccessDenied", 403, StackStatusRefused),
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
