"""Destroy waits for the VPC interfaces of deleted Lambda functions before their security group goes.

Source: Lambda keeps a deleted function's hyperplane ENIs for some minutes (Lambda developer guide,
"Connecting outbound networking to resources in a VPC"); until then EC2 refuses to delete the group, its
subnets and the VPC (deploy-facts.md, "Destroy"). moto cannot create interfaces of type ``lambda``, so the
handler is driven with botocore's Stubber against the real EC2 service model (DescribeNetworkInterfaces).
Fails on main: nothing waited for them.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_constructs.lambda_eni_waiter_handler import index

GROUP = "sg-0123456789abcdef0"
FILTERS = [{"Name": "group-id", "Values": [GROUP]}, {"Name": "interface-type", "Values": ["lambda"]}]


def _ec2_answering(*pages: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(ec2)
    for interfaces in pages:
        stubber.add_response("describe_network_interfaces", {"NetworkInterfaces": interfaces},
                             {"Filters": FILTERS})
    stubber.activate()
    return ec2, stubber


def _lambda_eni(eni_id: str) -> dict[str, Any]:
    return {"NetworkInterfaceId": eni_id, "InterfaceType": "lambda", "Status": "in-use",
            "Description": "AWS Lambda VPC ENI-hyperpod-dpd-janitor"}


def _delete_event(clock: list[float]) -> dict[str, Any]:
    event = {"RequestType": "Delete", "PhysicalResourceId": f"lambda-eni-waiter-{GROUP}",
             "ResourceProperties": {"SecurityGroupId": GROUP, "WaitSeconds": "1740"}}
    return {**event, **index.on_event(event, clock=lambda: clock[0])}


def test_delete_waits_until_no_lambda_interface_uses_the_group() -> None:
    clock = [1000.0]
    event = _delete_event(clock)
    ec2, stubber = _ec2_answering([_lambda_eni("eni-1")], [])

    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": False}
    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": True}
    stubber.assert_no_pending_responses()


def test_at_the_deadline_it_names_the_interfaces_and_what_to_do() -> None:
    clock = [1000.0]
    event = _delete_event(clock)
    clock[0] += 1740
    ec2, _ = _ec2_answering([_lambda_eni("eni-1"), _lambda_eni("eni-2")])

    with pytest.raises(RuntimeError, match=rf"2 Lambda network interface\(s\) still use security group {GROUP}: "
                                           r"eni-1 \(in-use, AWS Lambda VPC ENI"):
        index.is_complete(event, ec2=ec2, clock=lambda: clock[0])


def test_create_and_update_do_not_wait() -> None:
    for request in ("Create", "Update"):
        event = {"RequestType": request, "ResourceProperties": {"SecurityGroupId": GROUP}}
        assert index.is_complete({**event, **index.on_event(event)}) == {"IsComplete": True}


def test_the_kubectl_handler_is_deleted_before_the_wait_and_the_cluster_after_it(templates) -> None:
    """CDK's kubectl handler runs in the EKS cluster security group; the waiter sits between it and the
    cluster in the deletion order (reverse of DependsOn)."""
    resources = templates["Cluster"].to_json()["Resources"]
    (waiter,) = [k for k, v in resources.items() if v["Type"] == "Custom::LambdaEniWaiter"]
    cluster = next(k for k, v in resources.items() if v["Type"] == "AWS::EKS::Cluster")
    assert resources[waiter]["Properties"]["SecurityGroupId"] == {"Fn::GetAtt": [cluster, "ClusterSecurityGroupId"]}
    handlers = [v for k, v in resources.items()
                if v["Type"] == "AWS::Lambda::Function" and "VpcConfig" in v["Properties"]]
    assert handlers and all(waiter in h["DependsOn"] for h in handlers)
