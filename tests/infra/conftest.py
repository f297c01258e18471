"""Fixtures for the infra tests; the default app itself (``stacks``, ``templates``) is synthesized once per
session by the root conftest."""

from __future__ import annotations

import pytest


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
