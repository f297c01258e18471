"""The one base of the Provider-framework custom resources (hyperpod_constructs.lambda_provider).

Sources: CloudFormation ``AWS::CloudFormation::CustomResource`` ``ServiceTimeout`` (1-3600 s, default 3600;
aws/aws-cdk#33837 for the hour a dead handler holds a stack); the Lambda developer guide, "Lambda runtimes"
(identifier ``python3.14``, Amazon Linux 2023, arm64); cdk-nag's AwsSolutions-L1 (a function's runtime must be
the latest of its family that aws-cdk-lib knows, ``lib/rules/lambda/LambdaLatestVersion.js``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template
from constructs import Construct

from hyperpod_constructs import lambda_provider
from hyperpod_constructs.endpoint_janitor import EndpointJanitor
from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiter
from hyperpod_constructs.node_readiness import NodeReadiness

LOG_RETENTION = logs.RetentionDays.ONE_WEEK


class Probe(Construct):
    """A caller of the base: a polling waiter and a single-function provider, built into its own scope."""

    def __init__(self, scope: Construct, construct_id: str, *, handler_dir: Path) -> None:
        super().__init__(scope, construct_id)
        from aws_cdk import aws_iam as iam

        role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        code = lambda_provider.handler_code(handler_dir)
        self.functions = lambda_provider.polling_functions(
            self, name="Probe", purpose="wait", code=code, role=role, timeout=cdk.Duration.minutes(1),
            memory_size=128, log_retention=LOG_RETENTION)
        provider = lambda_provider.provider(
            self, on_event=self.functions[0], is_complete=self.functions[1], log_retention=LOG_RETENTION,
            query_interval=cdk.Duration.seconds(30), total_timeout=cdk.Duration.minutes(20))
        self.resource = lambda_provider.custom_resource(
            self, provider=provider, resource_type="Custom::Probe", properties={"A": "1"},
            total_timeout=cdk.Duration.minutes(20), depends_on=[role])

        single = Construct(self, "Single")
        self.single = lambda_provider.handler_function(
            single, "Handler", code=code, handler="index.on_event", description="probe",
            timeout=cdk.Duration.seconds(10), memory_size=128, log_retention=LOG_RETENTION)
        lambda_provider.custom_resource(
            single, provider=lambda_provider.provider(single, on_event=self.single, log_retention=LOG_RETENTION),
            resource_type="Custom::Single", properties={})


@pytest.fixture(scope="module")
def handler_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("handler")
    (folder / "index.py").write_text("def on_event(event, context=None):\n    return {}\n")
    return folder


@pytest.fixture(scope="module")
def probe(handler_dir: Path) -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(context={"aws:cdk:disable-asset-staging": True}), "ProbeStack")
    built = Probe(stack, "Probe", handler_dir=handler_dir)
    return {"probe": built, "template": Template.from_stack(stack)}


# -- what the base builds ---------------------------------------------------------------------------------

def test_children_are_built_in_the_callers_scope_with_the_contract_ids(probe: dict[str, Any]) -> None:
    """No nesting level of the base's own: the IDs the four constructs always used sit in the caller."""
    ids = {c.node.id for c in probe["probe"].node.children}
    assert {"OnEventLogs", "OnEvent", "IsCompleteLogs", "IsComplete", "ProviderLogs", "Provider",
            "Resource"} <= ids
    assert {c.node.id for c in probe["probe"].node.find_child("Single").node.children} == {
        "HandlerLogs", "Handler", "ProviderLogs", "Provider", "Resource"}


def test_service_timeout_is_the_total_wait_plus_five_minutes(probe: dict[str, Any]) -> None:
    probe["template"].has_resource_properties("Custom::Probe", {"ServiceTimeout": str((20 + 5) * 60), "A": "1"})


def test_a_provider_that_does_not_poll_leaves_the_service_timeout_to_the_aspect(probe: dict[str, Any]) -> None:
    (single,) = probe["template"].find_resources("Custom::Single").values()
    assert "ServiceTimeout" not in single["Properties"]


def test_functions_run_the_one_runtime_on_arm_and_log_to_their_own_group(probe: dict[str, Any]) -> None:
    functions = {k: v["Properties"] for k, v in probe["template"].find_resources("AWS::Lambda::Function").items()
                 if v["Properties"].get("Handler", "").startswith("index.")}
    assert len(functions) == 3
    for name, props in functions.items():
        assert props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"], name
        # Logical IDs are the path and an 8-digit hash: ProbeOnEvent1234abcd logs to ProbeOnEventLogs5678abcd.
        assert props["LoggingConfig"]["LogGroup"]["Ref"].startswith(name[:-8] + "Logs"), name
    groups = probe["template"].find_resources("AWS::Logs::LogGroup")
    assert len(groups) == 5  # three functions and two providers
    assert all(g["Properties"]["RetentionInDays"] == 7 and g["DeletionPolicy"] == "Delete" for g in groups.values())


