"""Shared fixtures. Each synthesis happens once per test session; tests only read the results.

jsii reads its environment once, at the first import of aws_cdk/constructs/cdk8s, so the variables that
make synth fast and quiet are set here, before any test module imports them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")  # cfn-lint runs once, in its own test
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# moto's EC2 backend otherwise builds ~1,300 default AMIs for every region it is asked about (0.2 s each time, in
# every moto test); no test reads an AMI (moto/settings.py, ec2_load_default_amis).
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
# Environments (``--env NAME``, ``init``) live in the checkout's envs/ by default; the tests keep theirs in an envs/
# of the folder they run in, never the checkout's (tests of the default unset it).
os.environ.setdefault("HYPERPOD_ENVS_DIR", "envs")

from pathlib import Path

import pytest
from tests import matrix
from tests.checkout import CHECKOUT_LAYOUT, copy_checkout, in_the_checkouts_layout

from hyperpod_core.config import Config, load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "default.yaml"


def _share_botocore_data_loader() -> None:
    """One botocore data loader for the whole test process, as a long-lived boto3 session has.

    The command line makes a session per command, and every new session's loader parses the service models,
    endpoints.json and partitions.json again (about 0.2 s per client: most of a moto test's time). Sharing the
    loader is what botocore does for every client of one session (``Session.register_component("data_loader",
    ...)``); the models and what the clients do with them are unchanged."""
    import botocore.session

    made: dict[str | None, object] = {}
    create = botocore.session.create_loader

    class SearchPaths(list):  # type: ignore[type-arg]
        """boto3 appends its own data folder to the loader of every session it creates
        (``boto3.session.Session._setup_loader``): once is what a fresh loader holds."""

        def append(self, path: str) -> None:  # type: ignore[override]
            if path not in self:
                super().append(path)

    def shared(search_path_string: str | None = None):  # type: ignore[no-untyped-def]
        if search_path_string not in made:
            loader = create(search_path_string)
            loader._search_paths = SearchPaths(loader.search_paths)
            made[search_path_string] = loader
        return made[search_path_string]

    botocore.session.create_loader = shared  # type: ignore[assignment]


_share_botocore_data_loader()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that reads a matrix synthesis (``synthesize_matrix`` in its fixture closure, see
    :mod:`tests.matrix`) joins the matrix's xdist group, so each config is synthesized on one worker only; one
    parametrized with a matrix config takes its strict xfail when :data:`tests.matrix.KNOWN_FAILURES` lists it."""
    for item in items:
        if "synthesize_matrix" not in getattr(item, "fixturenames", ()):
            continue
        if config.pluginmanager.hasplugin("xdist"):
            item.add_marker(pytest.mark.xdist_group(matrix.MATRIX_GROUP))
        params = getattr(getattr(item, "callspec", None), "params", {})
        name = next((n for n in map(matrix.matrix_param, params.values()) if n), None)
        reason = name and matrix.known_failure(name, getattr(item, "originalname", item.name))
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


#: Commands that resolve a config only to name its folder, reading nothing in it: on the checkout's layout they give
#: the same result whatever a developer left there.
NAMES_THE_FOLDER_ONLY = frozenset({"hyperpod_dpd.commands.validate", "hyperpod_dpd.commands.plan"})


@pytest.fixture(scope="session", autouse=True)
def _no_test_reads_the_checkouts_layout() -> Iterator[None]:
    """Guard: every entry point finds a config's folder through ``hyperpod_core.environment`` (``resolve``,
    ``folder_of``); in this process, resolving to the real checkout's layout fails the test, naming the fix, unless
    the caller only names the folder (:data:`NAMES_THE_FOLDER_ONLY`). Session-wide, so fixtures are guarded too.
    (Child processes are not seen: their tests name a config outside the checkout or explicit folders.)"""
    from hyperpod_core import environment

    resolve, folder_of = environment.resolve, environment.folder_of

    def refuse(folder: Path, caller: str) -> None:
        if caller not in NAMES_THE_FOLDER_ONLY and in_the_checkouts_layout(folder):
            pytest.fail(f"{caller} resolved a config to {folder.resolve()}, the checkout's own layout (a developer's "
                        f"{', '.join(CHECKOUT_LAYOUT)}): run it in the checkout_copy fixture (tests/conftest.py), on "
                        "a config outside the checkout or with explicit paths", pytrace=False)

    def guarded_resolve(*args: Any, **kwargs: Any) -> environment.Environment:
        found = resolve(*args, **kwargs)
        refuse(found.workdir, sys._getframe(1).f_globals.get("__name__", "?"))
        return found

    def guarded_folder_of(config_path: Path) -> tuple[Path, str | None]:
        found = folder_of(config_path)
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        if caller != environment.__name__:  # resolve's own call: judged by its caller
            refuse(found[0], caller)
        return found

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(environment, "resolve", guarded_resolve)
        mp.setattr(environment, "folder_of", guarded_folder_of)
        yield


@pytest.fixture
def default_config_copy(tmp_path: Path) -> Path:
    """``config/default.yaml`` copied outside the checkout (``<tmp>/default-config/default.yaml``): its folder is
    ``default.out/`` beside it, so a command run on it reads nothing a developer synthesized or deployed."""
    path = tmp_path / "default-config" / "default.yaml"
    path.parent.mkdir()
    shutil.copy(DEFAULT_CONFIG_PATH, path)
    return path


@pytest.fixture
def checkout_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout of the test's own (:func:`tests.checkout.copy_checkout`), the current folder, with
    ``hyperpod_core.paths.CHECKOUT`` pointing at it. A test that runs a command on ``config/default.yaml`` (whose
    folder is the checkout's root) runs it here, independent of what the developer synthesized or deployed."""
    from hyperpod_core import paths

    root = copy_checkout(tmp_path / "checkout")
    monkeypatch.setattr(paths, "CHECKOUT", root)
    monkeypatch.chdir(root)
    return root


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


# --- stacks alone: bare apps with explicit props and stand-ins (tests/infra/stand_ins.py), for the construct and
# stack tests of every folder; the default app above is for whole-app facts only ------------------------------


@pytest.fixture(scope="session")
def observability_alone(default_config: Config):
    """``ObservabilityStack`` alone: the workspace, the default config's alert rules and alert manager (to the
    stack's topic only: no e-mail, no existing topic), no Grafana workspace."""
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    from hyperpod_core.telemetry.alertmanager import alert_manager_definition
    from hyperpod_core.telemetry.alerts import alert_rule_groups
    from hyperpod_infra.stacks.observability_stack import ObservabilityStack, ObservabilityStackProps

    stack = ObservabilityStack(stand_ins.app(), "Observability", env=stand_ins.env(), props=ObservabilityStackProps(
        workspace_alias=stand_ins.WORKSPACE_ALIAS, alert_rule_groups=alert_rule_groups(default_config.specs()),
        alert_manager_definition=lambda arns: alert_manager_definition(default_config.region, arns)))
    return stand_ins.Alone(stack, Template.from_stack(stack), None)


@pytest.fixture(scope="session")
def platform_alone():
    """``PlatformStack`` (``"Platform"``: a created model bucket, KEDA scoped to the given workspace, the janitor
    outside the VPC) and ``ObservabilityAddonStack`` (``"ObservabilityAddon"``: waiting for a node of the pools
    ``prefill`` and ``decode``) alone, given the stand-ins and a workspace (``"Given"``); one app, one synth."""
    from aws_cdk.assertions import Template
    from tests.infra import stand_ins

    app = stand_ins.app()
    given = stand_ins.given(app)
    built = {"Platform": stand_ins.platform_stack(app, "Platform", given=given),
             "ObservabilityAddon": stand_ins.observability_addon_stack(app, "ObservabilityAddon", given=given)}
    alone = {name: stand_ins.Alone(stack, Template.from_stack(stack), given) for name, stack in built.items()}
    return {**alone, "Given": stand_ins.Alone(given.stack, Template.from_stack(given.stack), given)}


# --- the config matrix: every config under config/, synthesized once per session (tests/matrix.py) --------


@pytest.fixture(scope="session")
def matrix_dir(tmp_path_factory) -> Path:
    """Where each matrix config's ``cdk.out/`` and ``dist/`` go: ``<matrix_dir>/<config stem>/``."""
    return tmp_path_factory.mktemp("matrix")


@pytest.fixture(scope="session")
def synthesize_matrix(matrix_dir: Path):
    """``synthesize_matrix(name)``: the :class:`tests.matrix.Synthesized` of one matrix config, built on first
    use and then kept for the session."""
    cache: dict[str, matrix.Synthesized] = {}

    def get(name: str) -> matrix.Synthesized:
        if name not in cache:
            path = matrix.MATRIX_CONFIGS[matrix.MATRIX_NAMES.index(name)]
            cache[name] = matrix.synthesize(path, matrix_dir / path.stem)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def matrix_all(synthesize_matrix) -> list[matrix.Synthesized]:
    """Every matrix config synthesized (for the checks that run once over all of them: cfn-lint, checkov)."""
    return [synthesize_matrix(name) for name in matrix.MATRIX_NAMES]


@pytest.fixture(scope="session", params=matrix.MATRIX_NAMES)
def synthesized(request, synthesize_matrix) -> matrix.Synthesized:
    """One matrix config per test instance (parametrized over every config under config/)."""
    return synthesize_matrix(request.param)


#: config/examples/two-models.yaml: two endpoints on one cluster, each role pinned to its instance group (issue 34).
TWO_MODELS = "two-models.yaml"


@pytest.fixture(scope="session")
def two_models_config() -> Config:
    """The two-models example's config (no synthesis)."""
    return load_config(matrix.MATRIX_CONFIGS[matrix.MATRIX_NAMES.index(TWO_MODELS)])


@pytest.fixture(scope="session")
def two_models(synthesize_matrix) -> matrix.Synthesized:
    """The two-models example through both apps, the matrix's one synthesis of it (its tests join the matrix's
    worker, tests/matrix.py), for the checks of its manifests: ``.dist`` holds each endpoint's folder and the
    deployment's dashboards, ``.manifests`` every document."""
    return synthesize_matrix(TWO_MODELS).require_manifests()
