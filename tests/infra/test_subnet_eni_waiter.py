"""The network's destroy waits for the interfaces every requester leaves in the GPU subnet.

What leaves interfaces there (deploy-facts.md, "Destroy"; lifecycle-facts.md, "Leftovers"): HyperPod's nodes and
their EFA interfaces until HyperPod has released them after the cluster's deletion; the VPC CNI's secondary
interfaces, which a node that dies before its agent detaches them leaves ``available`` for good (aws-node
creates them with the execution role, so they are ours, not requester-managed); a load balancer's when an
internal one sits in the GPU subnet (tagged ``kubernetes.io/role/internal-elb``). While one exists EC2 refuses
``DeleteSubnet`` and ``DeleteSecurityGroup`` (DependencyViolation). moto creates and deletes plain interfaces;
requester-managed ones (HyperPod's, ELB's) it cannot make, so those are driven with botocore's Stubber on the
real EC2 service model (DescribeNetworkInterfaces). Fails on main: nothing waited for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from tests.infra import stand_ins

from hyperpod_constructs.lambda_eni_waiter_handler import index

REGION = "us-west-2"


@pytest.fixture
def vpc() -> Iterator[dict[str, Any]]:
    from moto import mock_aws
    from moto.core.base_backend import BackendDict

    with mock_aws():
        BackendDict.reset()
        try:
            ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
            vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            ec2.associate_vpc_cidr_block(VpcId=vpc_id, CidrBlock="10.1.0.0/16")
            gpu = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.1.0.0/16")["Subnet"]["SubnetId"]
            private = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.16.0/20")["Subnet"]["SubnetId"]
            efa = ec2.create_security_group(VpcId=vpc_id, GroupName="efa", Description="efa")["GroupId"]
            yield {"ec2": ec2, "gpu": gpu, "private": private, "efa": efa}
        finally:
            BackendDict.reset()


def _delete_event(subnet: str, group: str | None, clock: list[float]) -> dict[str, Any]:
    props = {"SubnetId": subnet, "WaitSeconds": "1740", **({"SecurityGroupId": group} if group else {})}
    event = {"RequestType": "Delete", "PhysicalResourceId": f"subnet-eni-waiter-{subnet}", "ResourceProperties": props}
    return {**event, **index.on_event(event, clock=lambda: clock[0])}


def test_a_detached_cni_interface_is_deleted_and_others_subnets_are_left_alone(vpc) -> None:
    ec2 = vpc["ec2"]
    leaked = ec2.create_network_interface(SubnetId=vpc["gpu"], Groups=[vpc["efa"]],
                                          Description="aws-K8S-i-0123456789abcdef0")["NetworkInterface"]
    system = ec2.create_network_interface(SubnetId=vpc["private"], Description="system node")["NetworkInterface"]
    clock = [1000.0]
    event = _delete_event(vpc["gpu"], vpc["efa"], clock)

    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": True}
    left = {n["NetworkInterfaceId"] for n in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    assert leaked["NetworkInterfaceId"] not in left and system["NetworkInterfaceId"] in left


def test_an_interface_of_the_efa_group_outside_the_subnet_counts_too(vpc) -> None:
    ec2 = vpc["ec2"]
    ec2.create_network_interface(SubnetId=vpc["private"], Groups=[vpc["efa"]], Description="aws-K8S-i-0abc")
    clock = [1000.0]
    assert index.is_complete(_delete_event(vpc["gpu"], vpc["efa"], clock), ec2=ec2,
                             clock=lambda: clock[0]) == {"IsComplete": True}
    assert ec2.describe_network_interfaces(Filters=[{"Name": "group-id", "Values": [vpc["efa"]]}])[
        "NetworkInterfaces"] == []


SUBNET, GROUP = "subnet-0123456789abcdef0", "sg-0123456789abcdef0"


def _requester_managed(eni_id: str, kind: str, description: str) -> dict[str, Any]:
    return {"NetworkInterfaceId": eni_id, "InterfaceType": kind, "Status": "in-use", "RequesterManaged": True,
            "Description": description}


def _ec2_answering(*pages: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(ec2)
    for subnet_page, group_page in pages:
        stubber.add_response("describe_network_interfaces", {"NetworkInterfaces": subnet_page},
                             {"Filters": [{"Name": "subnet-id", "Values": [SUBNET]}]})
        stubber.add_response("describe_network_interfaces", {"NetworkInterfaces": group_page},
                             {"Filters": [{"Name": "group-id", "Values": [GROUP]}]})
    stubber.activate()
    return ec2, stubber


def test_requester_managed_interfaces_are_waited_for_not_deleted() -> None:
    """HyperPod's EFA interface and an internal ALB's: their services release them; no delete is sent (the
    Stubber would fail on an unexpected DeleteNetworkInterface)."""
    efa = _requester_managed("eni-efa", "efa", "HyperPod EFA")
    alb = _requester_managed("eni-alb", "interface", "ELB app/k8s-default-llama/0123")
    ec2, stubber = _ec2_answering(([efa, alb], [efa]), ([alb], []), ([], []))
    clock = [1000.0]
    event = _delete_event(SUBNET, GROUP, clock)
    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": False}
    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": False}
    assert index.is_complete(event, ec2=ec2, clock=lambda: clock[0]) == {"IsComplete": True}
    stubber.assert_no_pending_responses()


def test_at_the_deadline_it_names_what_is_left() -> None:
    ec2, _ = _ec2_answering(([_requester_managed("eni-efa", "efa", "HyperPod EFA")], []))
    clock = [1000.0]
    event = _delete_event(SUBNET, GROUP, clock)
    clock[0] += 1740
    with pytest.raises(RuntimeError, match=rf"1 network interface\(s\) are still in subnet {SUBNET} or use {GROUP}: "
                                           r"eni-efa \(efa, in-use, HyperPod EFA\)"):
        index.is_complete(event, ec2=ec2, clock=lambda: clock[0])


def test_the_waiter_goes_before_the_gpu_subnet_and_the_efa_group(network_alone) -> None:
    """Its properties name both, so CloudFormation deletes it first and the subnet and group only after its
    Delete (the wait) has finished; its deletes are limited to the GPU subnet. The network stack alone."""
    t = network_alone.template.to_json()["Resources"]
    (waiter,) = [r for r in t.values() if r["Type"] == "Custom::SubnetEniWaiter"]
    gpu = next(k for k, r in t.items()
               if r["Type"] == "AWS::EC2::Subnet" and r["Properties"]["CidrBlock"] == stand_ins.GPU_CIDR)
    efa = next(k for k, r in t.items() if r["Type"] == "AWS::EC2::SecurityGroup"
               and r["Properties"]["GroupDescription"].startswith("HyperPod GPU nodes"))
    assert waiter["Properties"]["SubnetId"] == {"Ref": gpu}
    assert waiter["Properties"]["SecurityGroupId"] == {"Fn::GetAtt": [efa, "GroupId"]}
    deletes = [s for r in t.values() if r["Type"] == "AWS::IAM::Policy"
               for s in r["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "ec2:DeleteNetworkInterface"]
    assert len(deletes) == 1 and "ec2:Subnet" in deletes[0]["Condition"]["ArnEquals"]
    assert gpu in str(deletes[0]["Condition"])
