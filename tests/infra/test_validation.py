"""The validation harness: cdk-nag on every stack and cfn-lint on every template of the default config.

Every later stack is covered automatically because both checks walk the whole app from ``build()``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from hyperpod_infra.app_builder import build
from hyperpod_infra.nag import add_nag

REPO_ROOT = Path(__file__).resolve().parents[2]
CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def _nag_findings(outdir: Path) -> list[str]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return [
        f"{v['ruleName']} at {c['constructPath']}: {v['description'][:120]}"
        for plugin in report.get("pluginReports", [])
        for v in plugin.get("violations", [])
        for c in v.get("violatingConstructs", [])
    ]


@pytest.fixture(scope="session")
def nagged_assembly(default_config, tmp_path_factory) -> Path:
    """The whole default app synthesized once with the AwsSolutions pack; fails listing every finding."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context={"aws:cdk:disable-asset-staging": True})
    build(app, default_config)
    add_nag(app)
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" not in str(exc):
            raise
        findings = _nag_findings(outdir)
        pytest.fail(f"{len(findings)} unacknowledged cdk-nag findings:\n" + "\n".join(findings))
    return outdir


def test_cdk_nag_has_no_unacknowledged_findings(nagged_assembly: Path) -> None:
    assert _nag_findings(nagged_assembly) == []


def test_every_stack_is_synthesized(nagged_assembly: Path, stacks) -> None:
    written = {p.name.removesuffix(".template.json") for p in nagged_assembly.glob("*.template.json")}
    assert {s.artifact_id for s in stacks.all()} <= written


def test_cfn_lint_reports_no_errors_or_warnings(nagged_assembly: Path) -> None:
    templates = sorted(str(p) for p in nagged_assembly.glob("*.template.json"))
    assert templates
    result = subprocess.run(
        [str(CFN_LINT), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", *templates],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cdk_nag_really_runs(tmp_path: Path) -> None:
    """Guards the harness itself: a bucket without TLS enforcement or logs must be reported."""
    app = cdk.App(outdir=str(tmp_path), context={"aws:cdk:disable-asset-staging": True})
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Open")
    add_nag(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    rules = {f.split(" ", 1)[0] for f in _nag_findings(tmp_path)}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_cfn_lint_really_catches_errors(tmp_path: Path) -> None:
    """Guards the harness itself: a misspelt property must fail the same cfn-lint invocation."""
    bad = tmp_path / "bad.template.json"
    bad.write_text(json.dumps({"Resources": {"C": {"Type": "AWS::SageMaker::Cluster", "Properties": {
        "NodeRecovery": "Sometimes", "Orchestrater": {"Eks": {"ClusterArn": "x"}}}}}}))
    result = subprocess.run(
        [str(CFN_LINT), "--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--", str(bad)],
        capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "E3002" in result.stdout and "E3030" in result.stdout
