"""cdk-nag acknowledgements, next to the constructs they concern.

Every acknowledgement goes through :func:`acknowledge`, which also records it (construct path, rule id,
reason) so a test can re-check each one against the findings cdk-nag reports with acknowledgements off.
Setting the context key :data:`ACKNOWLEDGEMENTS_CONTEXT` to ``"off"`` records without acknowledging: synth
then reports every finding (``tests/infra/test_validation.py``).

Rule ids are always applied in the CDK's namespaced form, ``AwsSolutions::AwsSolutions-IAM5[...]``. cdk-nag 3
drops a finding whose *bare* id (``AwsSolutions-IAM5[...]``) is acknowledged before the CDK ever sees it;
a namespaced id is matched by the CDK itself (the closest acknowledging ancestor wins), which lists the
finding in ``validation-report.json`` under ``suppressedViolations`` with the acknowledgement and its reason.
So one synth yields every finding (``hyperpod_infra.nag.findings_report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import aws_cdk as cdk
from aws_cdk import Stack
from constructs import IConstruct

#: Context key; ``"off"`` records acknowledgements without applying them.
ACKNOWLEDGEMENTS_CONTEXT = "hyperpod:nag-acknowledgements"

#: The cdk-nag pack's plugin name: the namespace the CDK puts before its rule ids.
PACK = "AwsSolutions"


def namespaced(rule_id: str) -> str:
    """``AwsSolutions-L1`` -> ``AwsSolutions::AwsSolutions-L1`` (already namespaced ids are kept)."""
    if rule_id.startswith(f"{PACK}::"):
        return rule_id
    if not rule_id.startswith(f"{PACK}-"):
        raise ValueError(f"cdk-nag rule id {rule_id!r}: expected '{PACK}-<rule>' or '{PACK}::{PACK}-<rule>'")
    return f"{PACK}::{rule_id}"


@dataclass(frozen=True, kw_only=True)
class AcknowledgementRecord:
    """One acknowledgement as written in the code."""

    scope: IConstruct = field(repr=False, compare=False)
    rule_id: str
    reason: str

    @property
    def path(self) -> str:
        """Construct path of the scope (findings on it and its children are covered). Read on demand: a
        jsii round trip per call, which synth has no use for."""
        return self.scope.node.path


_RECORDS: list[AcknowledgementRecord] = []


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on ``scope`` (and its children) with the reason it is acceptable.

    ``rule_id`` may be bare or namespaced; it is applied (and recorded) namespaced, so that the CDK, not
    cdk-nag, matches it and reports the finding as acknowledged.
    """
    acknowledge_many(scope, [(rule_id, reason)])


def acknowledge_many(scope: IConstruct, rules: Sequence[tuple[str, str]]) -> None:
    """:func:`acknowledge` for several ``(rule_id, reason)`` pairs on one scope, in one call to the CDK."""
    records = [AcknowledgementRecord(scope=scope, rule_id=namespaced(rule_id), reason=reason)
               for rule_id, reason in rules]
    _RECORDS.extend(records)
    if scope.node.try_get_context(ACKNOWLEDGEMENTS_CONTEXT) == "off":
        return
    cdk.Validations.of(scope).acknowledge(*(cdk.Acknowledgment(id=r.rule_id, reason=r.reason) for r in records))


def recorded_acknowledgements() -> list[AcknowledgementRecord]:
    """Every acknowledgement made in this process so far, in call order."""
    return list(_RECORDS)


def acknowledge_provider_framework(provider: IConstruct, handlers: Sequence[IConstruct]) -> None:
    """The findings every aws-cdk-lib ``custom_resources.Provider`` with our own handler functions raises.

    ``handlers``: our functions (``onEvent``, and ``isComplete`` when the provider polls). The framework
    invokes them and, when it polls, its own ``framework-isComplete`` and ``framework-onTimeout`` functions
    (from a waiter state machine) with ``<arn>:*``; ``framework-onEvent`` is invoked by CloudFormation, so no
    policy grants it. A function missed here fails synth as an unacknowledged finding, and one that does not
    exist fails the stale acknowledgement test.
    """
    polling = [f for name in ("framework-isComplete", "framework-onTimeout")
               if (f := provider.node.try_find_child(name)) is not None]
    stack = Stack.of(provider)
    rules = [(managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"),
              "Provider framework functions of aws-cdk-lib; the policy only allows writing logs.")]
    if polling:
        rules += [
            ("AwsSolutions::AwsSolutions-SF1",
             "Waiter state machine of the Provider framework; every poll is logged by the handlers."),
            ("AwsSolutions::AwsSolutions-SF2",
             "Waiter state machine of the Provider framework; X-Ray adds nothing to a poll loop."),
        ]
    rules += [(f"AwsSolutions::AwsSolutions-IAM5[Resource::<{stack.get_logical_id(_cfn(f))}.Arn>:*]",
               "The Provider framework invokes any version of its own handler functions.")
              for f in [*handlers, *polling]]
    acknowledge_many(provider, rules)


def managed_policy_finding(policy: str) -> str:
    """The finding id of an AWS-managed policy attached to a role: ``service-role/AWSLambdaBasicExecutionRole``
    -> ``AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/...]``."""
    return f"AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]"


def _cfn(function: IConstruct) -> cdk.CfnElement:
    """The ``AWS::Lambda::Function`` of an L2 function."""
    child = function.node.default_child
    assert isinstance(child, cdk.CfnElement), function.node.path
    return child


