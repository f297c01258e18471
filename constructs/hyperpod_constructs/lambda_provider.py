"""The one way this package builds a Lambda-backed custom resource of the Provider framework.

``EndpointJanitor``, ``NodeReadiness``, ``LambdaEniWaiter`` and ``GrafanaDashboards`` share one skeleton:
handler code staged from a folder, functions on :data:`RUNTIME` with a log group each, a ``cr.Provider`` with
its own log group, and a custom resource whose ``ServiceTimeout`` is the provider's total wait plus
:data:`SERVICE_TIMEOUT_MARGIN`. The helpers here build each piece *into the caller's scope*, with the IDs the
constructs have always used (``<Id>Logs``, ``Provider``, ``ProviderLogs``, ``Resource``): construct IDs are a
contract, so there is no extra nesting level.

Handler code: :func:`handler_code` copies a handler folder, the modules it imports from elsewhere (``{path
inside the asset: source file}``, e.g. ``hyperpod_infra.bundle.imported_by(...)``) and pure-Python
distributions from the installed environment (:func:`distribution_files`) into one folder named after the
SHA-256 of what it holds, so the same content is staged once and the asset hash is a function of the content.
The folders live in a private folder of the synthesizing process under the temp folder (0.2-1.4 MB), removed
when that process exits (:func:`_stage_root`).
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import distribution
from pathlib import Path

from aws_cdk import CfnResource, CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from hyperpod_constructs.nag import acknowledge, acknowledge_provider_framework, managed_policy_finding
from hyperpod_constructs.service_timeouts import set_service_timeout

RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The runtime of every handler of this package. The newest Python runtime aws-cdk-lib knows, so cdk-nag's
AwsSolutions-L1 (latest runtime of the family) holds with no acknowledgement; an aws-cdk-lib that knows a newer
one fails synth on L1 until this line is bumped, deliberately. The handlers need the standard library and
boto3 (both in the runtime) and the bundled pure-Python grafana-client."""
ARCHITECTURE = lambda_.Architecture.ARM_64
SERVICE_TIMEOUT_MARGIN = Duration.minutes(5)
"""``ServiceTimeout`` of a polling custom resource is its total wait plus this: time for the framework's own
functions and the response once the wait is over (and below CloudFormation's hour, aws/aws-cdk#33837)."""
_SKIP_PARTS = ("__pycache__",)


# -- validation -------------------------------------------------------------------------------------------

def check_timeout(timeout: Duration, *, minimum: Duration, maximum: Duration) -> None:
    """``timeout`` lies in ``[minimum, maximum]`` (bounds given in whole minutes)."""
    seconds = timeout.to_seconds()
    if not minimum.to_seconds() <= seconds <= maximum.to_seconds():
        raise ValueError(f"timeout must be between {minimum.to_seconds() / 60:g} and {maximum.to_seconds() / 60:g} "
                         f"minutes, got {seconds:.0f} seconds")


def check_query_interval(query_interval: Duration, *, timeout: Duration, minimum: Duration) -> None:
    """At least ``minimum`` and at most a quarter of ``timeout``, so the wait polls four times or more."""
    interval, limit = query_interval.to_seconds(), timeout.to_seconds() / 4
    if not minimum.to_seconds() <= interval <= limit:
        raise ValueError(f"query_interval must be between {minimum.to_seconds():.0f} seconds and timeout/4 "
                         f"({limit:.0f} s), got {interval:.0f} s")


def handler_wait_seconds(total_timeout: Duration, query_interval: Duration) -> str:
    """The handler's own deadline (a ``WaitSeconds`` property): two polls, and at least a minute, before the
    framework's, so the user sees the handler's message (what is missing) instead of the framework's bare
    "Operation timed out"."""
    margin = max(2 * query_interval.to_seconds(), 60)
    return str(int(total_timeout.to_seconds() - margin))


# -- handler code -----------------------------------------------------------------------------------------

def distribution_files(names: Iterable[str]) -> dict[str, Path]:
    """``{path inside the asset: installed file}`` of the distributions ``names`` (no network): their modules,
    and of each ``.dist-info`` only ``METADATA``, ``LICENSE`` and ``top_level.txt``.

    Refuses a distribution that ships compiled modules: they are built for this machine, not the runtime.
    """
    files: dict[str, Path] = {}
    for name in names:
        dist = distribution(name)
        for file in dist.files or ():
            source = Path(str(dist.locate_file(file)))
            parts = Path(str(file)).parts
            if (parts[0].startswith("..") or parts[0] in ("test", "tests") or "__pycache__" in parts
                    or source.suffix == ".pyc"):
                continue
            if source.suffix in (".so", ".pyd"):
                raise ValueError(f"{name} ships compiled module {file}; only pure-Python distributions can be "
                                 "bundled for the function")
            if ".dist-info" in parts[0] and parts[-1] not in ("METADATA", "LICENSE", "top_level.txt"):
                continue
            files[str(Path(str(file)))] = source
    return files


