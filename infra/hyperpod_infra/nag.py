"""cdk-nag 3 wiring. Acknowledgements live next to the resource they concern, each with its reason."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_nag(app: cdk.App) -> None:
    """Run the AwsSolutions rule pack on every stack at synth; any unacknowledged finding fails synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on ``scope`` (and its children) with the reason it is acceptable."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))
