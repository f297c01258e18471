"""The VPC for HyperPod DPD: EKS control-plane subnets in two AZs, one GPU subnet in the capacity's AZ ID."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aws_cdk import Annotations, RemovalPolicy, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class GpuNetworkProps:
    """Props of :class:`GpuNetwork`."""

    vpc_cidr: str
    """Primary CIDR: a public and a private (EKS control plane, system nodes) subnet in each of two AZs."""
    gpu_cidr: str
    """Secondary VPC CIDR, used whole as the GPU subnet."""
    gpu_availability_zone_id: str
    """AZ *ID* of the GPU capacity, e.g. ``usw2-az2``."""
    control_plane_availability_zone_ids: tuple[str, str]
    """AZ *IDs* of the two public and two private (EKS control plane, system nodes) subnets, e.g.
    ``("usw2-az1", "usw2-az2")``. Placing them by ``Fn::GetAZs`` index could land in an AZ that EKS does not
    support (use1-az3, usw1-az2, cac1-az3)."""
    nat_gateways: int = 1
    """1 or 2. Default: 1, in the public subnet of the GPU AZ when that is a control-plane AZ (the GPU subnet,
    whose nodes pull the large images, routes through it in its own AZ); 2: one NAT per control-plane AZ, the GPU
    subnet using the one in its AZ."""
    interface_endpoints: tuple[str, ...] = ()
    """Interface endpoint service names (``ecr.api``, ``sts``, ...), each admitting HTTPS from ``vpc_cidr`` and
    ``gpu_cidr``. Default: none."""
    flow_logs_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the VPC flow log group. Default: one month."""
    private_subnet_cidr_mask: int = 20
    public_subnet_cidr_mask: int = 24
    tags: dict[str, str] = field(default_factory=dict)