def test_a_given_role_may_write_the_log_group_and_no_role_means_the_functions_own(probe: dict[str, Any]) -> None:
    built = probe["probe"]
    stack = cdk.Stack.of(built)
    role_id = stack.get_logical_id(built.node.find_child("Role").node.default_child)
    for function in built.functions:
        assert stack.resolve(function.role.role_arn) == {"Fn::GetAtt": [role_id, "Arn"]}
    assert built.single.role is not None and built.single.role.node.scope is built.single


def test_the_handler_deadline_is_two_polls_and_at_least_a_minute_before_the_frameworks() -> None:
    assert lambda_provider.handler_wait_seconds(cdk.Duration.minutes(30), cdk.Duration.seconds(30)) == "1740"
    assert lambda_provider.handler_wait_seconds(cdk.Duration.minutes(45), cdk.Duration.minutes(1)) == "2580"
    assert lambda_provider.handler_wait_seconds(cdk.Duration.minutes(10), cdk.Duration.seconds(10)) == "540"


# -- one validation each ----------------------------------------------------------------------------------

def test_a_timeout_on_the_bounds_is_accepted() -> None:
    for minutes in (5, 50):
        lambda_provider.check_timeout(cdk.Duration.minutes(minutes), minimum=cdk.Duration.minutes(5),
                                      maximum=cdk.Duration.minutes(50))


@pytest.mark.parametrize("timeout", [cdk.Duration.seconds(299), cdk.Duration.seconds(3001)])
def test_fails_when_the_timeout_is_out_of_range(timeout: cdk.Duration) -> None:
    seconds = int(timeout.to_seconds())
    with pytest.raises(ValueError, match=f"^timeout must be between 5 and 50 minutes, got {seconds} seconds$"):
        lambda_provider.check_timeout(timeout, minimum=cdk.Duration.minutes(5), maximum=cdk.Duration.minutes(50))


@pytest.mark.parametrize("interval", [cdk.Duration.seconds(9), cdk.Duration.seconds(151)])
def test_fails_when_the_query_interval_is_out_of_range(interval: cdk.Duration) -> None:
    seconds = int(interval.to_seconds())
    with pytest.raises(ValueError, match=rf"^query_interval must be between 10 seconds and timeout/4 \(150 s\), "
                                         rf"got {seconds} s$"):
        lambda_provider.check_query_interval(interval, timeout=cdk.Duration.minutes(10),
                                             minimum=cdk.Duration.seconds(10))


def test_fails_when_a_bundled_file_would_replace_a_handler_file(handler_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "index.py"
    other.write_text("# another entry point\n")
    with pytest.raises(ValueError, match=r"^bundled file index\.py \(.*\) would replace .*index\.py"):
        lambda_provider.staged_handler(handler_dir, {"index.py": other})


def test_fails_when_a_bundled_distribution_ships_compiled_modules() -> None:
    """pydantic-core (installed with pydantic) is a compiled extension: built for this machine, not Lambda."""
    with pytest.raises(ValueError, match=r"^pydantic_core ships compiled module .*\.so; only pure-Python"):
        lambda_provider.distribution_files(["pydantic_core"])


# -- handler code -----------------------------------------------------------------------------------------

def test_staged_code_is_named_by_its_content_and_holds_the_bundled_files(handler_dir: Path, tmp_path: Path) -> None:
    module = tmp_path / "shared.py"
    module.write_text("VALUE = 1\n")
    (handler_dir / "__pycache__").mkdir(exist_ok=True)
    (handler_dir / "__pycache__" / "index.cpython-311.pyc").write_bytes(b"\0")
    first = lambda_provider.staged_handler(handler_dir, {"pkg/shared.py": module})
    assert sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file()) == ["index.py", "pkg/shared.py"]
    assert lambda_provider.staged_handler(handler_dir, {"pkg/shared.py": module}) == first
    module.write_text("VALUE = 2\n")
    assert lambda_provider.staged_handler(handler_dir, {"pkg/shared.py": module}) != first


def test_a_staged_folder_changed_since_is_staged_again(handler_dir: Path, tmp_path: Path) -> None:
    """The reused folder must still hold what its name says: a file changed or removed there (by hand, by a temp
    cleaner, by another user) must not reach the asset."""
    module = tmp_path / "shared.py"
    module.write_text("VALUE = 1\n")
    first = lambda_provider.staged_handler(handler_dir, {"pkg/shared.py": module})
    (first / "index.py").write_text("import os  # planted\n")
    (first / "pkg" / "shared.py").unlink()
    again = lambda_provider.staged_handler(handler_dir, {"pkg/shared.py": module})
    assert (again / "index.py").read_text() == (handler_dir / "index.py").read_text()
    assert (again / "pkg" / "shared.py").read_text() == "VALUE = 1\n"


def test_the_staging_folder_is_private_to_its_user(handler_dir: Path) -> None:
    folder = lambda_provider.staged_handler(handler_dir).parent
    assert folder.name.startswith("hyperpod-lambda-code-") and folder.stat().st_mode & 0o077 == 0
    assert folder.stat().st_uid == os.getuid()


