"""The arrows between our packages point one way (README "Layout"), checked on the source with an AST walk of
every module, so an import inside a function (a lazy import) or under ``if TYPE_CHECKING`` counts too:

    app.py            -> core, infra
    hyperpod_mainjob  -> core, infra, k8s
    hyperpod_dpd      -> core, analysis, runtime  (runs the main job as a subprocess, by module name; sweep runs
                                                   the janitor's logic)
    hyperpod_analysis -> core, runtime       (the report reads the benchmark runner's pod-log format)
    hyperpod_k8s      -> core, runtime       (the benchmark chart ships the runner's source in a ConfigMap)
    hyperpod_infra    -> core, constructs    (its bundler finds the runtime modules a handler imports on disk)
    hyperpod_constructs -> nothing of ours   (its Lambda handlers import only runtime modules, bundled beside them)
    hyperpod_core     -> nothing but itself
    hyperpod_runtime  -> nothing but itself

``hyperpod_core`` is plain Python: no CDK, cdk8s, constructs, Typer, Rich or Kubernetes client, no boto3.
``hyperpod_runtime`` runs in a Lambda function or the benchmark pod: the standard library and boto3/botocore (and
urllib3, which botocore requires) only.
And no import circle between two files anywhere (:func:`import_cycles`).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from hyperpod_infra.bundle import imported_by, parse_source

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Package -> its source folder.
PACKAGES = {
    "hyperpod_core": REPO_ROOT / "core" / "hyperpod_core",
    "hyperpod_runtime": REPO_ROOT / "runtime" / "hyperpod_runtime",
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
    "hyperpod_runtime": set(),
    "hyperpod_constructs": set(),
    "hyperpod_infra": {"hyperpod_core", "hyperpod_constructs"},
    "hyperpod_k8s": {"hyperpod_core", "hyperpod_runtime"},
    "hyperpod_analysis": {"hyperpod_core", "hyperpod_runtime"},
    "hyperpod_dpd": {"hyperpod_core", "hyperpod_analysis", "hyperpod_runtime"},
    "hyperpod_mainjob": {"hyperpod_core", "hyperpod_infra", "hyperpod_k8s"},
    "app": {"hyperpod_core", "hyperpod_infra"},
}
#: Third-party packages the core never imports: the apps' frameworks, and boto3 (the code that calls AWS where boto3
#: is all there is lives in hyperpod_runtime; the command line has its own clients).
NOT_IN_CORE = {"aws_cdk", "cdk8s", "cdk8s_plus_33", "constructs", "cdk_nag", "jsii", "typer", "rich", "kubernetes",
               "boto3", "botocore"}
#: The Lambda handlers that import runtime modules; ``hyperpod_infra.bundle`` copies those into their assets.
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
    for node in ast.walk(parse_source(path)):
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


def test_the_core_imports_no_framework_and_no_boto3() -> None:
    folder = PACKAGES["hyperpod_core"]
    found = [f"{_module_name('hyperpod_core', folder, path)} imports {imported}"
             for path in sorted(folder.rglob("*.py")) for imported in sorted(imported_modules(path))
             if _top(imported) in NOT_IN_CORE]
    assert found == []


def runtime_violations(folder: Path) -> list[str]:
    """``<module> imports <module>`` for every import of a runtime module that is neither the standard library,
    boto3/botocore/urllib3 (:data:`LAMBDA_RUNTIME`) nor the runtime itself."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for imported in sorted(imported_modules(path)):
            top = _top(imported)
            if top not in sys.stdlib_module_names and top not in LAMBDA_RUNTIME and top != folder.name:
                found.append(f"{_module_name(folder.name, folder, path)} imports {imported}")
    return found


def test_the_runtime_needs_only_what_a_lambda_function_or_the_benchmark_pod_has() -> None:
    """Every runtime module may be bundled into a Lambda asset or shipped into the benchmark pod: the standard
    library, boto3/botocore and urllib3 (the Lambda Python runtime's; the runner's pod installs genai-bench[aws],
    whose boto3 brings them) and the runtime itself, nothing else of ours or anyone's."""
    assert runtime_violations(PACKAGES["hyperpod_runtime"]) == []


