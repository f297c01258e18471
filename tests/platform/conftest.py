"""Session fixtures for the platform tests; the app itself is built by ``platform_harness``."""

from __future__ import annotations

import pytest
from platform_harness import PlatformApp, make_platform_app


@pytest.fixture(scope="session")
def platform_app() -> PlatformApp:
    return make_platform_app()


@pytest.fixture(scope="session")
def platform(platform_app):
    return platform_app.templates["Platform"]


@pytest.fixture(scope="session")
def observability(platform_app):
    return platform_app.templates["Observability"]


@pytest.fixture(scope="session")
def observability_addon(platform_app):
    return platform_app.templates["ObservabilityAddon"]
