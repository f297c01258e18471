"""Log groups a service creates by itself under a fixed name, adopted instead of created (see the handler).

``AWS::Logs::LogGroup`` with a fixed ``LogGroupName`` fails the next create of that name once the service has
re-created the group (EKS's service-linked role re-creates ``/aws/eks/<cluster>/cluster`` from late deliveries
after the cluster is deleted: terraform-aws-modules/terraform-aws-eks #2446, #2763; aws-ia/terraform-aws-eks-
blueprints #376), and with it every retry after a rollback. Each group here is a custom resource instead: on
Create and Update it creates the group if missing and sets its retention; on Delete, ordered by the caller
after whatever writes to it is gone, it deletes it (missing is fine). One function and one provider serve all
the groups of a stack.

A Delete deletes only while the stack is being deleted (or a failed first create rolls back): CloudFormation
also sends Delete during an update (a resource removed or replaced, a changed logical ID, a failed update that
added it rolled back), and the live group must survive that (the handler reads the stack's status,
``cloudformation:DescribeStacks`` on this stack only). Every resource's logical ID is pinned by the caller
(``logical_id``), so a refactor of construct paths never turns into such a Delete.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import ArnFormat, Aws, CfnResource, CustomResource, Duration, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_constructs import lambda_provider
from hyperpod_constructs.inference_iam import nag_resource
from hyperpod_constructs.nag import acknowledge

HANDLER_DIR = Path(__file__).resolve().parent / "adopted_log_groups_handler"
RESOURCE_TYPE = "Custom::AdoptedLogGroup"
#: Days of the retention periods this package uses (CloudWatch Logs ``PutRetentionPolicy`` values).
_RETENTION_DAYS = {
    logs.RetentionDays.ONE_DAY: 1, logs.RetentionDays.THREE_DAYS: 3, logs.RetentionDays.FIVE_DAYS: 5,
    logs.RetentionDays.ONE_WEEK: 7, logs.RetentionDays.TWO_WEEKS: 14, logs.RetentionDays.ONE_MONTH: 30,
    logs.RetentionDays.TWO_MONTHS: 60, logs.RetentionDays.THREE_MONTHS: 90, logs.RetentionDays.SIX_MONTHS: 180,
    logs.RetentionDays.ONE_YEAR: 365,
}


def retention_days(retention: logs.RetentionDays) -> int:
    """The day count of ``retention`` (jsii's Python enum carries the member's name, not its number)."""
    if retention not in _RETENTION_DAYS:
        raise ValueError(f"retention must be one of {sorted(_RETENTION_DAYS.values())} days, got {retention.name}")
    return _RETENTION_DAYS[retention]


@dataclass(frozen=True, kw_only=True)
class LegacyLogGroup:
    """The ``AWS::Logs::LogGroup`` an earlier release of the template held for the same name (see
    ``index.check_legacy``)."""

    logical_id: str
    retained: str
    """``"true"`` while the template keeps that resource with ``DeletionPolicy: Retain``, else ``"false"``
    (a token: ``Fn::If`` on the stack's condition)."""


@dataclass(frozen=True, kw_only=True)
class AdoptedLogGroupOptions:
    """One group, for :meth:`AdoptedLogGroups.adopt`."""

    log_group_name: str
    """May be a token (e.g. built from a cluster's ARN)."""
    logical_id: str
    """The resource's CloudFormation logical ID, pinned (``override_logical_id``): a changed logical ID makes
    CloudFormation create the new resource and delete the old one, so it must not follow the construct path.
    Required; for a resource already deployed, the ID it was deployed with."""
    retention: logs.RetentionDays
    delete_on_destroy: bool = True
    """Delete the group when the resource is deleted with its stack (a Delete CloudFormation sends during an
    update keeps it). Default: yes."""
    legacy: LegacyLogGroup | None = None
    """Guard the upgrade from a template that held the group as a plain log group. Default: none."""
    iam_name_pattern: str | None = None
    """The name pattern the handler's IAM names, for a ``log_group_name`` that is a token (``<prefix>*``).
    Default: the name itself."""


@dataclass(frozen=True, kw_only=True)
class AdoptedLogGroupsProps:
    """Props of :class:`AdoptedLogGroups`."""

    bundled_modules: Mapping[str, Path]
    """Modules the handler imports, copied beside it: ``{path inside the asset: source file}`` (the stack-status
    check, ``hyperpod_infra.bundle.imported_by(HANDLER_DIR / "index.py")``). Required: the handler folder holds
    only the entry point."""
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """Retention of the handler's and the provider's own log groups. Default: one month."""


class AdoptedLogGroups(Construct):
    """The handler, its role and provider; :meth:`adopt` and :meth:`delete_on_destroy` add the resources.

    Order is the caller's: make whatever writes into a group depend on its resource (CloudFormation then
    deletes the writer first and the group after it), e.g. ``cfn_cluster.node.add_dependency(resource)``.
    """

    def __init__(self, scope: Construct, construct_id: str, *, props: AdoptedLogGroupsProps) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="AdoptedLogGroups: creates, sets the retention of and deletes log groups")
        self.function = lambda_provider.handler_function(
            self, "Handler", code=lambda_provider.handler_code(HANDLER_DIR, props.bundled_modules),
            handler="index.on_event",
            description="AdoptedLogGroups: create-if-missing, retention, delete after the writer",
            timeout=Duration.minutes(2), memory_size=128, log_retention=props.log_retention, role=self.role)
        self.provider = lambda_provider.provider(self, on_event=self.function, log_retention=props.log_retention)
        self._describes = False
        self._reads_stack_status = False

    def _grant_stack_status(self) -> None:
        """A Delete deletes only while this stack is being deleted: the handler reads its status (once per role)."""
        if not self._reads_stack_status:
            self.role.add_to_policy(iam.PolicyStatement(actions=["cloudformation:DescribeStacks"],
                                                        resources=[Stack.of(self).stack_id]))
            self._reads_stack_status = True

    def _resource(self, construct_id: str, logical_id: str, properties: Mapping[str, object]) -> CustomResource:
        resource = lambda_provider.custom_resource(
            Construct(self, construct_id), provider=self.provider, resource_type=RESOURCE_TYPE,
            properties=properties, depends_on=(self.role,))
        default_child = resource.node.default_child
        assert isinstance(default_child, CfnResource), resource.node.path
        default_child.override_logical_id(logical_id)
        return resource

    def _log_group_arns(self, name_or_pattern: str) -> list[str]:
        """The group's ARN as the service authorization reference writes it and as CloudWatch Logs reports it
        (``DescribeLogGroups`` ``arn`` ends in ``:*``); the latter's wildcard acknowledged here."""
        stack = Stack.of(self)
        arn = stack.format_arn(service="logs", resource="log-group", resource_name=name_or_pattern,
                               arn_format=ArnFormat.COLON_RESOURCE_NAME)
        for resource in (f"{arn}:*", arn) if "*" in name_or_pattern else (f"{arn}:*",):
            acknowledge(self.role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack.resolve(resource))}]",
                        "Log groups of one name (or of one deployment's name prefix), in this account and region; "
                        "':*' is how CloudWatch Logs writes a log group's ARN.")
        return [arn, f"{arn}:*"]

    def adopt(self, construct_id: str, options: AdoptedLogGroupOptions) -> CustomResource:
        """The resource adopting ``options.log_group_name``; its physical ID is the name."""
        actions = ["logs:CreateLogGroup", "logs:PutRetentionPolicy"]
        if options.delete_on_destroy:
            actions.append("logs:DeleteLogGroup")
            self._grant_stack_status()
        if options.iam_name_pattern is None and Token.is_unresolved(options.log_group_name):
            raise ValueError("iam_name_pattern is required when log_group_name is a token, got None")
        self.role.add_to_policy(iam.PolicyStatement(actions=actions, resources=self._log_group_arns(
            options.iam_name_pattern or options.log_group_name)))
        properties = {"LogGroupName": options.log_group_name,
                      "RetentionInDays": str(retention_days(options.retention)),
                      "DeleteOnDelete": "true" if options.delete_on_destroy else "false"}
        if options.legacy is not None:
            self.role.add_to_policy(iam.PolicyStatement(actions=["cloudformation:DescribeStackResource"],
                                                        resources=[Aws.STACK_ID]))
            properties.update(LegacyLogicalId=options.legacy.logical_id, LegacyRetained=options.legacy.retained)
        return self._resource(construct_id, options.logical_id, properties)

    def delete_on_destroy(self, construct_id: str, *, prefix: str, logical_id: str) -> CustomResource:
        """A resource that does nothing on Create and Update and deletes every group named ``prefix*`` on the
        stack's Delete (for groups whose full name is not known before their writer exists). ``logical_id``: as
        :attr:`AdoptedLogGroupOptions.logical_id`."""
        self.role.add_to_policy(iam.PolicyStatement(actions=["logs:DeleteLogGroup"],
                                                    resources=self._log_group_arns(f"{prefix}*")))
        self._grant_stack_status()
        if not self._describes:
            # DescribeLogGroups has no resource type (service authorization reference): '*' only.
            self.role.add_to_policy(iam.PolicyStatement(actions=["logs:DescribeLogGroups"], resources=["*"]))
            acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                        "logs:DescribeLogGroups supports no resource-level permission; it lists names only.")
            self._describes = True
        return self._resource(construct_id, logical_id, {"DeletePrefix": prefix})
