"""The one synth path (``hyperpod_infra.app_builder.synthesize``, called by app.py and the main job), the CDK
CLI's context for the in-process case (``hyperpod_infra.cdk_cli``), and the floor scripts/bench.py measures that
path against."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from hyperpod_core.errors import CommandFailed
from hyperpod_infra import app_builder
from hyperpod_infra.cdk_cli import cli_context, config_from_context

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_an_unacknowledged_finding_fails_the_synth_with_one_line(tmp_path, monkeypatch, capsys) -> None:
    """The findings are listed on stderr and in nag-findings.json; the error itself is one line."""

    def probe(app: cdk.App, _config: object) -> None:  # a bucket without TLS enforcement or access logs
        s3.CfnBucket(cdk.Stack(app, "Probe"), "Bucket")

    monkeypatch.setattr(app_builder, "build", probe)
    with pytest.raises(CommandFailed, match=r"^cdk-nag: \d+ unacknowledged findings \(listed above\)$") as failed:
        app_builder.synthesize(None, outdir=tmp_path,  # type: ignore[arg-type]
                               context={"aws:cdk:disable-asset-staging": True}, announce=False)
    listed = [line.strip() for line in capsys.readouterr().err.splitlines()]
    assert "AwsSolutions-S1 at Probe/Bucket" in listed  # cdk-nag AwsSolutions-S1: server access logs
    assert str(failed.value).startswith(f"cdk-nag: {len(listed)} ")
    report = json.loads((tmp_path / "nag-findings.json").read_text())
    assert report["unacknowledged"] == len(listed)


def test_the_in_process_context_is_what_the_cli_hands_the_app() -> None:
    """cdk.json's context, the config, and the metadata flags aws-cdk CLI 2.1148.1 sets by default
    (``contextFromSettings``: ``aws:cdk:enable-path-metadata``, ``aws:cdk:enable-asset-metadata``)."""
    context = cli_context(Path("envs/x/config.yaml"))
    committed = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    assert {k: v for k, v in context.items() if k in committed and k != "config"} == {
        k: v for k, v in committed.items() if k != "config"}
    assert context["config"] == "envs/x/config.yaml"
    assert context["aws:cdk:enable-path-metadata"] is True and context["aws:cdk:enable-asset-metadata"] is True


def test_cdk_json_context_wins_over_cdk_context_json(tmp_path, monkeypatch) -> None:
    """The CLI's precedence (aws-cdk 2.1148.1, ``loadConfigFiles``: bags [command line, cdk.json,
    cdk.context.json]; ``Context.all`` merges them in reverse, so the earlier bag wins)."""
    from hyperpod_core import paths

    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"shared": "cdk.json", "only-project": 1}}))
    (tmp_path / "cdk.context.json").write_text(json.dumps({"shared": "cdk.context.json", "only-cached": 2}))
    monkeypatch.setattr(paths, "checkout", lambda needed_for: tmp_path)
    context = cli_context(Path("c.yaml"))
    assert (context["shared"], context["only-project"], context["only-cached"]) == ("cdk.json", 1, 2)


def test_app_py_reads_the_config_the_cli_hands_over(tmp_path, monkeypatch) -> None:
    """``-c config=...`` arrives in $CDK_CONTEXT_JSON, or in the file $CONTEXT_OVERFLOW_LOCATION_ENV names for a
    large context (aws-cdk CLI 2.1148.1: ``CONTEXT_ENV``, ``CONTEXT_OVERFLOW_LOCATION_ENV``)."""
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"config": "a.yaml"}))
    assert config_from_context() == "a.yaml"
    overflow = tmp_path / "context.json"
    overflow.write_text(json.dumps({"config": "b.yaml"}))
    monkeypatch.delenv("CDK_CONTEXT_JSON")
    monkeypatch.setenv("CONTEXT_OVERFLOW_LOCATION_ENV", str(overflow))
    assert config_from_context() == "b.yaml"


def _load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench", REPO_ROOT / "scripts" / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _same_order(template: dict[str, Any]) -> dict[str, Any]:
    """The template with each ``DependsOn`` as a sorted list: CfnInclude keeps a resource's dependencies, not
    their order."""
    for resource in template.get("Resources", {}).values():
        if "DependsOn" in resource:
            depends = resource["DependsOn"]
            resource["DependsOn"] = sorted({depends} if isinstance(depends, str) else set(depends))
    return template


def test_the_bench_floor_rebuilds_the_same_templates(synthesize_matrix, tmp_path: Path) -> None:
    """scripts/bench.py's floor (issue 31: the same templates through the CDK alone) includes every template the
    app wrote with ``CfnInclude`` and synthesizes them back unchanged, so the ratio against it measures only what
    the app adds."""
    written = synthesize_matrix("default.yaml").require().cdk_out
    script = tmp_path / "include_app.py"
    script.write_text(_load_bench().INCLUDE_APP)
    out = tmp_path / "cdk.out"
    result = subprocess.run([sys.executable, "-O", str(script), str(written)], capture_output=True, text=True,
                            timeout=300, check=False, env={**os.environ, "CDK_OUTDIR": str(out)})
    assert result.returncode == 0, result.stderr[-2000:]
    templates = sorted(p.name for p in written.glob("*.template.json"))
    assert len(templates) == 6 and sorted(p.name for p in out.glob("*.template.json")) == templates
    for name in templates:
        assert _same_order(json.loads((out / name).read_text())) == _same_order(
            json.loads((written / name).read_text())), name
