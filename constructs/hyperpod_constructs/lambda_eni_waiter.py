"""On delete, wait until the VPC interfaces of deleted Lambda functions are gone from a security group."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_constructs import lambda_provider
from hyperpod_constructs.nag import acknowledge

HANDLER_DIR = Path(__file__).resolve().parent / "lambda_eni_waiter_handler"
RESOURCE_TYPE = "Custom::LambdaEniWaiter"
QUERY_INTERVAL = Duration.seconds(30)


@dataclass(frozen=True, kw_only=True)
class LambdaEniWaiterProps:
    """Props of :class:`LambdaEniWaiter`."""

    security_group: ec2.ISecurityGroup
    """The group the VPC functions use; the waiter is deleted before it and after the functions."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(30))
    """How long to wait on delete: 1 to 54 minutes (ServiceTimeout is this plus 5, below CloudFormation's hour).
    Default: 30 minutes."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Default: one month."""


class LambdaEniWaiter(Construct):
    """A custom resource whose Delete waits until no network interface uses ``security_group``.

    Lambda keeps a deleted function's hyperplane ENIs for some minutes; while they exist, EC2 refuses to
    delete the group, the subnets and the VPC, and ``cdk destroy`` fails on them. Make every VPC function
    that uses the group depend on :attr:`resource` (``function.node.add_dependency(waiter.resource)``):
    CloudFormation then deletes the functions, waits here, and only then deletes the group. The waiter's
    own functions run outside the VPC, so they hold no interface themselves.
    """

    resource: CustomResource

    def __init__(self, scope: Construct, construct_id: str, *, props: LambdaEniWaiterProps) -> None:
        lambda_provider.check_timeout(props.timeout, minimum=Duration.minutes(1), maximum=Duration.minutes(54))
        super().__init__(scope, construct_id)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="LambdaEniWaiter: reads network interfaces")
        # DescribeNetworkInterfaces supports no resource-level permission (service authorization reference).
        role.add_to_policy(iam.PolicyStatement(actions=["ec2:DescribeNetworkInterfaces"], resources=["*"]))
        acknowledge(role, "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    "ec2:DescribeNetworkInterfaces supports no resource-level permission; read-only.")
        self.resource = waiter_resource(
            self, name="LambdaEniWaiter", purpose="wait for VPC Lambda interfaces on delete", role=role,
            resource_type=RESOURCE_TYPE, properties={"SecurityGroupId": props.security_group.security_group_id},
            timeout=props.timeout, log_retention=props.log_retention)


def waiter_resource(scope: Construct, *, name: str, purpose: str, role: iam.IRole, resource_type: str,
                    properties: dict[str, str], timeout: Duration, log_retention: logs.RetentionDays) -> CustomResource:
    """The polling functions of this handler, their provider and the resource, for an interface waiter in
    ``scope`` (:class:`LambdaEniWaiter`, :class:`~hyperpod_constructs.subnet_eni_waiter.SubnetEniWaiter`)."""
    functions = lambda_provider.polling_functions(
        scope, name=name, purpose=purpose, code=lambda_provider.handler_code(HANDLER_DIR), role=role,
        timeout=Duration.minutes(1), memory_size=128, log_retention=log_retention)
    provider = lambda_provider.provider(
        scope, on_event=functions[0], is_complete=functions[1], query_interval=QUERY_INTERVAL, total_timeout=timeout,
        log_retention=log_retention)
    return lambda_provider.custom_resource(
        scope, provider=provider, resource_type=resource_type, total_timeout=timeout,
        properties={**properties, "WaitSeconds": lambda_provider.handler_wait_seconds(timeout, QUERY_INTERVAL)},
        depends_on=(role, *functions, provider))
