"""The network stack alone (``network_alone``: explicit props, one NAT, no interface endpoint) and its variants
(one app, one synth). The default config reaching this stack: tests/infra/test_app_wiring.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk.assertions import Annotations, Match, Template
from tests.conftest import REPO_ROOT
from tests.infra import stand_ins

from hyperpod_core.config import load_config

#: The suggested list of docs/config.md (network.interface_endpoints).
SUGGESTED_INTERFACE_ENDPOINTS = ["ecr.api", "ecr.dkr", "sts", "eks-auth", "sagemaker.api", "logs", "aps-workspaces"]


@pytest.fixture(scope="module")
def network(network_alone) -> Template:
    return network_alone.template


@pytest.fixture(scope="module")
def variants() -> dict:
    """``WithOptions``: two interface endpoints, the FSx for Lustre ports, two NATs; ``GpuAzElsewhere``: the GPU
    AZ outside the control-plane AZs; ``Private``: the interface endpoints docs/config.md suggests for a private
    cluster. One app, one synth."""
    app = stand_ins.app()
    built = {
        "WithOptions": stand_ins.network_stack(app, "WithOptions", interface_endpoints=("eks-auth", "sagemaker.api"),
                                               fsx_lustre=True, nat_gateways=2),
        "GpuAzElsewhere": stand_ins.network_stack(app, "GpuAzElsewhere", gpu_availability_zone_id="usw2-az3"),
        "Private": stand_ins.network_stack(app, "Private",
                                           interface_endpoints=tuple(SUGGESTED_INTERFACE_ENDPOINTS)),
    }
    return {name: (stack, Template.from_stack(stack)) for name, stack in built.items()}


def _efa_ingress(t: Template) -> list[dict]:
    groups = t.find_resources("AWS::EC2::SecurityGroup", {"Properties": {
        "GroupDescription": Match.string_like_regexp("^HyperPod GPU nodes")}})
    assert len(groups) == 1
    return next(iter(groups.values()))["Properties"]["SecurityGroupIngress"]


def _subnets(t: Template) -> dict:
    return t.find_resources("AWS::EC2::Subnet")


def test_vpc_uses_the_given_primary_cidr(network: Template) -> None:
    network.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": stand_ins.VPC_CIDR,
                                                      "EnableDnsHostnames": True, "EnableDnsSupport": True})


def _gpu_subnet_id(t: Template) -> str:
    (gpu_id,) = [k for k, s in _subnets(t).items() if s["Properties"]["CidrBlock"] == stand_ins.GPU_CIDR]
    return gpu_id


def test_control_plane_subnets_span_two_azs_placed_by_az_id(network: Template) -> None:
    """AZ IDs, not Fn::GetAZs indexes: an index can land in an AZ EKS does not support (EKS user guide)."""
    by_az: dict[str, list[str]] = {}
    for sid, s in _subnets(network).items():
        assert "AvailabilityZone" not in s["Properties"]
        if sid != _gpu_subnet_id(network):
            by_az.setdefault(s["Properties"]["AvailabilityZoneId"], []).append(sid)
    # public + private in each of the two given AZ IDs
    assert sorted(by_az) == sorted(stand_ins.CONTROL_PLANE_AZ_IDS)
    assert all(len(ids) == 2 for ids in by_az.values())


def test_gpu_subnet_is_the_secondary_cidr_in_the_given_az_id(network: Template) -> None:
    gpu = [_subnets(network)[_gpu_subnet_id(network)]]
    props = gpu[0]["Properties"]
    assert props["AvailabilityZoneId"] == stand_ins.GPU_AZ_ID
    assert "AvailabilityZone" not in props
    assert props["CidrBlock"] == stand_ins.GPU_CIDR
    assert props.get("MapPublicIpOnLaunch", False) is False
    assert {"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in props["Tags"]
    cidr_blocks = network.find_resources("AWS::EC2::VPCCidrBlock", {"Properties": {"CidrBlock": stand_ins.GPU_CIDR}})
    assert len(cidr_blocks) == 1
    assert set(cidr_blocks) <= set(gpu[0].get("DependsOn", []))


def test_gpu_subnet_routes_to_the_internet_through_nat(network: Template) -> None:
    gpu_id = _gpu_subnet_id(network)
    assoc = network.find_resources("AWS::EC2::SubnetRouteTableAssociation",
                                   {"Properties": {"SubnetId": {"Ref": gpu_id}}})
    assert len(assoc) == 1
    table = next(iter(assoc.values()))["Properties"]["RouteTableId"]
    network.has_resource_properties("AWS::EC2::Route", {
        "RouteTableId": table, "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": Match.any_value()})


def test_one_nat_gateway_when_one_is_asked_for(network: Template) -> None:
    network.resource_count_is("AWS::EC2::NatGateway", 1)


def _gpu_nat_az_id(t: Template) -> str:
    """AZ ID of the subnet holding the NAT gateway the GPU subnet's default route points at."""
    assoc = t.find_resources("AWS::EC2::SubnetRouteTableAssociation",
                             {"Properties": {"SubnetId": {"Ref": _gpu_subnet_id(t)}}})
    table = next(iter(assoc.values()))["Properties"]["RouteTableId"]
    (route,) = t.find_resources("AWS::EC2::Route", {"Properties": {"RouteTableId": table}}).values()
    nat = t.find_resources("AWS::EC2::NatGateway")[route["Properties"]["NatGatewayId"]["Ref"]]
    return _subnets(t)[nat["Properties"]["SubnetId"]["Ref"]]["Properties"]["AvailabilityZoneId"]


