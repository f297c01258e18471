"""Fixtures for the infra tests.

Each stack of ours alone, in a bare app with explicit props and imported stand-ins (:mod:`tests.infra.stand_ins`),
built once per session: what the construct and stack tests read. The default app itself (``stacks``,
``templates``) is synthesized once per session by the root conftest, for the whole-app facts only (the config
reaching each stack, cross-stack references, logical-ID pins, the validators).
"""

from __future__ import annotations

import pytest
from tests.infra.stand_ins import Alone

#: The human admin ``cluster_alone["ClusterWithAdmin"]`` names (an IAM role ARN, AWS's documentation account).
ADMIN_PRINCIPAL_ARN = "arn:aws:iam::123456789012:role/Admin"


@pytest.fixture(scope="session")
def cluster_alone() -> dict[str, Alone]:
    """``ClusterStack`` alone: ``"Cluster"`` names no human admin (the deploy must), ``"ClusterWithAdmin"`` names
    :data:`ADMIN_PRINCIPAL_ARN`; one synth for both."""
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    app = stand_ins.app()
    given = stand_ins.given(app)
    built = {name: stand_ins.cluster_stack(app, name, given=given, admin_principal_arn=admin)
             for name, admin in (("Cluster", None), ("ClusterWithAdmin", ADMIN_PRINCIPAL_ARN))}
    return {name: Alone(stack, Template.from_stack(stack), given) for name, stack in built.items()}


@pytest.fixture(scope="session")
def hyperpod_alone() -> Alone:
    """``HyperPodStack`` alone (:func:`tests.infra.stand_ins.hyperpod_stack`)."""
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    app = stand_ins.app()
    given = stand_ins.given(app)
    stack = stand_ins.hyperpod_stack(app, "HyperPod", given=given)
    return Alone(stack, Template.from_stack(stack), given)


@pytest.fixture(scope="session")
def network_alone() -> Alone:
    """``NetworkStack`` alone with one NAT and no interface endpoint (:func:`tests.infra.stand_ins.network_stack`)."""
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    stack = stand_ins.network_stack(stand_ins.app(), "Network")
    return Alone(stack, Template.from_stack(stack), None)


@pytest.fixture(scope="session")
def hyperpod_template(templates):
    """The default app's HyperPod template (the replacement guard pins what it holds)."""
    return templates["HyperPod"]


def only(template, resource_type: str) -> tuple[str, dict]:
    """The single resource of ``resource_type``: ``(logical id, resource)``."""
    found = template.find_resources(resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))

