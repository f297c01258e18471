"""Provider-framework entry points of :class:`LambdaEniWaiter`: ``index.on_event`` and ``index.is_complete``.

On Delete, wait until no Lambda network interface (``InterfaceType`` ``lambda``) uses the security group
any more. Lambda functions in a VPC use hyperplane ENIs that Lambda releases only some minutes after the
function is deleted (Lambda developer guide, "Connecting outbound networking to resources in a VPC");
until then the group, its subnets and the VPC cannot be deleted. Other interfaces in the group (the EKS
control plane's, nodes') are not Lambda's to wait for. Create and Update do nothing. Standard library and
boto3 only.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
_BOTO_CONFIG = Config(retries={"mode": "standard", "max_attempts": 6}, connect_timeout=10, read_timeout=30)


def _ec2() -> Any:
    return boto3.client("ec2", region_name=os.environ.get("AWS_REGION"), config=_BOTO_CONFIG)


def on_event(event: dict[str, Any], context: Any = None, *,
             clock: Callable[[], float] = time.time) -> dict[str, Any]:
    props = event.get("ResourceProperties") or {}
    physical_id = event.get("PhysicalResourceId") or f"lambda-eni-waiter-{props['SecurityGroupId']}"
    if event["RequestType"] != "Delete":
        return {"PhysicalResourceId": physical_id}
    return {"PhysicalResourceId": physical_id,
            "Data": {"Deadline": str(clock() + float(props.get("WaitSeconds", 1500)))}}


def interfaces_using(ec2: Any, group_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_network_interfaces").paginate(
            Filters=[{"Name": "group-id", "Values": [group_id]}, {"Name": "interface-type", "Values": ["lambda"]}]):
        found.extend(page.get("NetworkInterfaces", []))
    return found


def is_complete(event: dict[str, Any], context: Any = None, *, ec2: Any = None,
                clock: Callable[[], float] = time.time) -> dict[str, Any]:
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event.get("ResourceProperties") or {}
    group_id = props["SecurityGroupId"]
    deadline = float((event.get("Data") or {}).get("Deadline", clock()))
    try:
        left = interfaces_using(ec2 or _ec2(), group_id)
    except (BotoCoreError, ClientError) as err:
        if clock() < deadline:
            LOG.warning("DescribeNetworkInterfaces failed, retrying on the next poll: %s", err)
            return {"IsComplete": False}
        raise
    if not left:
        LOG.info("no network interface uses %s any more", group_id)
        return {"IsComplete": True}
    names = [f"{n['NetworkInterfaceId']} ({n.get('Status', '?')}, {n.get('Description', '')})" for n in left]
    LOG.info("waiting for %d interface(s): %s", len(left), names)
    if clock() >= deadline:
        raise RuntimeError(
            f"LambdaEniWaiter: {len(left)} Lambda network interface(s) still use security group {group_id}: "
            f"{', '.join(names[:10])}. Lambda releases a deleted function's VPC interfaces on its own, usually "
            "within 20 minutes; run cdk destroy again later (aws ec2 describe-network-interfaces --filters "
            f"Name=group-id,Values={group_id} shows what is left).")
    return {"IsComplete": False}
