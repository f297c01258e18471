"""Arrows point one way: the CDK side (hyperpod_infra) never imports the cdk8s package (hyperpod_k8s), and the
shared query definitions (hyperpod_core.telemetry) import neither CDK nor cdk8s."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _offenders(package: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{p.relative_to(package)}: {name}" for p in sorted(package.rglob("*.py")) for name in _imports(p)
            if name.split(".")[0] in forbidden]


def test_the_cdk_side_never_imports_the_cdk8s_package() -> None:
    assert not _offenders(ROOT / "infra" / "hyperpod_infra", ("hyperpod_k8s",))


def test_the_check_bites_on_an_import_of_hyperpod_k8s(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("from hyperpod_k8s.observability import write_dashboard_files\n")
    assert _offenders(tmp_path, ("hyperpod_k8s",)) == ["bad.py: hyperpod_k8s.observability"]


def test_telemetry_imports_neither_cdk_nor_cdk8s() -> None:
    assert not _offenders(ROOT / "infra" / "hyperpod_infra" / "telemetry",
                          ("aws_cdk", "cdk8s", "constructs", "jsii", "hyperpod_k8s", "hyperpod_constructs"))


def test_building_the_cdk_app_loads_no_hyperpod_k8s_module() -> None:
    code = ("import sys; import hyperpod_infra.app_builder; "
            "bad = sorted(m for m in sys.modules if m.startswith('hyperpod_k8s')); assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": f"{ROOT / 'infra'}:{ROOT / 'constructs'}", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
