"""``scripts/setup`` run again without the package registries (offline, or a registry down).

A step whose inputs changed (``pyproject.toml``, ``package-lock.json``: any edit, a ``git pull``) installs again; when
that fails, the tools it installed before stay and set-up goes on with them, in one line that names the step's log.
Before, pip's or npm's whole report ended set-up (``set -e``), and ``npm ci``, which deletes ``node_modules/`` before it
installs, had already taken the CDK and cdk8s CLIs with it. The registries are made unreachable the way a machine
without network sees them: pip's index (a stand-in ``.venv/bin/python`` whose pip answers as pip does when no index
answers), npm's registry and the HTTPS proxy at a closed port; the CRD and the CRD bindings are present, as after a
first set-up.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLOSED = "http://127.0.0.1:9"
#: What ``scripts/node-support.cjs`` loads (``@jsii/check-node`` and what it requires), as ``npm ci`` left them.
NODE_SUPPORT = ("@jsii/check-node", "chalk", "semver", "ansi-styles", "supports-color", "has-flag", "color-convert",
                "color-name")
#: pip's answer when its index cannot be reached (pip 25, an editable install that needs setuptools to build).
PIP_OFFLINE = "ERROR: Could not find a version that satisfies the requirement setuptools>=77 (from versions: none)"


def _checkout(root: Path, *, installed_npm: bool) -> Path:
    """A checkout after a first set-up, whose ``pyproject.toml`` and ``package-lock.json`` changed since (stale
    stamps): scripts and inputs linked, the CRD bindings' stamp current, ``.venv`` this checkout's interpreter."""
    from hyperpod_k8s.crd_source import resolve_crd

    root.mkdir()
    for name in ("scripts", "pyproject.toml", "package.json", "package-lock.json"):
        (root / name).symlink_to(REPO / name)
    imports = root / "k8s" / "hyperpod_k8s" / "imports"
    imports.mkdir(parents=True)
    (imports / ".setup-stamp").write_text(hashlib.sha256(resolve_crd().read_bytes()).hexdigest() + "\n")
    (root / "k8s" / "hyperpod_k8s" / "benchmark").symlink_to(REPO / "k8s" / "hyperpod_k8s" / "benchmark")
    (root / "k8s" / "crds").symlink_to(REPO / "k8s" / "crds")  # the PrometheusRule CRD, its bindings current
    prom = imports / "com" / "coreos" / "monitoring"
    prom.mkdir(parents=True)
    crd = REPO / "k8s" / "crds" / "monitoring.coreos.com_prometheusrules.yaml"
    (prom / ".setup-stamp").write_text(hashlib.sha256(crd.read_bytes()).hexdigest() + "\n")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then echo "{PIP_OFFLINE}" >&2; exit 1; fi\n'
                      f'exec {REPO / ".venv" / "bin" / "python"} "$@"\n')
    python.chmod(0o755)
    (root / ".venv" / ".setup-stamp").write_text("the hash of an older pyproject.toml\n")
    if installed_npm:
        for package in NODE_SUPPORT:
            shutil.copytree(REPO / "node_modules" / package, root / "node_modules" / package, symlinks=True)
        (root / "node_modules" / ".setup-stamp").write_text("the hash of an older package-lock.json\n")
    return root


def _setup(root: Path, tmp_path: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path or os.environ["PATH"], "HOME": str(tmp_path), "npm_config_registry": f"{CLOSED}/",
           "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_fetch_retries": "0",
           "https_proxy": CLOSED, "HTTPS_PROXY": CLOSED, "http_proxy": CLOSED, "no_proxy": "", "NO_PROXY": "",
           "HYPERPOD_CHART_CACHE": str(tmp_path / "charts")}
    return subprocess.run([str(root / "scripts" / "setup")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.skipif(not (REPO / "node_modules" / "@jsii" / "check-node").is_dir() or shutil.which("npm") is None,
                    reason="needs npm and the checkout's node_modules (./scripts/setup)")
def test_an_install_that_fails_offline_keeps_the_tools_and_is_one_line_each(tmp_path) -> None:
    """Both changed steps fail; set-up ends with exit 0 and the tools of before, one line per step. Fails on main:
    pip's report on stderr, then exit 1 (``set -e``) before any other step ran."""
    root = _checkout(tmp_path / "checkout", installed_npm=True)
    result = _setup(root, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert all(line.startswith("[setup] ") for line in lines), result.stderr
    failed = [line for line in lines if " failed (" in line]
    assert failed[0] == (f"[setup] warning: installing the Python packages failed ({PIP_OFFLINE}; its output: "
                         ".cache/setup/pip.log); going on with the one installed before (run ./scripts/setup again "
                         "with access to the package registry)")
    assert re.fullmatch(
        r"\[setup\] warning: installing the CDK CLI and cdk8s CLI failed \(FetchError: request to "
        rf"{re.escape(CLOSED)}/\S+ failed, reason: connect ECONNREFUSED 127\.0\.0\.1:9; its output: "
        r"\.cache/setup/npm\.log\); going on with the one installed before \(run \./scripts/setup again with access "
        r"to the package registry\)", failed[1]), failed[1]
    assert len(failed) == 2
    assert sorted(p.name for p in (root / "node_modules").iterdir()) == sorted(
        {".setup-stamp", *(p.split("/")[0] for p in NODE_SUPPORT)})
    assert (root / "node_modules" / ".setup-stamp").read_text().startswith("the hash of an older")
    assert (root / ".venv" / ".setup-stamp").read_text().startswith("the hash of an older")
    assert "npm error" in (root / ".cache" / "setup" / "npm.log").read_text()


def test_an_install_that_fails_with_nothing_installed_stops_in_one_line(tmp_path) -> None:
    """Nothing to go on with: exit 1, the reason and the log in one line, npm's report only in the log. Fails on
    main: npm's 19 lines (a Node stack among them) on stderr. The npm here answers as the real one does offline
    (the test above runs the real one)."""
    root = _checkout(tmp_path / "checkout", installed_npm=False)
    (root / ".venv" / ".setup-stamp").write_text(hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
                                                 + "\n")
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir()
    npm.write_text("#!/bin/sh\nprintf 'npm error code ECONNREFUSED\\nnpm error FetchError: request to "
                   f"{CLOSED}/aws-cdk failed, reason: connect ECONNREFUSED 127.0.0.1:9\\n' >&2\nexit 1\n")
    npm.chmod(0o755)
    result = _setup(root, tmp_path, path=f"{npm.parent}:{os.environ['PATH']}")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "[setup] installing the CDK CLI and cdk8s CLI (pinned in package-lock.json)",
        result.stderr.splitlines()[-1]]
    assert re.fullmatch(r"\[setup\] error: installing the CDK CLI and cdk8s CLI failed \(FetchError: .*; its output: "
                        r"\.cache/setup/npm\.log\); set-up needs the package registry once",
                        result.stderr.splitlines()[-1]), result.stderr
    assert not (root / "node_modules").exists()
