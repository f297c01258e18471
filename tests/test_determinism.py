"""Synthesizing twice gives byte-identical output, for both apps."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk

from hyperpod_core.config import Config
from hyperpod_core.inputs import resolve_inputs
from hyperpod_infra.app_builder import build
from hyperpod_k8s.main import synth


def _files(root: Path, pattern: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob(pattern))}


def test_cdk_templates_are_byte_identical_across_synths(default_config: Config, tmp_path: Path) -> None:
    outputs = []
    for run in ("a", "b"):
        app = cdk.App(outdir=str(tmp_path / run), context={"aws:cdk:disable-asset-staging": True})
        build(app, default_config)
        app.synth()
        outputs.append(_files(tmp_path / run, "*.template.json"))
    # network, observability, cluster, HyperPod, platform, observability add-on (README, "Stacks")
    assert sorted(outputs[0]) == sorted(f"{s}.template.json" for s in (
        "Network", "Observability", "Cluster", "HyperPod", "Platform", "ObservabilityAddon"))
    assert outputs[0] == outputs[1]


def test_cdk8s_manifests_are_byte_identical_across_synths(default_config: Config, tmp_path: Path) -> None:
    inputs = resolve_inputs(default_config, None)
    first = synth(default_config, tmp_path / "a", inputs)
    second = synth(default_config, tmp_path / "b", inputs)
    assert [p.name for p in first] == [p.name for p in second]
    assert len(first) >= 5  # dpd, colocated, observability manifests + dashboard JSON files
    assert _files(tmp_path / "a", "**/*.*") == _files(tmp_path / "b", "**/*.*")
