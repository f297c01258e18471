"""The one synth path (``hyperpod_infra.app_builder.synthesize``, called by app.py and the main job) and the
CDK CLI's context for the in-process case (``hyperpod_infra.cdk_cli``)."""

from __future__ import annotations

import json
from pathlib import Path

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
