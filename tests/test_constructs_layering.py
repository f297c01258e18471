"""Layers point one way (developers' guide): ``hyperpod_constructs`` is the lowest floor and imports neither
``hyperpod_infra`` nor ``hyperpod_k8s``. Checked on the source with an AST walk, so a lazy import inside a
function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("hyperpod_infra", "hyperpod_k8s")


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
    return modules


def test_constructs_import_neither_infra_nor_k8s() -> None:
    sources = sorted((REPO_ROOT / "constructs" / "hyperpod_constructs").rglob("*.py"))
    assert len(sources) > 10
    offenders = sorted(
        f"{path.relative_to(REPO_ROOT)} imports {module}"
        for path in sources for module in _imported_modules(path)
        if module.split(".")[0] in FORBIDDEN)
    assert offenders == []


def test_the_walk_sees_a_lazy_import(tmp_path: Path) -> None:
    """Guards the walker: an import inside a function body is found."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from hyperpod_infra.nag import acknowledge\n    import hyperpod_k8s.main\n")
    assert {"hyperpod_infra.nag", "hyperpod_k8s.main"} <= _imported_modules(probe)
