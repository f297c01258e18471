"""Which of our modules a Lambda function needs beside its handler, resolved from their imports.

A handler imports ``hyperpod_runtime.cleanup`` or ``hyperpod_runtime.eks.kube``; :func:`imported_by` reads the
handler's own imports and returns those modules, every ``hyperpod_runtime`` module they import in turn, and the
package ``__init__.py`` files on the way, as ``{path inside the asset: source file}``. The CDK side copies
them next to the handler at synth, so the asset holds real files (no links, no second copy in the
repository) and the handler imports them by their own names. Everything bundled must import only the
standard library, boto3/botocore (and urllib3, which botocore requires) and other bundled modules: that is what
the Lambda Python runtime has (tests/test_layering.py checks it). It runs at synth, on the CDK side: the stacks
hand its answer to the constructs, which import nothing of ours.
"""

from __future__ import annotations

import ast
import importlib.util
import threading
from pathlib import Path

#: The package whose modules can be bundled (only ours; third-party code comes from the runtime).
BUNDLED_PACKAGE = "hyperpod_runtime"


def _package_folder() -> Path:
    """Where :data:`BUNDLED_PACKAGE` lies (the checkout's ``runtime/`` or an installed copy), found without
    importing it."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {BUNDLED_PACKAGE!r} cannot be found on the import path")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


_ROOT = _package_folder()


def _find(module: str) -> Path | None:
    """The source file of a ``hyperpod_runtime`` module, found on disk without importing anything."""
    parts = module.split(".")
    if parts[0] != BUNDLED_PACKAGE:
        return None
    base = _ROOT.joinpath(*parts[1:])
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _source(module: str) -> Path:
    path = _find(module)
    if path is None:
        raise ValueError(f"module {module!r} cannot be found under {_ROOT}")
    return path


def parse_source(path: Path) -> ast.Module:
    """``ast.parse`` of ``path``. CPython 3.11.7's AST validator can miscount the caller's recursion depth in a
    long-lived process ("SystemError: AST constructor recursion depth mismatch", seen in the suite's xdist
    workers); the same parse on a fresh thread's stack does not, so that is retried once there."""
    text = path.read_text(encoding="utf-8")
    try:
        return ast.parse(text, filename=str(path))
    except SystemError:
        outcome: list[ast.Module | BaseException] = []

        def parse() -> None:
            try:
                outcome.append(ast.parse(text, filename=str(path)))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=parse)
        worker.start()
        worker.join()
        if isinstance(outcome[0], BaseException):
            raise outcome[0] from None
        return outcome[0]


def _imports(path: Path, module: str) -> set[str]:
    """``hyperpod_runtime`` modules that ``path`` imports (absolute and relative imports)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse_source(path)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            if _find(name) is not None:
                found.add(name)
    return found


def module_files(*modules: str) -> dict[str, Path]:
    """``{relative path in the asset: source file}`` for ``modules`` and what they import of ours."""
    out: dict[str, Path] = {}
    todo = list(modules)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        if module.split(".")[0] != BUNDLED_PACKAGE:
            raise ValueError(f"only {BUNDLED_PACKAGE} modules can be bundled, got {module!r}")
        path = _source(module)
        rel = Path(*module.split("."))
        out[str(rel / "__init__.py" if path.name == "__init__.py" else rel.with_suffix(".py"))] = path
        parent = module.rpartition(".")[0]
        if parent:
            todo.append(parent)
        todo.extend(_imports(path, module))
    return dict(sorted(out.items()))


def imported_by(handler: Path) -> dict[str, Path]:
    """:func:`module_files` of every ``hyperpod_runtime`` module the file ``handler`` imports."""
    return module_files(*sorted(_imports(Path(handler), "")))
