"""The arrows between our packages point one way (README "Layout"), checked on the source with an AST walk of
every module, so an import inside a function (a lazy import) counts too:

    app.py            -> core, infra
    hyperpod_mainjob  -> core, infra, k8s
    hyperpod_dpd      -> core, analysis      (runs the main job as a subprocess, by module name)
    hyperpod_analysis -> core
    hyperpod_k8s      -> core
    hyperpod_infra    -> core, constructs
    hyperpod_constructs -> nothing of ours   (its Lambda handlers' hyperpod_core imports are bundled, see below)
    hyperpod_core     -> nothing but itself

``hyperpod_core`` is plain Python: no CDK, cdk8s, constructs, Typer, Rich or Kubernetes client; boto3/botocore
only in the modules that run where boto3 is all there is (the Lambda-side cleanup and EKS client, the
benchmark runner in its pod).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_core.bundle import imported_by

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Package -> its source folder.
PACKAGES = {
    "hyperpod_core": REPO_ROOT / "core" / "hyperpod_core",
    "hyperpod_constructs": REPO_ROOT / "constructs" / "hyperpod_constructs",
    "hyperpod_infra": REPO_ROOT / "infra" / "hyperpod_infra",
    "hyperpod_k8s": REPO_ROOT / "k8s" / "hyperpod_k8s",
    "hyperpod_analysis": REPO_ROOT / "analysis" / "hyperpod_analysis",
    "hyperpod_dpd": REPO_ROOT / "cli" / "hyperpod_dpd",
    "hyperpod_mainjob": REPO_ROOT / "mainjob" / "hyperpod_mainjob",
}
#: Which of our packages each may import (besides itself).
ALLOWED = {
    "hyperpod_core": set(),
    "hyperpod_constructs": set(),
    "hyperpod_infra": {"hyperpod_core", "hyperpod_constructs"},
    "hyperpod_k8s": {"hyperpod_core"},
    "hyperpod_analysis": {"hyperpod_core"},
    "hyperpod_dpd": {"hyperpod_core", "hyperpod_analysis"},
    "hyperpod_mainjob": {"hyperpod_core", "hyperpod_infra", "hyperpod_k8s"},
    "app": {"hyperpod_core", "hyperpod_infra"},
}
#: Third-party packages the core never imports: the apps' frameworks.
NOT_IN_CORE = {"aws_cdk", "cdk8s", "cdk8s_plus_33", "constructs", "cdk_nag", "jsii", "typer", "rich", "kubernetes"}
#: The core modules that may import boto3/botocore (they run where the runtime provides it).
BOTO_IN_CORE = ("hyperpod_core.cleanup", "hyperpod_core.eks", "hyperpod_core.bench_runner",
                "hyperpod_core.stack_status")
#: The Lambda handlers that import core modules; ``hyperpod_core.bundle`` copies those into their assets.
BUNDLING_HANDLERS = (
    REPO_ROOT / "constructs" / "hyperpod_constructs" / "endpoint_janitor_handler" / "index.py",
    REPO_ROOT / "constructs" / "hyperpod_constructs" / "node_readiness_handler" / "index.py",
    REPO_ROOT / "constructs" / "hyperpod_constructs" / "adopted_log_groups_handler" / "index.py",
)
#: What the AWS Lambda Python runtime provides besides the standard library: the SDK for Python ("Building Lambda
#: functions with Python") and urllib3, which botocore requires (its metadata: ``urllib3>=1.25.4,!=2.2.0,<3``) and
#: imports to send every request (``botocore/httpsession.py``).
LAMBDA_RUNTIME = {"boto3", "botocore", "urllib3"}


#: The cdk8s bindings generated from the operator CRD (git-ignored, never edited). The v3.3 module is 1.6 MB of
#: nested type stubs; CPython 3.11.7's ``ast.parse`` of it can fail in a long-lived test worker with
#: "SystemError: AST constructor recursion depth mismatch" (a CPython bug, not a syntax error), so its imports are
#: read line by line: generated code writes each import on its own line.
GENERATED_BINDINGS = REPO_ROOT / "k8s" / "hyperpod_k8s" / "imports"
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([A-Za-z_][\w.]*))", re.MULTILINE)


def imported_modules(path: Path) -> set[str]:
    """Every absolute import of ``path``, wherever it sits (module level, function body, ``if``)."""
    modules: set[str] = set()
    if path.is_relative_to(GENERATED_BINDINGS):
        return {a or b for a, b in _IMPORT_LINE.findall(path.read_text(encoding="utf-8"))}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def _top(module: str) -> str:
    return module.split(".")[0]


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).with_suffix("").parts
    return ".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _is_lambda_asset(folder: Path, path: Path) -> bool:
    """A Lambda handler's folder (``*_handler/``): deployed as an asset, never imported by the package."""
    return any(part.endswith("_handler") for part in path.relative_to(folder).parts[:-1])