def _handler_files(handler_dir: Path) -> dict[str, Path]:
    return {str(p.relative_to(handler_dir)): p for p in sorted(handler_dir.rglob("*"))
            if p.is_file() and not set(p.relative_to(handler_dir).parts) & set(_SKIP_PARTS) and p.suffix != ".pyc"}


def _digest(files: Mapping[str, Path]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel].read_bytes()).digest())
    return digest.hexdigest()


#: This process's staging folder (:func:`_stage_root`) and the process that made it.
_stage: tuple[Path, int] | None = None


def _stage_root() -> Path:
    """This process's staging folder: made on first use under the temp folder, private (``mkdtemp``: mode 0700,
    a name nobody could have planted), and removed when the process exits, by the exit handler registered here
    (a normal exit and the entry points' :func:`hyperpod_core.teardown.fast_exit` both run it).

    The CDK copies the staged code into the cloud assembly (``cdk.out/asset.<hash>``) when a function is
    created, so the folder is not needed once the synth is over; nothing stays in the temp folder. (With asset
    staging off, ``aws:cdk:disable-asset-staging`` as in the tests' fixtures, the assembly points at this
    folder instead, so it is good only while the process runs.) A forked child (it inherits the handler) does
    not remove its parent's folder."""
    global _stage
    if _stage is None or _stage[1] != os.getpid() or not _stage[0].is_dir():
        root = Path(tempfile.mkdtemp(prefix="hyperpod-lambda-code-"))
        _stage = (root, os.getpid())
        atexit.register(_remove_stage, root, os.getpid())
    return _stage[0]


