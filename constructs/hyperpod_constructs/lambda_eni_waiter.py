"""On delete, wait until the VPC interfaces of deleted Lambda functions are gone from a security group."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from hyperpod_constructs.nag import acknowledge, acknowledge_provider_framework
from hyperpod_constructs.service_timeouts import set_service_timeout

HANDLER_DIR = Path(__file__).resolve().parent / "lambda_eni_waiter_handler"
RESOURCE_TYPE = "Custom::LambdaEniWaiter"


@dataclass(frozen=True, kw_only=True)
class LambdaEniWaiterProps:
    """Props of :class:`LambdaEniWaiter`."""

    security_group: ec2.ISecurityGroup
    """The group the VPC functions use; the waiter is deleted before it and after the functions."""
    timeout: Duration = field(default_factory=lambda: Duration.minutes(30))
    """How long to wait on delete. Below 55 minutes (ServiceTimeout is this plus 5). Default: 30 minutes."""
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
        seconds = props.timeout.to_seconds()
        if not 60 <= seconds <= 55 * 60:
            raise ValueError(f"timeout must be between 1 and 55 minutes, got {seconds:.0f} seconds")
        super().__init__(scope, construct_id)
        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="LambdaEniWaiter: reads network interfaces")
        # DescribeNetworkInterfaces supports no resource-level permission (service authorization reference).
        role.add_to_policy(iam.PolicyStatement(actions=["ec2:DescribeNetworkInterfaces"], resources=["*"]))
        functions = []
        for name, handler in (("OnEvent", "index.on_event"), ("IsComplete", "index.is_complete")):
            log_group = logs.LogGroup(self, f"{name}Logs", retention=props.log_retention,
                                      removal_policy=RemovalPolicy.DESTROY)
            log_group.grant_write(role)
            functions.append(lambda_.Function(
                self, name, runtime=lambda_.Runtime.PYTHON_3_13, architecture=lambda_.Architecture.ARM_64,
                handler=handler, code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
                timeout=Duration.minutes(1), memory_size=128, role=role, log_group=log_group,
                description=f"LambdaEniWaiter {name}: wait for VPC Lambda interfaces on delete"))
        provider = cr.Provider(
            self, "Provider", on_event_handler=functions[0], is_complete_handler=functions[1],
            query_interval=Duration.seconds(30), total_timeout=props.timeout,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=props.log_retention,
                                    removal_policy=RemovalPolicy.DESTROY))
        self.resource = CustomResource(
            self, "Resource", service_token=provider.service_token, resource_type=RESOURCE_TYPE,
            properties={"SecurityGroupId": props.security_group.security_group_id,
                        "WaitSeconds": str(int(seconds - 60))})
        set_service_timeout(self.resource.node.default_child,  # type: ignore[arg-type]
                            props.timeout.plus(Duration.minutes(5)))
        for dependency in (role, *functions, provider):
            self.resource.node.add_dependency(dependency)
        self._acknowledge(role, provider, functions)

    def _acknowledge(self, role: iam.Role, provider: cr.Provider, functions: list[lambda_.Function]) -> None:
        acknowledge(role, "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    "ec2:DescribeNetworkInterfaces supports no resource-level permission; read-only.")
        acknowledge_provider_framework(provider, functions, in_vpc=False)