def test_a_runtime_module_that_imports_the_core_is_reported(tmp_path: Path) -> None:
    """Guards the rule above: the core is not on a Lambda's path."""
    folder = tmp_path / "hyperpod_runtime"
    folder.mkdir()
    (folder / "ok.py").write_text("import json\nimport boto3\nfrom hyperpod_runtime.eks import kube\n")
    (folder / "bad.py").write_text("def f():\n    from hyperpod_core.names import GROUP\n")
    assert runtime_violations(folder) == ["hyperpod_runtime.bad imports hyperpod_core.names"]


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
    """The handler and every module bundled beside it import only the standard library, boto3/botocore/urllib3 and
    modules that are bundled too: the Python Lambda runtime has nothing else."""
    bundled = imported_by(handler)
    assert any(rel.startswith("hyperpod_runtime/") for rel in bundled), "the handler bundles runtime modules"
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


def test_what_runs_in_a_lambda_or_a_pod_lives_in_the_runtime() -> None:
    """Every module bundled beside a handler, and the runner the benchmark chart ships in a ConfigMap, is a runtime
    module: the core holds none of the code that runs elsewhere."""
    from hyperpod_k8s.benchmark.props import RUNNER_FILE

    shipped = [RUNNER_FILE, *(path for h in BUNDLING_HANDLERS for path in imported_by(h).values())]
    assert [str(p) for p in shipped if not p.resolve().is_relative_to(PACKAGES["hyperpod_runtime"])] == []
    assert {p.name for p in shipped} >= {"bench_runner.py", "cleanup.py", "stack_status.py", "kube.py", "token.py"}


def test_the_handlers_import_only_runtime_modules_of_ours() -> None:
    """A bundling handler imports runtime modules only (what the bundler can put beside it); a handler that is not
    bundled (its construct names none) imports none of ours: its asset holds only its own folder. Every
    ``*_handler/*.py`` is either."""
    handlers = sorted((REPO_ROOT / "constructs" / "hyperpod_constructs").glob("*_handler/index.py"))
    assert set(BUNDLING_HANDLERS) <= set(handlers) and len(handlers) > len(BUNDLING_HANDLERS)
    found = [f"{p.relative_to(REPO_ROOT)} imports {m}" for h in handlers for p in sorted(h.parent.glob("*.py"))
             for m in sorted(imported_modules(p)) if _top(m).startswith("hyperpod_")
             and (h not in BUNDLING_HANDLERS or _top(m) != "hyperpod_runtime")]
    assert found == []


def test_bundling_survives_the_ast_depth_bug_by_parsing_on_a_fresh_thread(monkeypatch) -> None:
    """CPython 3.11.7 raised "SystemError: AST constructor recursion depth mismatch" from bundle's ast.parse in a
    long-lived xdist worker (a fresh-clone run of the suite); the retry on a fresh thread gives the same imports."""
    import ast
    import threading

    from hyperpod_infra import bundle

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


# --- no import circle between files ------------------------------------------------------------------------

def _sources() -> dict[str, Path]:
    """``{module name: file}`` of every module of our packages (``__init__`` as the package; the generated bindings
    are not ours) and ``app``: the files whose imports make the graph."""
    modules = {_module_name(package, folder, path): path for package, folder in PACKAGES.items()
               for path in folder.rglob("*.py") if not path.is_relative_to(GENERATED_BINDINGS)}
    return {**modules, "app": REPO_ROOT / "app.py"}