def _remove_stage(root: Path, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


#: What the Lambda Python runtime provides besides the standard library (Lambda developer guide, "Building Lambda
#: functions with Python": the runtime includes the AWS SDK for Python), with urllib3, which botocore requires
#: (``urllib3>=1.25.4,!=2.2.0,<3`` in its metadata) and imports for every request (``botocore/httpsession.py``).
RUNTIME_PACKAGES = frozenset({"boto3", "botocore", "urllib3"})


def _imports_outside_try(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports, except imports guarded by ``try`` (optional ones)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Try):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name.split(".")[0] for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.add(child.module.split(".")[0])
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def check_imports_provided(files: Mapping[str, Path], checked: Iterable[str]) -> None:
    """Every module the files ``checked`` (paths inside the asset) import is in the standard library, in the
    runtime (:data:`RUNTIME_PACKAGES`) or in the asset itself: a handler whose bundle misses a module would
    synthesize and then fail on its first import, in the middle of a stack operation."""
    provided = {Path(rel).parts[0].removesuffix(".py") for rel in files}
    for rel in checked:
        missing = sorted(_imports_outside_try(files[rel]) - set(sys.stdlib_module_names) - RUNTIME_PACKAGES
                         - provided - {"__future__"})
        if missing:
            raise ValueError(f"{rel} imports {', '.join(missing)}, which neither the Lambda runtime nor the asset "
                             "provides: bundle the modules it needs")


def staged_handler(handler_dir: Path, modules: Mapping[str, Path] | None = None,
                   distributions: Sequence[str] = ()) -> Path:
    """The folder holding ``handler_dir``'s files, ``modules`` (``{path inside the asset: file}``) and the
    files of ``distributions``; one path is never filled from two different files.

    Folders are named after the SHA-256 of their content and reused (within the process) only while what they
    hold still hashes to their name: a folder changed or emptied since (by hand, by a temp cleaner) is staged
    again, so the asset is always a function of the sources."""
    files = _handler_files(handler_dir)
    for rel, source in {**(modules or {}), **distribution_files(distributions)}.items():
        if rel in files and files[rel] != source:
            raise ValueError(f"bundled file {rel} ({source}) would replace {files[rel]} in the asset of "
                             f"{handler_dir.name}")
        files[rel] = source
    check_imports_provided(files, [rel for rel in files if rel.endswith(".py") and rel not in
                                   distribution_files(distributions)])
    digest = _digest(files)
    root = _stage_root()
    target = root / digest[:32]
    if target.is_dir() and _digest(_handler_files(target)) == digest:
        return target
    tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=root))
    for rel, source in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, tmp / rel)
    shutil.rmtree(target, ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:  # another thread staged the same content at the same moment
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def handler_code(handler_dir: Path, modules: Mapping[str, Path] | None = None,
                 distributions: Sequence[str] = ()) -> lambda_.Code:
    """``lambda_.Code`` of :func:`staged_handler` (bytecode a run left there is not part of the asset)."""
    return lambda_.Code.from_asset(str(staged_handler(handler_dir, modules, distributions)),
                                   exclude=[*_SKIP_PARTS, "*.pyc"])


# -- resources --------------------------------------------------------------------------------------------

def handler_function(scope: Construct, construct_id: str, *, code: lambda_.Code, handler: str, description: str,
                     timeout: Duration, memory_size: int, log_retention: logs.RetentionDays,
                     role: iam.IRole | None = None, vpc: ec2.IVpc | None = None,
                     vpc_subnets: ec2.SubnetSelection | None = None,
                     security_group: ec2.ISecurityGroup | None = None,
                     depends_on: Sequence[IDependable] = ()) -> lambda_.Function:
    """Function ``construct_id`` on :data:`RUNTIME` and :data:`ARCHITECTURE`, logging to its own log group
    ``<construct_id>Logs`` (``log_retention``, deleted with the stack).

    ``role``: the function's role, granted writes to the log group. Default: the function makes its own
    (``AWSLambdaBasicExecutionRole``, acknowledged here). ``depends_on``: what the function is created after
    and deleted before (a :class:`LambdaEniWaiter`'s resource, for a function in a VPC)."""
    log_group = logs.LogGroup(scope, f"{construct_id}Logs", retention=log_retention,
                              removal_policy=RemovalPolicy.DESTROY)
    if role is not None:
        log_group.grant_write(role)
    function = lambda_.Function(
        scope, construct_id, runtime=RUNTIME, architecture=ARCHITECTURE, handler=handler, code=code,
        timeout=timeout, memory_size=memory_size, role=role, log_group=log_group, vpc=vpc,
        vpc_subnets=vpc_subnets, security_groups=[security_group] if security_group else None,
        description=description)
    if role is None:
        acknowledge(function, managed_policy_finding("service-role/AWSLambdaBasicExecutionRole"),
                    "The function's own role; the managed policy only allows writing its logs.")
    for dependency in depends_on:
        function.node.add_dependency(dependency)
    return function


def polling_functions(scope: Construct, *, name: str, purpose: str, code: lambda_.Code, role: iam.IRole,
                      timeout: Duration, memory_size: int, log_retention: logs.RetentionDays,
                      vpc: ec2.IVpc | None = None, vpc_subnets: ec2.SubnetSelection | None = None,
                      security_group: ec2.ISecurityGroup | None = None,
                      depends_on: Sequence[IDependable] = ()) -> tuple[lambda_.Function, lambda_.Function]:
    """``OnEvent`` (``index.on_event``) and ``IsComplete`` (``index.is_complete``) of a polling provider,
    described as ``<name> <id>: <purpose>``; the other arguments as :func:`handler_function`'s."""
    on_event, is_complete = [
        handler_function(scope, construct_id, code=code, handler=handler, description=f"{name} {construct_id}: "
                         f"{purpose}", timeout=timeout, memory_size=memory_size, log_retention=log_retention,
                         role=role, vpc=vpc, vpc_subnets=vpc_subnets, security_group=security_group,
                         depends_on=depends_on)
        for construct_id, handler in (("OnEvent", "index.on_event"), ("IsComplete", "index.is_complete"))]
    return on_event, is_complete


def provider(scope: Construct, *, on_event: lambda_.IFunction, log_retention: logs.RetentionDays,
             is_complete: lambda_.IFunction | None = None, query_interval: Duration | None = None,
             total_timeout: Duration | None = None) -> cr.Provider:
    """``Provider`` with its log group ``ProviderLogs``, and the framework's cdk-nag findings acknowledged
    (:func:`hyperpod_constructs.nag.acknowledge_provider_framework`). ``is_complete``, ``query_interval`` and
    ``total_timeout`` as ``cr.Provider``'s; default: no polling."""
    framework = cr.Provider(
        scope, "Provider", on_event_handler=on_event, is_complete_handler=is_complete,
        query_interval=query_interval, total_timeout=total_timeout,
        log_group=logs.LogGroup(scope, "ProviderLogs", retention=log_retention,
                                removal_policy=RemovalPolicy.DESTROY))
    acknowledge_provider_framework(framework, [on_event, *([is_complete] if is_complete is not None else [])])
    return framework


def custom_resource(scope: Construct, *, provider: cr.Provider, resource_type: str,
                    properties: Mapping[str, object], total_timeout: Duration | None = None,
                    depends_on: Sequence[IDependable] = ()) -> CustomResource:
    """``Resource`` served by ``provider``, created after (and deleted before) ``depends_on``.

    ``total_timeout``: the provider's, when it polls; ``ServiceTimeout`` is then this plus
    :data:`SERVICE_TIMEOUT_MARGIN`. Default: none, the ``ServiceTimeouts`` aspect's default applies."""
    resource = CustomResource(scope, "Resource", service_token=provider.service_token, resource_type=resource_type,
                              properties=dict(properties))
    if total_timeout is not None:
        default_child = resource.node.default_child
        assert isinstance(default_child, CfnResource), resource.node.path
        set_service_timeout(default_child, total_timeout.plus(SERVICE_TIMEOUT_MARGIN))
    for dependency in depends_on:
        resource.node.add_dependency(dependency)
    return resource