def test_the_one_nat_gateway_is_in_the_gpu_az(network: Template) -> None:
    """The GPU nodes pull the largest images; a NAT in another AZ costs cross-AZ transfer on every pull and
    takes egress down with that AZ (shared/reference/lifecycle-facts.md, "Networking"). The GPU AZ usw2-az2 is the
    second control-plane AZ, where aws-cdk-lib would not put a single NAT."""
    assert stand_ins.CONTROL_PLANE_AZ_IDS.index(stand_ins.GPU_AZ_ID) == 1
    assert _gpu_nat_az_id(network) == stand_ins.GPU_AZ_ID


def test_public_and_private_subnets_are_tagged_for_load_balancers(network: Template) -> None:
    tags = [s["Properties"]["Tags"] for s in _subnets(network).values()]
    assert sum({"Key": "kubernetes.io/role/elb", "Value": "1"} in t for t in tags) == 2
    assert sum({"Key": "kubernetes.io/role/internal-elb", "Value": "1"} in t for t in tags) == 3


def test_s3_gateway_endpoint_serves_private_and_gpu_route_tables(network: Template) -> None:
    endpoints = network.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Gateway"}})
    assert len(endpoints) == 1
    props = next(iter(endpoints.values()))["Properties"]
    assert "s3" in str(props["ServiceName"])
    assert len(props["RouteTableIds"]) == 3  # two private control-plane subnets + the GPU subnet


def test_no_interface_endpoints_unless_asked_for(network: Template) -> None:
    assert network.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}}) == {}


def test_flow_logs_go_to_a_log_group_with_retention(network: Template) -> None:
    network.has_resource_properties("AWS::EC2::FlowLog", {
        "ResourceType": "VPC", "TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"})
    network.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": stand_ins.LOG_RETENTION_DAYS})