def test_a_distribution_brings_its_modules_and_only_its_license_metadata() -> None:
    files = lambda_provider.distribution_files(["idna"])
    assert "idna/__init__.py" in files and files["idna/__init__.py"].is_file()
    dist_info = {Path(rel).name for rel in files if ".dist-info" in rel}
    assert dist_info <= {"METADATA", "LICENSE", "top_level.txt"} and "METADATA" in dist_info
    assert not [rel for rel in files if rel.endswith(".pyc") or "__pycache__" in rel]


# -- the one runtime across the synthesized app -----------------------------------------------------------

def _functions_by_owner(stack: cdk.Stack) -> list[tuple[Construct, str, str]]:
    """(direct scope of the L2 function, its path, its runtime) for every Lambda function of the stack."""
    found = []
    for node in stack.node.find_all():
        if isinstance(node, lambda_.CfnFunction):
            function = node.node.scope
            found.append((function.node.scope, function.node.path, stack.resolve(node.runtime)))
    return found


def test_every_function_of_ours_in_every_stack_of_the_default_config_runs_the_one_runtime(stacks) -> None:
    """Ours: every function whose direct scope is a construct of hyperpod_constructs (the base builds into the
    caller's scope). The others are aws-cdk-lib's own (Provider framework, kubectl handler, bucket deployment,
    auto-delete objects), whose runtimes aws-cdk-lib chooses."""
    ours = [(type(owner), path, runtime)
            for stack in stacks.all() for owner, path, runtime in _functions_by_owner(stack)
            if type(owner).__module__.startswith("hyperpod_constructs.")]
    assert {owner for owner, _, _ in ours} >= {EndpointJanitor, NodeReadiness, LambdaEniWaiter}
    assert len(ours) >= 6  # two per provider: janitor, node readiness, the kubectl handler's ENI waiter
    assert {path: runtime for _, path, runtime in ours if runtime != "python3.14"} == {}
    assert lambda_provider.RUNTIME.name == "python3.14"


def test_the_one_runtime_is_the_latest_python_aws_cdk_lib_knows() -> None:
    """So AwsSolutions-L1 holds without an acknowledgement (cdk-nag compares with ``Runtime.ALL``)."""
    pythons = [r.name for r in lambda_.Runtime.ALL if r.family == lambda_.RuntimeFamily.PYTHON]
    latest = max(pythons, key=lambda name: tuple(int(p) for p in name.removeprefix("python").split(".")))
    assert lambda_provider.RUNTIME.name == latest


@pytest.mark.parametrize(("minutes", "ok"), [(54, True), (55, False), (0.5, False)])
def test_eni_waiter_timeout_keeps_its_service_timeout_below_the_hour(minutes: float, ok: bool) -> None:
    """ServiceTimeout is the wait plus 5 minutes and must stay below CloudFormation's hour (3600 s is the default
    a dead handler would hold the stack for): 54 minutes is the longest wait."""
    from aws_cdk import aws_ec2 as ec2

    from hyperpod_constructs.lambda_eni_waiter import LambdaEniWaiterProps

    stack = cdk.Stack(cdk.App(context={"aws:cdk:disable-asset-staging": True}))
    sg = ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-12345678")
    props = LambdaEniWaiterProps(security_group=sg, timeout=cdk.Duration.seconds(minutes * 60))
    if ok:
        LambdaEniWaiter(stack, "Waiter", props=props)
    else:
        with pytest.raises(ValueError, match="timeout must be between 1 and 54 minutes"):
            LambdaEniWaiter(stack, "Waiter", props=props)


def test_a_handler_without_the_modules_it_imports_is_refused() -> None:
    """The janitor's entry point imports the cleanup logic from hyperpod_runtime: staged without it, the function
    would synthesize and then fail on import in the middle of a stack delete."""
    from hyperpod_constructs.endpoint_janitor import HANDLER_DIR
    from hyperpod_infra.bundle import imported_by

    with pytest.raises(ValueError, match=r"index\.py imports hyperpod_runtime, which neither the Lambda runtime nor "
                                         "the asset provides"):
        lambda_provider.staged_handler(HANDLER_DIR, {})
    staged = lambda_provider.staged_handler(HANDLER_DIR, imported_by(HANDLER_DIR / "index.py"))
    assert (staged / "hyperpod_runtime" / "cleanup.py").is_file()


def test_an_optional_import_guarded_by_try_is_not_required(tmp_path: Path) -> None:
    handler = tmp_path / "h"
    handler.mkdir()
    (handler / "index.py").write_text("try:\n    import yaml\nexcept ImportError:\n    yaml = None\nimport json\n")
    lambda_provider.staged_handler(handler)
    (handler / "index.py").write_text("import yaml\n")
    with pytest.raises(ValueError, match=r"index\.py imports yaml"):
        lambda_provider.staged_handler(handler)