def arrow_violations(package: str, folder: Path, allowed: set[str]) -> list[str]:
    """``<file> imports <module>`` for every import of one of our packages that ``package`` may not import."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        if _is_lambda_asset(folder, path):
            continue
        for module in sorted(imported_modules(path)):
            top = _top(module)
            if top.startswith("hyperpod_") and top != package and top not in allowed:
                found.append(f"{path.relative_to(folder.parent)} imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_packages_import_only_the_packages_below_them(package: str) -> None:
    sources = list(PACKAGES[package].rglob("*.py"))
    assert len(sources) >= 3, f"{package}: no sources found under {PACKAGES[package]}"
    assert arrow_violations(package, PACKAGES[package], ALLOWED[package]) == []


def test_the_generated_bindings_are_read_for_imports_too() -> None:
    """The line reading of the generated bindings finds jsii, cdk8s and constructs, and none of ours (the same set
    the AST reading gives, checked when this was written)."""
    (init,) = [p for p in GENERATED_BINDINGS.rglob("__init__.py") if p.parent.name == "inference"]
    modules = imported_modules(init)
    assert {"jsii", "cdk8s", "constructs"} <= {_top(m) for m in modules}
    assert not [m for m in modules if _top(m).startswith("hyperpod_")]


def test_app_py_imports_only_core_and_infra() -> None:
    ours = {_top(m) for m in imported_modules(REPO_ROOT / "app.py") if m.startswith("hyperpod_")}
    assert ours == ALLOWED["app"]


def test_the_core_imports_no_framework_and_boto3_only_where_the_runtime_has_it() -> None:
    folder = PACKAGES["hyperpod_core"]
    found = []
    for path in sorted(folder.rglob("*.py")):
        module = _module_name("hyperpod_core", folder, path)
        for imported in imported_modules(path):
            top = _top(imported)
            boto_allowed = any(module == m or module.startswith(f"{m}.") for m in BOTO_IN_CORE)
            if top in NOT_IN_CORE or (top in LAMBDA_RUNTIME and not boto_allowed):
                found.append(f"{module} imports {imported}")
    assert found == []


def test_building_the_cdk_app_loads_none_of_the_apps_above_it() -> None:
    """At run time too: importing the CDK side (app_builder, every stack) loads no cdk8s, CLI, analysis or
    main-job module."""
    code = ("import sys; import hyperpod_infra.app_builder; bad = sorted(m for m in sys.modules if m.split('.')[0] "
            "in ('hyperpod_k8s', 'hyperpod_dpd', 'hyperpod_analysis', 'hyperpod_mainjob')); assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_walk_sees_lazy_and_conditional_imports(tmp_path: Path) -> None:
    """Guards the walker: imports inside a function body or under ``if TYPE_CHECKING`` are found."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import hyperpod_k8s.charts\n"
                     "def f():\n    from hyperpod_infra.nag import acknowledge\n    import boto3\n")
    assert {"hyperpod_k8s.charts", "hyperpod_infra.nag", "boto3"} <= imported_modules(probe)


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    """Guards the rule: a core module that lazily imports the CLI is a violation; a Lambda asset is not one."""
    folder = tmp_path / "hyperpod_core"
    (folder / "x_handler").mkdir(parents=True)
    (folder / "ok.py").write_text("from hyperpod_core import errors\n")
    (folder / "bad.py").write_text("def f():\n    from hyperpod_dpd import aws\n")
    (folder / "x_handler" / "index.py").write_text("from hyperpod_dpd import aws\n")
    assert arrow_violations("hyperpod_core", folder, set()) == ["hyperpod_core/bad.py imports hyperpod_dpd"]


@pytest.mark.parametrize("handler", BUNDLING_HANDLERS, ids=lambda p: p.parent.name)
def test_what_a_handler_bundles_needs_only_what_the_lambda_runtime_has(handler: Path) -> None:
    """The handler and every module bundled beside it import only the standard library, boto3/botocore and
    modules that are bundled too: the Python Lambda runtime has nothing else."""
    bundled = imported_by(handler)
    assert any(rel.startswith("hyperpod_core/") for rel in bundled), "the handler bundles core modules"
    bundled_modules = {str(Path(rel).with_suffix("")).replace("/", ".").removesuffix(".__init__") for rel in bundled}
    own = {p.stem for p in handler.parent.glob("*.py")}
    found = []
    for source in [handler, *bundled.values()]:
        for module in imported_modules(source):
            top = _top(module)
            if top in sys.stdlib_module_names or top in LAMBDA_RUNTIME or top in own or module in bundled_modules:
                continue
            found.append(f"{source.relative_to(REPO_ROOT)} imports {module}")
    assert found == []


def test_the_other_handlers_import_nothing_of_ours() -> None:
    """A handler that is not bundled with core modules (its construct names none) must import none of ours:
    its asset holds only its own folder. Every ``*_handler/index.py`` is either a bundling one or such."""
    handlers = sorted((REPO_ROOT / "constructs" / "hyperpod_constructs").glob("*_handler/index.py"))
    assert set(BUNDLING_HANDLERS) <= set(handlers) and len(handlers) > len(BUNDLING_HANDLERS)
    found = [f"{h.relative_to(REPO_ROOT)} imports {m}" for h in handlers if h not in BUNDLING_HANDLERS
             for m in sorted(imported_modules(h)) if _top(m).startswith("hyperpod_")]
    assert found == []


def test_bundling_survives_the_ast_depth_bug_by_parsing_on_a_fresh_thread(monkeypatch) -> None:
    """CPython 3.11.7 raised "SystemError: AST constructor recursion depth mismatch" from bundle's ast.parse in a
    long-lived xdist worker (a fresh-clone run of the suite); the retry on a fresh thread gives the same imports."""
    import ast
    import threading

    from hyperpod_core import bundle

    handler = REPO_ROOT / "constructs" / "hyperpod_constructs" / "endpoint_janitor_handler" / "index.py"
    expected = bundle.imported_by(handler)
    real_parse, main = ast.parse, threading.current_thread()
    refused: list[str] = []

    def flaky(*args, **kwargs):  # type: ignore[no-untyped-def]
        if threading.current_thread() is main:
            refused.append(kwargs.get("filename", ""))
            raise SystemError("AST constructor recursion depth mismatch (before=162, after=32)")
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(bundle.ast, "parse", flaky)
    assert bundle.imported_by(handler) == expected and expected
    assert refused, "every parse went through the retry"
