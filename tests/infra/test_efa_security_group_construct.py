"""EfaSecurityGroup alone (a bare stack, the stand-in VPC): the self-referencing all-traffic rules EFA requires, in
and out, and from the network only what the VPC's CIDRs send."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from tests.infra import stand_ins

from hyperpod_constructs.efa_security_group import EfaSecurityGroup, EfaSecurityGroupProps

CIDRS = (stand_ins.VPC_CIDR, stand_ins.GPU_CIDR)


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    efa = EfaSecurityGroup(stack, "Efa", props=EfaSecurityGroupProps(vpc=stand_ins.vpc(stack), vpc_cidrs=CIDRS))
    return {"template": Template.from_stack(stack), "group": stack.resolve(efa.security_group.security_group_id)}


def test_members_exchange_all_traffic_in_and_out(built: dict[str, Any]) -> None:
    # AWS EC2 User Guide, "Get started with EFA" (Step 1, prepare an EFA-enabled security group): inbound and
    # outbound rules that allow all traffic to and from the security group itself; without the outbound one the
    # HyperPod EFA health check fails (shared/reference/provisioning.md, "Security group for EFA").
    group = built["group"]
    built["template"].has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "GroupId": group, "SourceSecurityGroupId": group, "IpProtocol": "-1"})
    built["template"].has_resource_properties("AWS::EC2::SecurityGroupEgress", {
        "GroupId": group, "DestinationSecurityGroupId": group, "IpProtocol": "-1"})


def test_the_network_reaches_members_only_from_the_vpc_cidrs(built: dict[str, Any]) -> None:
    (group,) = built["template"].find_resources("AWS::EC2::SecurityGroup").values()
    ingress = group["Properties"]["SecurityGroupIngress"]
    assert {rule["CidrIp"] for rule in ingress} == set(CIDRS)
    # FSx for Lustre's ports (988, 1018-1023) stay closed unless asked for.
    assert not [rule for rule in ingress if rule["IpProtocol"] == "tcp" and rule["FromPort"] in (988, 1018)]
    built["template"].resource_properties_count_is("AWS::EC2::SecurityGroupIngress", {
        "SourceSecurityGroupId": Match.any_value()}, 1)
