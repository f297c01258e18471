"""cdk-nag acknowledgements, next to the constructs they concern.

Every acknowledgement goes through :func:`acknowledge`, which also records it (construct path, rule id,
reason) so a test can re-check each one against the findings cdk-nag reports with acknowledgements off.
Setting the context key :data:`ACKNOWLEDGEMENTS_CONTEXT` to ``"off"`` records without acknowledging: synth
then reports every finding (``tests/infra/test_nag_acknowledgements.py``).
"""

from __future__ import annotations

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