def file_imports(path: Path, module: str, known: Iterable[str]) -> set[str]:
    """The modules of ``known`` that ``path`` (module ``module``) imports, wherever the import sits (module level,
    a function body, ``if TYPE_CHECKING``). ``from P import n`` names the module ``P.n`` when that is one, else ``P``
    (its ``__init__``); ``import P.Q`` names ``P.Q``; relative imports are resolved from ``module``."""
    known = set(known)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse_source(path)):
        if isinstance(node, ast.Import):
            candidates = [[a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            candidates = [[f"{base}.{a.name}", base] for a in node.names]
        else:
            continue
        for names in candidates:
            for name in names:  # the first that is a module of ours, else its nearest package
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name:
                    if name != module:
                        found.add(name)
                    break
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def test_no_import_circle_between_files() -> None:
    """STYLE "Layout": no import circle between files, counting lazy and ``TYPE_CHECKING`` imports: each names what
    it needs from below it. A circle is reported with every import that ties it."""
    sources = _sources()
    graph = {m: file_imports(path, m, sources) for m, path in sources.items()}
    cycles = import_cycles(graph)
    assert [[f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c] for c in cycles] == []


def test_the_circle_finder_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    """Guards the finder: a circle closed by an import inside a function or under ``if TYPE_CHECKING`` is one;
    a package that imports its own modules is none (importing ``pkg.mod`` names ``pkg.mod``, not ``pkg``)."""
    files = {"pkg/__init__.py": "from pkg.a import A\n", "pkg/a.py": "from pkg import b\nA = 1\n",
             "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\n",
             "pkg/c.py": "def f():\n    from pkg.a import A\n", "pkg/d.py": "from . import a\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = {"pkg": "pkg/__init__.py", "pkg.a": "pkg/a.py", "pkg.b": "pkg/b.py", "pkg.c": "pkg/c.py",
               "pkg.d": "pkg/d.py"}
    graph = {m: file_imports(tmp_path / rel, m, modules) for m, rel in modules.items()}
    assert graph["pkg.d"] == {"pkg.a"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


# --- the seam: consumers take one endpoint, never the whole Config (issue 34 item 5) ---------------------------

#: The composition roots: the edges that load the config and loop over its endpoints (STYLE principle 15). Paths
#: relative to the repository; a trailing ``*.py`` means every module of that folder.
COMPOSITION_ROOTS = ("app.py", "infra/hyperpod_infra/app_builder.py", "k8s/hyperpod_k8s/main.py",
                     "mainjob/hyperpod_mainjob/job.py", "cli/hyperpod_dpd/commands/*.py")
#: The config package defines ``Config`` and ``EndpointSpec``: it may read its own fields.
CONFIG_PACKAGE = "core/hyperpod_core/config/"
#: Attributes that reach an endpoint through the whole config: the fleet itself (``endpoints``) and the
#: one-endpoint shorthand ``endpoint`` (it raises on a fleet of several; hyperpod_core.config.model).
ENDPOINT_READS = frozenset({"endpoint", "endpoints"})
#: Calls whose result is a ``Config``.
CONFIG_FACTORIES = frozenset({"Config", "load_config", "parse_config"})
#: Most functions outside the composition roots and the config package that may take a Config or read its endpoints.
#: The functions outside the composition roots that may take the whole Config, by ``<module>:<function>``: each is
#: about the deployment, not one endpoint (its stack names, its outputs file, its deploy-time inputs, its stamp).
SEAM_ALLOWED = frozenset({
    "core/hyperpod_core/environment.py:stamp",
    "core/hyperpod_core/inputs.py:stack_names",
    "core/hyperpod_core/inputs.py:check_ownership",
    "core/hyperpod_core/inputs.py:eks_cluster_arn",
    "core/hyperpod_core/inputs.py:read_outputs_file",
    "core/hyperpod_core/inputs.py:resolve_inputs",
    "core/hyperpod_core/inputs.py:resolve_in_folder",
})


def _annotation_names_config(annotation: ast.expr | None) -> bool:
    """``Config``, ``hyperpod_core.config.Config``, ``"Config"``, ``Config | None``, ``Optional[Config]``..."""
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(part.strip(" '\"").split(".")[-1] == "Config"
               for part in re.split(r"[|\[\],]", text.replace("Optional", "")))


def _untyped(annotation: ast.expr | None) -> bool:
    return annotation is None or ast.unparse(annotation).strip("'\"").split(".")[-1] == "Any"


def _is_config(node: ast.expr, names: set[str]) -> bool:
    """``node`` evaluates to a Config: a name known to hold one, an attribute called ``config`` (an Environment's,
    a Deployment's ``env.config``: the one name the code gives the loaded config), or a call that makes one."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr == "config"
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value if isinstance(func, ast.Attribute) else None
        return name in CONFIG_FACTORIES or (isinstance(owner, ast.Name) and owner.id == "Config")
    return False


def _own_nodes(scope: ast.AST) -> tuple[list[ast.AST], list[ast.AST]]:
    """The nodes of ``scope``'s body that belong to it (lambdas and comprehensions included), and the functions and
    classes nested in it (each a scope of its own)."""
    own: list[ast.AST] = []
    nested: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            nested.append(node)
            continue
        own.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return own, nested


def _targets(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _targets(t)]
    return []


def _function_hits(fn: ast.FunctionDef | ast.AsyncFunctionDef, outer: set[str]) -> tuple[list[str], set[str]]:
    """Why ``fn`` counts (empty: it does not), and the names holding a Config inside it."""
    names = set(outer)
    why: list[str] = []
    args = fn.args
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, *(x for x in (args.vararg, args.kwarg) if x)]:
        if _annotation_names_config(a.annotation) or (a.arg == "config" and _untyped(a.annotation)):
            names.add(a.arg)
            why.append(f"takes a Config ({a.arg})")
        else:
            names.discard(a.arg)
    own, _ = _own_nodes(fn)
    changed = True
    while changed:  # names bound to a Config, also through another name (c = e.config; d = c)
        changed = False
        for node in own:
            found: list[str] = []
            if isinstance(node, ast.AnnAssign) and (_annotation_names_config(node.annotation) or (
                    node.value is not None and _is_config(node.value, names))):
                found = _targets(node.target)
            elif isinstance(node, ast.Assign) and _is_config(node.value, names):
                found = [n for t in node.targets for n in _targets(t)]
            elif isinstance(node, ast.NamedExpr) and _is_config(node.value, names):
                found = [node.target.id]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                found = [n for item in node.items if item.optional_vars is not None
                         and _is_config(item.context_expr, names) for n in _targets(item.optional_vars)]
            if set(found) - names:
                names.update(found)
                changed = True
    reads = sorted({f"{ast.unparse(n.value)}.{n.attr}" for n in own if isinstance(n, ast.Attribute)
                    and n.attr in ENDPOINT_READS and isinstance(n.ctx, ast.Load) and _is_config(n.value, names)})
    why += [f"reads {r}" for r in reads]
    return why, names


def seam_hits(path: Path, rel: str) -> list[str]:
    """``<rel>:<line> <function>: <why>`` for every function of the module at ``path`` that takes a Config (its
    annotation, or an untyped/``Any`` parameter called ``config``) or reads ``endpoint``/``endpoints`` of one; nested
    functions are their own (a closure sees its outer function's Config names)."""
    hits: list[str] = []

    def visit(scope: ast.AST, prefix: str, outer: set[str]) -> None:
        _, nested = _own_nodes(scope)
        for node in sorted(nested, key=lambda n: n.lineno):  # type: ignore[attr-defined]
            if isinstance(node, ast.ClassDef):
                visit(node, f"{prefix}{node.name}.", outer)
                continue
            assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            why, names = _function_hits(node, outer)
            if why:
                hits.append(f"{rel}:{node.lineno} {prefix}{node.name}: {'; '.join(why)}")
            visit(node, f"{prefix}{node.name}.", names)

    visit(parse_source(path), "", set())
    return hits


def _is_composition_root(rel: str) -> bool:
    return any(Path(rel).match(root) if root.endswith("*.py") else rel == root for root in COMPOSITION_ROOTS)


def seam(root: Path = REPO_ROOT) -> list[str]:
    """:func:`seam_hits` of every module of our packages but the composition roots, the config package and the
    generated bindings."""
    hits: list[str] = []
    for folder in PACKAGES.values():
        folder = root / folder.relative_to(REPO_ROOT)
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if (_is_composition_root(rel) or rel.startswith(CONFIG_PACKAGE)
                    or path.is_relative_to(root / GENERATED_BINDINGS.relative_to(REPO_ROOT))):
                continue
            hits += seam_hits(path, rel)
    return hits


def test_consumers_take_one_endpoint_not_the_whole_config() -> None:
    """STYLE principle 15 (issue 34 item 5): code that serves, observes, benchmarks or sizes an endpoint takes that
    endpoint's spec (and the cluster facts it needs); only the composition roots hold the whole Config and loop over
    its endpoints. The functions outside them that still take a Config, or read ``endpoint``/``endpoints`` of one,
    are exactly the deployment-level ones of :data:`SEAM_ALLOWED`; a new one fails, named with its line."""
    hits = seam()
    found = {f"{h.split(':', 1)[0]}:{h.split(' ', 2)[1].rstrip(':')}" for h in hits}
    assert found <= SEAM_ALLOWED, "functions reach through the whole Config:\n" + "\n".join(
        h for h in hits if f"{h.split(':', 1)[0]}:{h.split(' ', 2)[1].rstrip(':')}" not in SEAM_ALLOWED)
    assert found == SEAM_ALLOWED, f"no longer take a Config (drop them from SEAM_ALLOWED): {SEAM_ALLOWED - found}"


def test_the_seam_rule_counts_a_config_parameter_and_its_endpoint_reads(tmp_path: Path) -> None:
    """Guards :func:`seam_hits`, one case per rule: a parameter annotated Config (also quoted, in a union or untyped
    and called ``config``); ``endpoint``/``endpoints`` read from a Config-valued expression (a name bound to one,
    ``<x>.config``, a ``load_config`` call), also inside a closure or a lambda. Not counted: the same attributes of an
    EndpointSpec or of anything else (a cluster identity's ``endpoint``, a method ``kube.endpoint(...)``)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def takes(c: Config) -> None: ...\n"
        "def quoted(c: 'hyperpod_core.config.Config | None') -> None: ...\n"
        "def untyped(config): ...\n"
        "def via_env(e: Environment) -> int:\n    return e.config.endpoint.max_model_len\n"
        "def via_name(dep: Deployment) -> None:\n    c = dep.env.config\n    d = c\n    return d.endpoints\n"
        "def loaded(p: Path) -> None:\n    return load_config(p).endpoint\n"
        "def closure(e: Environment) -> None:\n    c = e.config\n    def inner() -> None:\n        return c.endpoint\n"
        "def in_lambda(e: Environment) -> object:\n    return lambda: e.config.endpoints\n"
        "def spec_only(spec: EndpointSpec) -> int:\n    return spec.endpoint.max_model_len\n"
        "def other(identity: ClusterIdentity, kube: Kube, config: EndpointSpec) -> object:\n"
        "    return identity.endpoint, kube.endpoint('ns', 'name'), config.endpoint\n"
        "def shadowed(e: Environment) -> None:\n    c = e.config\n    def inner(c: EndpointSpec) -> int:\n"
        "        return c.endpoint.max_model_len\n"
        "class Holder:\n    def method(self, config: Config) -> None: ...\n")
    found = {h.split(" ", 1)[1].split(":")[0]: h.split(": ", 1)[1] for h in seam_hits(probe, "probe.py")}
    assert found == {
        "takes": "takes a Config (c)", "quoted": "takes a Config (c)", "untyped": "takes a Config (config)",
        "via_env": "reads e.config.endpoint", "via_name": "reads d.endpoints",
        "loaded": "reads load_config(p).endpoint", "closure.inner": "reads c.endpoint",
        "in_lambda": "reads e.config.endpoints", "Holder.method": "takes a Config (config)"}


def test_the_seam_leaves_out_the_composition_roots_and_the_config_package(tmp_path: Path) -> None:
    """Guards :func:`seam`: the same function counts in a consumer, not in a root or the config package."""
    body = "def f(config: Config) -> None: ...\n"
    for rel in ("cli/hyperpod_dpd/preflight.py", "cli/hyperpod_dpd/commands/status.py", "k8s/hyperpod_k8s/main.py",
                "core/hyperpod_core/config/rules.py", "core/hyperpod_core/inputs.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    for folder in PACKAGES.values():
        (tmp_path / folder.relative_to(REPO_ROOT)).mkdir(parents=True, exist_ok=True)
    found = [h.split(":")[0] for h in seam(tmp_path)]
    assert found == ["core/hyperpod_core/inputs.py", "cli/hyperpod_dpd/preflight.py"]
