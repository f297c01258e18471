"""cdk-nag 3 wiring. Acknowledgements live next to the resource they concern, each with its reason
(:func:`hyperpod_constructs.nag.acknowledge`, re-exported here for the stacks)."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from hyperpod_constructs.nag import acknowledge

__all__ = ["acknowledge", "add_nag"]


def add_nag(app: cdk.App) -> None:
    """Run the AwsSolutions rule pack on every stack at synth; any unacknowledged finding fails synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