def test_efa_security_group_allows_all_traffic_from_and_to_itself(network: Template) -> None:
    groups = network.find_resources("AWS::EC2::SecurityGroup")
    assert len(groups) == 1
    sg_id = next(iter(groups))
    network.has_resource_properties("AWS::EC2::SecurityGroupIngress", {
        "IpProtocol": "-1", "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
        "SourceSecurityGroupId": {"Fn::GetAtt": [sg_id, "GroupId"]}})
    network.has_resource_properties("AWS::EC2::SecurityGroupEgress", {
        "IpProtocol": "-1", "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
        "DestinationSecurityGroupId": {"Fn::GetAtt": [sg_id, "GroupId"]}})
    network.has_resource_properties("AWS::EC2::SecurityGroupEgress", {
        "IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]}})


def test_efa_security_group_admits_cluster_traffic_from_both_vpc_cidrs_only(network: Template) -> None:
    ingress = _efa_ingress(network)
    assert {r["CidrIp"] for r in ingress} == {stand_ins.VPC_CIDR, stand_ins.GPU_CIDR}
    assert all(r["CidrIp"] != "0.0.0.0/0" for r in ingress)
    assert all(r["IpProtocol"] in ("tcp", "udp") for r in ingress)


def test_fsx_ports_are_closed_unless_enabled(network: Template) -> None:
    ingress = _efa_ingress(network)
    assert not any(r.get("FromPort") == 988 for r in ingress)


def test_optional_network_features(variants) -> None:
    """Interface endpoints and FSx ports appear when asked for; with two NATs the GPU subnet uses its own AZ's."""
    _, t = variants["WithOptions"]
    interfaces = t.find_resources("AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Interface"}})
    assert len(interfaces) == 2
    assert all(p["Properties"]["PrivateDnsEnabled"] for p in interfaces.values())
    t.resource_count_is("AWS::EC2::NatGateway", 2)
    assert _gpu_nat_az_id(t) == stand_ins.GPU_AZ_ID  # the NAT of its own AZ
    ingress = _efa_ingress(t)
    assert {r.get("FromPort") for r in ingress} >= {988, 1018}


def test_gpu_az_outside_the_control_plane_azs_routes_through_the_first_nat_and_says_so(variants) -> None:
    """No public subnet is in the GPU AZ then, so no NAT can be: the route crosses AZs and synth warns."""
    stack, t = variants["GpuAzElsewhere"]
    assert _gpu_nat_az_id(t) == stand_ins.CONTROL_PLANE_AZ_IDS[0]
    Annotations.from_stack(stack).has_warning(
        "/GpuAzElsewhere/Network", Match.string_like_regexp(".*usw2-az3 is not one of .*cross-AZ.*"))


def test_suggested_endpoints_are_the_documented_ones() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    assert "[" + ", ".join(SUGGESTED_INTERFACE_ENDPOINTS) + "]" in docs


def test_the_private_cluster_example_has_the_suggested_endpoints() -> None:
    """So the config matrix synthesizes them with cdk-nag (tests/infra/test_validation.py,
    ``test_cdk_nag_has_no_unacknowledged_findings[private-cluster.yaml]``): it stopped on six AwsSolutions-EC23
    findings, the L2 endpoint group's ingress naming the VPC CIDR as a token, which the rule cannot evaluate
    (issue 20)."""
    config = load_config(REPO_ROOT / "config" / "examples" / "private-cluster.yaml")
    assert list(config.network.interface_endpoints) == SUGGESTED_INTERFACE_ENDPOINTS


def test_interface_endpoints_admit_https_from_both_cidrs(variants) -> None:
    """aws-cdk-lib's InterfaceVpcEndpoint opens its port to ``vpc.vpcCidrBlock`` only (2.275,
    aws-ec2/lib/vpc-endpoint.js); the GPU nodes live in the secondary CIDR and resolve STS, ECR, eks-auth, logs,
    sagemaker.api and AMP to these endpoints (private DNS)."""
    _, template = variants["Private"]
    t = template.to_json()["Resources"]
    endpoints = {k: r for k, r in t.items() if r["Type"] == "AWS::EC2::VPCEndpoint"
                 and r["Properties"].get("VpcEndpointType") == "Interface"}
    assert len(endpoints) == len(SUGGESTED_INTERFACE_ENDPOINTS)
    for key, endpoint in endpoints.items():
        (group,) = endpoint["Properties"]["SecurityGroupIds"]
        ingress = t[group["Fn::GetAtt"][0]]["Properties"]["SecurityGroupIngress"]
        assert {(r["CidrIp"], r["FromPort"], r["ToPort"]) for r in ingress} == {
            (stand_ins.VPC_CIDR, 443, 443), (stand_ins.GPU_CIDR, 443, 443)}, key


def test_gpu_az_name_is_an_output_resolved_from_the_subnet(network: Template) -> None:
    gpu_id = _gpu_subnet_id(network)
    network.has_output("GpuAvailabilityZone", {"Value": {"Fn::GetAtt": [gpu_id, "AvailabilityZone"]}})
