"""Config -> props -> stacks. The only place that reads :class:`Config` on the CDK side."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from hyperpod_constructs.gpu_network import GpuNetworkProps

from hyperpod_infra.config import Config
from hyperpod_infra.stacks.network_stack import NetworkStack, NetworkStackProps


def retention(days: int) -> logs.RetentionDays:
    """CloudWatch retention enum for a day count the config already restricted to valid values."""
    return next(r for r in logs.RetentionDays if _days(r) == days)


def _days(r: logs.RetentionDays) -> int:
    return {"ONE_DAY": 1, "THREE_DAYS": 3, "FIVE_DAYS": 5, "ONE_WEEK": 7, "TWO_WEEKS": 14,
            "ONE_MONTH": 30, "TWO_MONTHS": 60, "THREE_MONTHS": 90, "SIX_MONTHS": 180,
            "ONE_YEAR": 365}.get(r.name, -1)


@dataclass(frozen=True)
class Stacks:
    network: NetworkStack

    def all(self) -> list[cdk.Stack]:
        return [self.network]


def build(app: cdk.App, config: Config) -> Stacks:
    """Instantiate every stack for ``config``. Stacks are environment-agnostic in the account, so synth never
    looks anything up; the region is fixed so ARNs and service principals resolve."""
    env = cdk.Environment(region=config.region)
    common = {"env": env, "tags": {"project": "hyperpod-dpd", "deployment": config.name}}
    n = config.network
    network = NetworkStack(
        app, "Network", stack_name=f"{config.name}-network",
        description="HyperPod DPD: VPC, single-AZ GPU subnet, EFA security group",
        props=NetworkStackProps(
            network=GpuNetworkProps(
                vpc_cidr=n.vpc_cidr, gpu_cidr=n.gpu_cidr, gpu_availability_zone_id=n.gpu_availability_zone_id,
                nat_gateways=n.nat_gateways, interface_endpoints=n.interface_endpoints,
                flow_logs_retention=retention(n.flow_logs_retention_days)),
            fsx_lustre=n.fsx_lustre),
        **common)
    return Stacks(network=network)
