"""The security group every GPU node (and its EFA interfaces) is attached to."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

#: FSx for Lustre: LNET 988 and 1018-1023 (FSx for Lustre user guide, "Amazon VPC security groups").
FSX_LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))


@dataclass(frozen=True, kw_only=True)
class EfaSecurityGroupProps:
    """Props of :class:`EfaSecurityGroup`."""

    vpc: ec2.IVpc
    vpc_cidrs: tuple[str, ...]
    """CIDRs of the VPC (primary and secondary): the EKS control plane and load balancers live there."""
    fsx_lustre: bool = False
    """Open the FSx for Lustre ports to the VPC. Default: off."""


class EfaSecurityGroup(Construct):
    """EFA needs all traffic to and from the group itself, in *and* out; anything less fails the
    HyperPod EFA health check ("EFA health checks did not run successfully").

    Also: all egress (image pulls, AWS APIs), TCP and DNS from the VPC (EKS control plane, webhooks, the
    DPD router and load balancers reaching pods), and FSx for Lustre when enabled.
    """

    security_group: ec2.SecurityGroup

    def __init__(self, scope: Construct, construct_id: str, *, props: EfaSecurityGroupProps) -> None:
        super().__init__(scope, construct_id)
        sg = ec2.SecurityGroup(
            self, "Group", vpc=props.vpc, allow_all_outbound=False,
            description="HyperPod GPU nodes: EFA self-referencing all traffic, plus EKS and VPC access",
        )
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "EFA: all traffic from members of this group")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "EFA: all traffic to members of this group")
        # The L2 refuses an all-traffic 0.0.0.0/0 egress unless allowAllOutbound, which would drop the
        # explicit self-referencing egress EFA requires; so this one rule is written at L1.
        ec2.CfnSecurityGroupEgress(
            self, "AllEgress", group_id=sg.security_group_id, ip_protocol="-1", cidr_ip="0.0.0.0/0",
            description="Nodes reach AWS APIs, image registries and the model bucket")
        for cidr in props.vpc_cidrs:
            # Pods on the system nodes (DPD router, webhooks, scrapers, CoreDNS) and the EKS control plane
            # (kubelet 10250, webhooks 443/9443) reach GPU pods on many ports; the VPC is the boundary.
            sg.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.all_tcp(), "Cluster traffic from the VPC (TCP)")
            sg.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.udp(53), "DNS from the VPC")
            if props.fsx_lustre:
                for port in FSX_LUSTRE_PORTS:
                    sg.add_ingress_rule(ec2.Peer.ipv4(cidr), port, "FSx for Lustre")
        self.security_group = sg