class GpuNetwork(Construct):
    """VPC, NAT, S3 gateway endpoint, optional interface endpoints, flow logs and the GPU subnet.

    Every subnet is placed by AZ ID (``AvailabilityZoneId``), never by AZ name or ``Fn::GetAZs`` index: names
    map to different physical AZs in every account, HyperPod capacity and training plans are expressed in AZ
    IDs, and EKS refuses control-plane subnets in a few AZ IDs (EKS user guide, subnet requirements).
    """

    vpc: ec2.Vpc
    gpu_subnet: ec2.PrivateSubnet
    flow_log_group: logs.LogGroup
    interface_endpoint_security_group: ec2.SecurityGroup | None
    """The one group of every interface endpoint (HTTPS from both CIDRs); ``None`` without endpoints."""

    def __init__(self, scope: Construct, construct_id: str, *, props: GpuNetworkProps) -> None:
        if props.nat_gateways not in (1, 2):
            raise ValueError(f"nat_gateways must be 1 or 2, got {props.nat_gateways}")
        super().__init__(scope, construct_id)
        self.props = props
        cp_azs = props.control_plane_availability_zone_ids
        #: Index of the GPU AZ among the control-plane AZs (public subnet i is in cp_azs[i]); None if it is not one.
        self._gpu_az_index = cp_azs.index(props.gpu_availability_zone_id) \
            if props.gpu_availability_zone_id in cp_azs else None
        self.vpc = self._vpc()
        self.gpu_subnet = self._gpu_subnet()
        gpu_cfn = self.gpu_subnet.node.default_child
        assert isinstance(gpu_cfn, ec2.CfnSubnet)
        #: The AZ name CloudFormation resolved for the configured AZ ID (a deploy-time token).
        self.gpu_availability_zone_name: str = gpu_cfn.attr_availability_zone
        self._endpoints()
        self.flow_log_group = logs.LogGroup(
            self, "FlowLogs", retention=props.flow_logs_retention, removal_policy=RemovalPolicy.DESTROY)
        self.vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL)

    def _vpc(self) -> ec2.Vpc:
        """The primary CIDR: a public and a private subnet in each control-plane AZ, placed by AZ ID and tagged for
        the load balancers Kubernetes creates (internet-facing in public, internal in private subnets)."""
        props = self.props
        nat_subnets = None
        if props.nat_gateways == 1 and self._gpu_az_index is not None:
            # aws-cdk-lib puts a single NAT in the first selected public subnet: select the GPU AZ's.
            nat_subnets = ec2.SubnetSelection(subnet_group_name="public",
                                              subnet_filters=[_SubnetAt(self._gpu_az_index)])
        vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.vpc_cidr),
            max_azs=2,  # EKS requires control-plane subnets in at least two AZs
            nat_gateways=props.nat_gateways,
            nat_gateway_subnets=nat_subnets,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC,
                                        cidr_mask=props.public_subnet_cidr_mask),
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=props.private_subnet_cidr_mask),
            ],
        )
        for subnets in (vpc.public_subnets, vpc.private_subnets):
            for subnet, az_id in zip(subnets, props.control_plane_availability_zone_ids, strict=True):
                _place_by_az_id(subnet, az_id)
        for subnet in vpc.public_subnets:
            Tags.of(subnet).add("kubernetes.io/role/elb", "1")
        for subnet in vpc.private_subnets:
            Tags.of(subnet).add("kubernetes.io/role/internal-elb", "1")
        return vpc

    def _endpoints(self) -> None:
        """The S3 gateway endpoint for the private and GPU subnets, and the interface endpoints."""
        self.vpc.add_gateway_endpoint(
            "S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                     ec2.SubnetSelection(subnets=[self.gpu_subnet])],
        )
        self.interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        self.interface_endpoint_security_group = self._interface_endpoint_group() \
            if self.props.interface_endpoints else None
        for service in self.props.interface_endpoints:
            # One ENI per control-plane AZ; the GPU subnet reaches them through private DNS. open=False: the
            # L2 would admit only the primary CIDR (Peer.ipv4(vpc.vpcCidrBlock), a token cdk-nag's EC23 cannot
            # read); our group admits both CIDRs instead.
            self.interface_endpoints[service] = self.vpc.add_interface_endpoint(
                "Endpoint" + "".join(p.capitalize() for p in service.replace("-", ".").split(".")),
                service=ec2.InterfaceVpcEndpointAwsService(service),
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                private_dns_enabled=True, open=False,
                security_groups=[self.interface_endpoint_security_group],
            )

    def _interface_endpoint_group(self) -> ec2.SecurityGroup:
        """HTTPS from the primary CIDR (control plane, system nodes) and the GPU CIDR (GPU nodes and pods: STS,
        ECR, eks-auth, logs and AMP remote-write from there), nothing else; endpoints answer, never call."""
        group = ec2.SecurityGroup(
            self, "InterfaceEndpoints", vpc=self.vpc, allow_all_outbound=False,
            description="Interface VPC endpoints: HTTPS from the primary and the GPU CIDR")
        for name, cidr in (("primary", self.props.vpc_cidr), ("GPU", self.props.gpu_cidr)):
            group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), f"HTTPS from the {name} CIDR")
        return group

    def _gpu_subnet(self) -> ec2.PrivateSubnet:
        cidr = ec2.CfnVPCCidrBlock(self, "GpuCidr", vpc_id=self.vpc.vpc_id, cidr_block=self.props.gpu_cidr)
        subnet = ec2.PrivateSubnet(
            self, "GpuSubnet",
            vpc_id=self.vpc.vpc_id,
            cidr_block=self.props.gpu_cidr,
            # The L2 takes an AZ name; we place by AZ ID instead (below), so this attribute holds the ID.
            availability_zone=self.props.gpu_availability_zone_id,
        )
        cfn = _place_by_az_id(subnet, self.props.gpu_availability_zone_id)
        cfn.node.add_dependency(cidr)  # the secondary CIDR must exist before a subnet can use it
        subnet.add_default_nat_route(self._gpu_nat().ref)
        Tags.of(subnet).add("kubernetes.io/role/internal-elb", "1")
        Tags.of(subnet).add("hyperpod/gpu-subnet", "true")
        return subnet


    def _gpu_nat(self) -> ec2.CfnNatGateway:
        """The NAT in the GPU AZ's public subnet; without one (the GPU AZ is no control-plane AZ), the first NAT,
        in another AZ: egress then crosses AZs (transfer charges, and it fails with that AZ), said at synth."""
        nats = {i: s.node.try_find_child("NATGateway") for i, s in enumerate(self.vpc.public_subnets)}
        nats = {i: n for i, n in nats.items() if n is not None}
        if self._gpu_az_index in nats:
            nat = nats[self._gpu_az_index]
        else:
            nat = nats[min(nats)]
            Annotations.of(self).add_warning_v2(
                "hyperpod:gpuEgressCrossAz",
                f"network.gpu_availability_zone_id {self.props.gpu_availability_zone_id} is not one of "
                f"network.control_plane_availability_zone_ids {list(self.props.control_plane_availability_zone_ids)}:"
                " no public subnet or NAT gateway is in the GPU AZ, so the GPU subnet routes through the NAT in "
                f"{self.props.control_plane_availability_zone_ids[min(nats)]} (cross-AZ transfer; egress fails with "
                "that AZ). List the GPU AZ ID as a control-plane AZ where EKS supports it (docs/cluster.md)")
        assert isinstance(nat, ec2.CfnNatGateway)
        return nat


class _SubnetAt(ec2.SubnetFilter):
    """The subnet at one index of the selection (the public subnets come in control-plane AZ order)."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self._index = index

    def select_subnets(self, subnets: Sequence[ec2.ISubnet]) -> list[ec2.ISubnet]:
        return [subnets[self._index]]


def _place_by_az_id(subnet: ec2.ISubnet, az_id: str) -> ec2.CfnSubnet:
    """Replace the subnet's ``AvailabilityZone`` (a name, or ``Fn::Select`` over ``Fn::GetAZs``) by
    ``AvailabilityZoneId`` (the two are mutually exclusive in ``AWS::EC2::Subnet``)."""
    cfn = subnet.node.default_child
    assert isinstance(cfn, ec2.CfnSubnet)
    cfn.add_property_deletion_override("AvailabilityZone")
    cfn.add_property_override("AvailabilityZoneId", az_id)
    return cfn
