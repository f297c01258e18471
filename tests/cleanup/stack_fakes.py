"""A CloudFormation stack in a chosen status, in moto, for the handlers whose Delete acts only while their stack
is being deleted (``hyperpod_runtime.stack_status``).

moto's CloudFormation creates a stack in ``CREATE_COMPLETE`` and has no API that holds one in an ``*_IN_PROGRESS``
status, so :func:`set_stack_status` sets the status on moto's backend object (``moto.cloudformation.models.Stack.
status``); ``DescribeStacks`` returns it as ``StackStatus`` (moto 5.2.5). The statuses themselves come from the
real CloudFormation service model botocore ships (:func:`stack_statuses`).
"""

from __future__ import annotations

import json
from typing import Any

#: Any resource moto creates; the handlers only read the stack's status.
TEMPLATE = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
#: What CloudFormation's stack is in while it sends a Delete that is part of an update: a replaced or removed
#: resource is deleted after the update, in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS, a failed update's new resources in
#: UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS (the sources are in ``hyperpod_runtime.stack_status``).
UPDATE_STATUSES = ("UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
                   "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
#: The stack is going away: being deleted, or a failed first create rolling back (User Guide, "Stack status codes").
DELETE_STATUSES = ("DELETE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS")


def stack_statuses() -> tuple[str, ...]:
    """Every ``StackStatus`` value of the CloudFormation service model botocore ships (the API's own list)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("cloudformation")
    return tuple(model.shape_for("StackStatus").enum)


def set_stack_status(stack_id: str, status: str) -> None:
    """Put moto's stack ``stack_id`` in ``status`` (module docstring: moto has no API for it)."""
    from moto.cloudformation.models import cloudformation_backends

    _, _, _, region, account, _ = stack_id.split(":", 5)
    cloudformation_backends[account][region].stacks[stack_id].status = status


def stack_in_status(cloudformation: Any, name: str, status: str) -> str:
    """A new moto stack ``name`` in ``status``; its ``StackId``."""
    stack_id = str(cloudformation.create_stack(StackName=name, TemplateBody=TEMPLATE)["StackId"])
    set_stack_status(stack_id, status)
    return stack_id
