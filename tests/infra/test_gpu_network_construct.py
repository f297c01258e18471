"""GpuNetwork alone (a bare stack, explicit CIDRs and AZ IDs): every subnet placed by AZ ID, the GPU subnet the whole
secondary CIDR after its association, and its egress through the NAT in its own AZ."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template
from tests.infra import stand_ins

from hyperpod_constructs.gpu_network import GpuNetwork, GpuNetworkProps

GPU_AZ_ID = "usw2-az2"
CONTROL_PLANE_AZ_IDS = ("usw2-az1", "usw2-az2")


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    stack = stand_ins.stack()
    network = GpuNetwork(stack, "Network", props=GpuNetworkProps(
        vpc_cidr=stand_ins.VPC_CIDR, gpu_cidr=stand_ins.GPU_CIDR, gpu_availability_zone_id=GPU_AZ_ID,
        control_plane_availability_zone_ids=CONTROL_PLANE_AZ_IDS, nat_gateways=1))
    return {"resources": Template.from_stack(stack).to_json()["Resources"],
            "gpu_subnet": stack.resolve(stack.get_logical_id(network.gpu_subnet.node.default_child))}


def _of_type(built: dict[str, Any], resource_type: str) -> dict[str, Any]:
    return {k: r for k, r in built["resources"].items() if r["Type"] == resource_type}


def test_every_subnet_is_placed_by_az_id_and_the_gpu_subnet_is_the_secondary_cidr(built: dict[str, Any]) -> None:
    # AWS::EC2::Subnet: AvailabilityZone and AvailabilityZoneId are mutually exclusive; AZ names map to different
    # physical AZs per account, HyperPod capacity is given by AZ ID (shared/reference/deploy-facts.md).
    subnets = _of_type(built, "AWS::EC2::Subnet")
    assert len(subnets) == 5  # a public and a private subnet per control-plane AZ, and the GPU subnet
    assert not [k for k, s in subnets.items() if "AvailabilityZone" in s["Properties"]]
    placed = sorted(s["Properties"]["AvailabilityZoneId"] for k, s in subnets.items() if k != built["gpu_subnet"])
    assert placed == sorted(CONTROL_PLANE_AZ_IDS * 2)
    gpu = subnets[built["gpu_subnet"]]
    assert (gpu["Properties"]["AvailabilityZoneId"], gpu["Properties"]["CidrBlock"]) == (GPU_AZ_ID,
                                                                                        stand_ins.GPU_CIDR)
    # A subnet in a secondary CIDR can only be created once the CIDR is associated (AWS::EC2::VPCCidrBlock).
    (association,) = _of_type(built, "AWS::EC2::VPCCidrBlock")
    assert association in gpu["DependsOn"]


def test_the_gpu_subnet_leaves_through_the_nat_in_its_own_az(built: dict[str, Any]) -> None:
    subnets = _of_type(built, "AWS::EC2::Subnet")
    (nat,) = _of_type(built, "AWS::EC2::NatGateway").values()
    nat_subnet = subnets[nat["Properties"]["SubnetId"]["Ref"]]
    assert nat_subnet["Properties"]["AvailabilityZoneId"] == GPU_AZ_ID
    (association,) = [a["Properties"]["RouteTableId"]["Ref"] for a in
                      _of_type(built, "AWS::EC2::SubnetRouteTableAssociation").values()
                      if a["Properties"]["SubnetId"] == {"Ref": built["gpu_subnet"]}]
    (route,) = [r["Properties"] for r in _of_type(built, "AWS::EC2::Route").values()
                if r["Properties"]["RouteTableId"] == {"Ref": association}]
    assert route["DestinationCidrBlock"] == "0.0.0.0/0" and "NatGatewayId" in route
    assert route["NatGatewayId"] == {"Ref": next(k for k, r in built["resources"].items() if r is nat)}
