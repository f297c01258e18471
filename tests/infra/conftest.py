"""Fixtures for the infra tests: the default app synthesized once per session.

``stacks`` and ``templates`` mirror the root conftest so that these tests do not depend on it.
"""

from __future__ import annotations

import pytest

from hyperpod_infra.config import Config


@pytest.fixture(scope="session")
def stacks(default_config: Config):
    """Every stack of the default config, built once (no nag, no asset staging)."""
    import aws_cdk as cdk

    from hyperpod_infra.app_builder import build

    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    return build(app, default_config)


@pytest.fixture(scope="session")
def templates(stacks) -> dict:
    """``{construct id: aws_cdk.assertions.Template}`` for every stack of the default config."""
    from aws_cdk.assertions import Template

    return {stack.node.id: Template.from_stack(stack) for stack in stacks.all()}


@pytest.fixture(scope="session")
def cluster_template(templates):
    return templates["Cluster"]


@pytest.fixture(scope="session")
def hyperpod_template(templates):
    return templates["HyperPod"]


def only(template, resource_type: str) -> tuple[str, dict]:
    """The single resource of ``resource_type``: ``(logical id, resource)``."""
    found = template.find_resources(resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))
