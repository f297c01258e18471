"""Provider-framework entry points of :class:`LambdaEniWaiter` and :class:`SubnetEniWaiter`: ``index.on_event``
and ``index.is_complete``.

``SecurityGroupId`` alone (LambdaEniWaiter): on Delete, wait until no Lambda network interface
(``InterfaceType`` ``lambda``) uses the security group any more. Lambda functions in a VPC use hyperplane ENIs
that Lambda releases only some minutes after the function is deleted (Lambda developer guide, "Connecting
outbound networking to resources in a VPC"); until then the group, its subnets and the VPC cannot be deleted.
Other interfaces in the group (the EKS control plane's, nodes') are not Lambda's to wait for.

``SubnetId`` (SubnetEniWaiter, optionally with ``SecurityGroupId``): on Delete, wait until no interface of any
requester is in the subnet or uses the group: HyperPod's node and EFA interfaces, the VPC CNI's, a load
balancer's. A detached (``available``) interface that no AWS service manages (``RequesterManaged`` false: the
VPC CNI's, left by a node that died before its agent cleaned up) never goes by itself and is deleted; a
requester-managed one is its service's to release, so it is waited for.

Create and Update do nothing. Standard library and boto3 only.
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
    physical_id = event.get("PhysicalResourceId") or (
        f"subnet-eni-waiter-{props['SubnetId']}" if props.get("SubnetId")
        else f"lambda-eni-waiter-{props['SecurityGroupId']}")
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


def interfaces_in(ec2: Any, subnet_id: str, group_id: str | None) -> list[dict[str, Any]]:
    """Every interface in the subnet or (when given) using the group, once each."""
    found: dict[str, dict[str, Any]] = {}
    queries = [[{"Name": "subnet-id", "Values": [subnet_id]}]]
    if group_id:
        queries.append([{"Name": "group-id", "Values": [group_id]}])
    for filters in queries:
        for page in ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters):
            found.update({n["NetworkInterfaceId"]: n for n in page.get("NetworkInterfaces", [])})
    return list(found.values())


def _delete_detached(ec2: Any, interfaces: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete the detached interfaces no service manages; the ones left to wait for."""
    left = []
    for n in interfaces:
        if n.get("Status") == "available" and not n.get("RequesterManaged"):
            try:
                ec2.delete_network_interface(NetworkInterfaceId=n["NetworkInterfaceId"])
                LOG.info("deleted detached interface %s (%s)", n["NetworkInterfaceId"], n.get("Description", ""))
                continue
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") == "InvalidNetworkInterfaceID.NotFound":
                    continue
                LOG.warning("could not delete %s yet: %s", n["NetworkInterfaceId"], err)
        left.append(n)
    return left


def is_complete(event: dict[str, Any], context: Any = None, *, ec2: Any = None,
                clock: Callable[[], float] = time.time) -> dict[str, Any]:
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event.get("ResourceProperties") or {}
    deadline = float((event.get("Data") or {}).get("Deadline", clock()))
    client = ec2 or _ec2()
    if props.get("SubnetId"):
        subnet_id, group_id = props["SubnetId"], props.get("SecurityGroupId")
        return _poll(lambda: _delete_detached(client, interfaces_in(client, subnet_id, group_id)), deadline, clock,
                     done=f"no network interface is in {subnet_id} any more", with_type=True, failure=lambda n, names: (
                         f"SubnetEniWaiter: {n} network interface(s) are still in subnet {subnet_id}"
                         f"{' or use ' + group_id if group_id else ''}: {names}. The services that own them (HyperPod, "
                         "Elastic Load Balancing) release them on their own; run cdk destroy again later (aws ec2 "
                         f"describe-network-interfaces --filters Name=subnet-id,Values={subnet_id} shows what is "
                         "left)."))
    group_id = props["SecurityGroupId"]
    return _poll(lambda: interfaces_using(client, group_id), deadline, clock,
                 done=f"no network interface uses {group_id} any more", with_type=False, failure=lambda n, names: (
                     f"LambdaEniWaiter: {n} Lambda network interface(s) still use security group {group_id}: "
                     f"{names}. Lambda releases a deleted function's VPC interfaces on its own, usually within 20 "
                     "minutes; run cdk destroy again later (aws ec2 describe-network-interfaces --filters "
                     f"Name=group-id,Values={group_id} shows what is left)."))


def _poll(left_now: Callable[[], list[dict[str, Any]]], deadline: float, clock: Callable[[], float], *, done: str,
          with_type: bool, failure: Callable[[int, str], str]) -> dict[str, Any]:
    """One poll: complete when nothing is left; an API error before the deadline is retried on the next poll;
    at the deadline, fail with ``failure(count, names)``."""
    try:
        left = left_now()
    except (BotoCoreError, ClientError) as err:
        if clock() < deadline:
            LOG.warning("DescribeNetworkInterfaces failed, retrying on the next poll: %s", err)
            return {"IsComplete": False}
        raise
    if not left:
        LOG.info(done)
        return {"IsComplete": True}
    names = [f"{n['NetworkInterfaceId']} ({n.get('InterfaceType', '?') + ', ' if with_type else ''}"
             f"{n.get('Status', '?')}, {n.get('Description', '')})" for n in left]
    LOG.info("waiting for %d interface(s): %s", len(left), names)
    if clock() >= deadline:
        raise RuntimeError(failure(len(left), ", ".join(names[:10])))
    return {"IsComplete": False}
