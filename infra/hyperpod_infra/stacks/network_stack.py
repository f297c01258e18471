"""Long-lived networking: the VPC, the GPU subnet and the EFA security group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from hyperpod_constructs.efa_security_group import EfaSecurityGroup, EfaSecurityGroupProps
from hyperpod_constructs.gpu_network import GpuNetwork, GpuNetworkProps
from hyperpod_constructs.subnet_eni_waiter import SubnetEniWaiter, SubnetEniWaiterProps
from hyperpod_core import outputs


@dataclass(frozen=True, kw_only=True)
class NetworkStackProps:
    network: GpuNetworkProps
    fsx_lustre: bool = False


class NetworkStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: NetworkStackProps, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.network = GpuNetwork(self, "Network", props=props.network)
        self.vpc = self.network.vpc
        self.gpu_subnet = self.network.gpu_subnet
        self.efa = EfaSecurityGroup(self, "Efa", props=EfaSecurityGroupProps(
            vpc=self.vpc, vpc_cidrs=(props.network.vpc_cidr, props.network.gpu_cidr),
            fsx_lustre=props.fsx_lustre))
        self.efa_security_group = self.efa.security_group
        # Deleted before the GPU subnet and the EFA group (its properties name both): on destroy it waits for
        # the interfaces HyperPod, the VPC CNI and load balancers leave there (docs/deploy.md, "Destroy").
        self.gpu_eni_waiter = SubnetEniWaiter(self, "GpuSubnetEniWaiter", props=SubnetEniWaiterProps(
            subnet=self.gpu_subnet, security_group=self.efa_security_group,
            log_retention=props.network.flow_logs_retention))

        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(self, "GpuSubnetId", value=self.gpu_subnet.subnet_id,
                  description=f"GPU subnet in AZ ID {props.network.gpu_availability_zone_id}")
        CfnOutput(self, "EfaSecurityGroupId", value=self.efa_security_group.security_group_id)
        # The AZ *name* the configured AZ ID maps to in this account; the endpoint's topologySpec needs it.
        CfnOutput(self, outputs.GPU_AVAILABILITY_ZONE, value=self.network.gpu_availability_zone_name,
                  description="AZ name of the GPU subnet (pdSpec.topologySpec.availabilityZone)")
