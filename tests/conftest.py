"""Shared fixtures. Each synthesis happens once per test session; tests only read the results.

jsii reads its environment once, at the first import of aws_cdk/constructs/cdk8s, so the variables that
make synth fast and quiet are set here, before any test module imports them.
"""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")  # cfn-lint runs once, in its own test
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

from pathlib import Path

import pytest

from hyperpod_core.config import Config, load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "default.yaml"


@pytest.fixture(scope="session")
def default_config() -> Config:
    return load_config(DEFAULT_CONFIG_PATH)


@pytest.fixture(scope="session")
def default_config_dict() -> dict:
    import yaml

    return yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())


@pytest.fixture(scope="session")
def stacks(default_config: Config):
    """Every stack of the default config, built once (no nag, no asset staging) for assertion tests."""
    import aws_cdk as cdk

    from hyperpod_infra.app_builder import build

    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    return build(app, default_config)


@pytest.fixture(scope="session")
def templates(stacks) -> dict:
    """``{construct id: aws_cdk.assertions.Template}`` for every stack of the default config."""
    from aws_cdk.assertions import Template

    return {stack.node.id: Template.from_stack(stack) for stack in stacks.all()}
