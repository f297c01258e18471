"""cdk-nag acknowledgements, next to the constructs they concern.

Every acknowledgement goes through :func:`acknowledge`, which also records it (construct path, rule id,
reason) so a test can re-check each one against the findings cdk-nag reports with acknowledgements off.
Setting the context key :data:`ACKNOWLEDGEMENTS_CONTEXT` to ``"off"`` records without acknowledging: synth
then reports every finding (``tests/infra/test_nag_acknowledgements.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from constructs import IConstruct

#: Context key; ``"off"`` records acknowledgements without applying them.
ACKNOWLEDGEMENTS_CONTEXT = "hyperpod:nag-acknowledgements"


@dataclass(frozen=True, kw_only=True)
class AcknowledgementRecord:
    """One acknowledgement as written in the code."""

    path: str
    """Construct path of the scope (findings on it and its children are covered)."""
    rule_id: str
    reason: str


_RECORDS: list[AcknowledgementRecord] = []


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on ``scope`` (and its children) with the reason it is acceptable."""
    _RECORDS.append(AcknowledgementRecord(path=scope.node.path, rule_id=rule_id, reason=reason))
    if scope.node.try_get_context(ACKNOWLEDGEMENTS_CONTEXT) == "off":
        return
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def recorded_acknowledgements() -> list[AcknowledgementRecord]:
    """Every acknowledgement made in this process so far, in call order."""
    return list(_RECORDS)


def clear_recorded_acknowledgements() -> None:
    _RECORDS.clear()


def acknowledge_provider_framework(scope: IConstruct, provider: IConstruct, handlers: Sequence[IConstruct], *,
                                   in_vpc: bool, vpc_role: IConstruct | None = None) -> None:
    """The findings every aws-cdk-lib ``custom_resources.Provider`` with our own handler functions raises.

    ``scope`` holds the provider and ``handlers``; its Lambda functions other than ``framework-onEvent`` (which
    CloudFormation invokes, so no policy grants it) and other than those of a nested ``EniWaiter`` (it
    acknowledges its own) are invoked by the framework with ``<arn>:*``. ``vpc_role``: the handlers' role,
    when they run in a VPC (``in_vpc``).
    """
    from aws_cdk import Stack
    from aws_cdk import aws_lambda as lambda_

    if in_vpc and vpc_role is not None:
        acknowledge(vpc_role, _IAM4.format("service-role/AWSLambdaVPCAccessExecutionRole"),
                    "The ENI actions Lambda needs to run in a VPC accept no resource scope.")
    acknowledge(provider, _IAM4.format("service-role/AWSLambdaBasicExecutionRole"),
                "Provider framework functions of aws-cdk-lib; the policy only allows writing logs.")
    acknowledge(provider, "AwsSolutions::AwsSolutions-SF1",
                "Waiter state machine of the Provider framework; every poll is logged by the handlers.")
    acknowledge(provider, "AwsSolutions::AwsSolutions-SF2",
                "Waiter state machine of the Provider framework; X-Ray adds nothing to a poll loop.")
    for function in handlers:
        acknowledge(function, "AwsSolutions::AwsSolutions-L1",
                    "Python 3.13 is the project's chosen handler runtime; bump it deliberately.")
    stack = Stack.of(scope)
    for cfn in scope.node.find_all():
        below = cfn.node.path.removeprefix(scope.node.path)
        if (isinstance(cfn, lambda_.CfnFunction) and "EniWaiter" not in below
                and not below.endswith("framework-onEvent/Resource")):
            acknowledge(provider, f"AwsSolutions::AwsSolutions-IAM5[Resource::<{stack.get_logical_id(cfn)}.Arn>:*]",
                        "The Provider framework invokes any version of its own handler functions.")


_IAM4 = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"
