"""SubnetEniWaiter alone (a bare stack, an imported subnet and group): the custom resource names both, and its
function may delete only the interfaces of that subnet."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template
from tests.infra import stand_ins

from hyperpod_constructs.subnet_eni_waiter import RESOURCE_TYPE, SubnetEniWaiter, SubnetEniWaiterProps


def _props(stack: Any, **extra: Any) -> SubnetEniWaiterProps:
    subnet = ec2.Subnet.from_subnet_attributes(stack, "GpuSubnet", subnet_id=stand_ins.GPU_SUBNET,
                                               availability_zone=stand_ins.GPU_AZ)
    group = ec2.SecurityGroup.from_security_group_id(stack, "EfaGroup", stand_ins.EFA_GROUP)
    return SubnetEniWaiterProps(subnet=subnet, security_group=group, **extra)


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    SubnetEniWaiter(stack, "Waiter", props=_props(stack))
    return {"stack": stack, "template": Template.from_stack(stack)}


def test_the_waiter_names_the_subnet_and_the_group(built: dict[str, Any]) -> None:
    built["template"].has_resource_properties(RESOURCE_TYPE, {
        "SubnetId": stand_ins.GPU_SUBNET, "SecurityGroupId": stand_ins.EFA_GROUP,
        "WaitSeconds": "1740",  # the default 30 minutes, less two 30 s polls
        "ServiceTimeout": str((30 + 5) * 60)})


def test_deletes_are_limited_to_the_subnet(built: dict[str, Any]) -> None:
    # Service authorization reference (Amazon EC2): DeleteNetworkInterface takes the ec2:Subnet condition key;
    # DescribeNetworkInterfaces supports no resource-level permission.
    subnet_arn = stand_ins.arn(built["stack"], "ec2", "subnet", stand_ins.GPU_SUBNET)
    built["template"].has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": "ec2:DeleteNetworkInterface", "Effect": "Allow",
                           "Condition": {"ArnEquals": {"ec2:Subnet": subnet_arn}}})])}})


def test_fails_when_the_wait_exceeds_54_minutes() -> None:
    stack = stand_ins.stack()
    with pytest.raises(ValueError, match="timeout must be between 1 and 54"):
        SubnetEniWaiter(stack, "Waiter", props=_props(stack, timeout=Duration.minutes(55)))
