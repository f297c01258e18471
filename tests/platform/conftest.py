"""The platform and observability stacks alone (root conftest: ``platform_alone``, ``observability_alone``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def platform(platform_alone):
    return platform_alone["Platform"].template


@pytest.fixture(scope="session")
def observability(observability_alone):
    return observability_alone.template


@pytest.fixture(scope="session")
def observability_addon(platform_alone):
    return platform_alone["ObservabilityAddon"].template
