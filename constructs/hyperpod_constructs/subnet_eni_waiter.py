"""On delete, wait until no network interface of any requester is left in a subnet (and a security group)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_constructs import lambda_provider
from hyperpod_constructs.lambda_eni_waiter import waiter_resource
from hyperpod_constructs.nag import acknowledge

RESOURCE_TYPE = "Custom::SubnetEniWaiter"


@dataclass(frozen=True, kw_only=True)
class SubnetEniWaiterProps:
    """Props of :class:`SubnetEniWaiter`."""

    subnet: ec2.ISubnet
    security_group: ec2.ISecurityGroup | None = None
    """Also wait for interfaces that use this group, wherever they are. Default: none."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(30))
    """How long to wait on delete: 1 to 54 minutes (ServiceTimeout is this plus 5). Default: 30 minutes."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Default: one month."""


class SubnetEniWaiter(Construct):
    """A custom resource, deleted before ``subnet`` and ``security_group``, whose Delete waits until neither
    holds a network interface.

    The GPU subnet holds the interfaces of every requester that runs there: HyperPod's nodes and their EFA
    interfaces (released by HyperPod after the cluster is deleted), the VPC CNI's secondary interfaces (a node
    that dies before its agent detaches them leaves them ``available`` for good), and a load balancer's when
    an internal one is placed there (released minutes after the janitor deletes it). While one exists, EC2
    refuses to delete the subnet and the group, and ``cdk destroy`` of the network fails. The handler deletes
    the detached interfaces no service manages (only those, and only in this subnet: ``ec2:Subnet``) and waits for
    the rest; its functions run outside the VPC.
    """

    resource: CustomResource

    def __init__(self, scope: Construct, construct_id: str, *, props: SubnetEniWaiterProps) -> None:
        lambda_provider.check_timeout(props.timeout, minimum=Duration.minutes(1), maximum=Duration.minutes(54))
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="SubnetEniWaiter: reads network interfaces, deletes detached ones")
        # DescribeNetworkInterfaces supports no resource-level permission (service authorization reference).
        role.add_to_policy(iam.PolicyStatement(actions=["ec2:DescribeNetworkInterfaces"], resources=["*"]))
        interfaces = stack.format_arn(service="ec2", resource="network-interface/*")
        role.add_to_policy(iam.PolicyStatement(
            actions=["ec2:DeleteNetworkInterface"], resources=[interfaces],
            conditions={"ArnEquals": {"ec2:Subnet": stack.format_arn(
                service="ec2", resource=f"subnet/{props.subnet.subnet_id}")}}))
        acknowledge(role, "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    "ec2:DescribeNetworkInterfaces supports no resource-level permission; read-only.")
        acknowledge(role, f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:{stack.region}:"
                          "<AWS::AccountId>:network-interface/*]",
                    "Interfaces left by the VPC CNI have IDs known only at run time; deletes are limited to this "
                    "subnet (ec2:Subnet) and the handler deletes only detached, not service-managed ones.")
        properties = {"SubnetId": props.subnet.subnet_id}
        if props.security_group is not None:
            properties["SecurityGroupId"] = props.security_group.security_group_id
        self.resource = waiter_resource(
            self, name="SubnetEniWaiter", purpose="wait for the network interfaces of a subnet on delete", role=role,
            resource_type=RESOURCE_TYPE, properties=properties, timeout=props.timeout,
            log_retention=props.log_retention)
