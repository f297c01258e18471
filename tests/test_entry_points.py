"""Every entry point, given a bad config, prints ONE line on stderr, exits 2 and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false",
                "CDK_OUTDIR": str(tmp_path / "cdk.out"), **env}
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=full_env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def bad_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "bad.yaml"
    text = (REPO_ROOT / "config" / "default.yaml").read_text().replace("routing_threshold_tokens: 4096",
                                                                      "routing_threshold_tokens: 20000")
    path.write_text(text)
    return path


def _assert_one_line_exit_2(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: endpoint.routing_threshold_tokens must be below")
    assert "Traceback" not in result.stderr


def test_cdk_app_rejects_bad_config_with_one_line(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["app.py"], tmp_path, HYPERPOD_CONFIG=str(bad_config))
    _assert_one_line_exit_2(result)
    assert not (tmp_path / "cdk.out").exists()


def test_cdk_app_takes_config_from_context(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["app.py"], tmp_path, CDK_CONTEXT_JSON=f'{{"config": "{bad_config}"}}')
    _assert_one_line_exit_2(result)


def test_cdk8s_app_rejects_bad_config_with_one_line(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["-m", "hyperpod_k8s.main", "--config", str(bad_config), "--outdir", str(tmp_path / "dist")],
                  tmp_path, PYTHONPATH=os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", "constructs", "k8s")))
    _assert_one_line_exit_2(result)
    assert not (tmp_path / "dist").exists()


def test_cdk8s_app_takes_config_from_environment(bad_config: Path, tmp_path: Path) -> None:
    result = _run(["-m", "hyperpod_k8s.main", "--outdir", str(tmp_path / "dist")], tmp_path,
                  HYPERPOD_CONFIG=str(bad_config),
                  PYTHONPATH=os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", "constructs", "k8s")))
    _assert_one_line_exit_2(result)


def test_xdist_groups_are_honoured(request: pytest.FixtureRequest) -> None:
    """The tests of this group run the entry points in the repository itself, so they must share one worker:
    under ``--dist loadgroup`` xdist marks their node IDs with the group (pytest-dev/pytest-xdist#1386: a
    pytest release that drops the suffix silently spreads them over every worker)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not running under xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@repository-root")
