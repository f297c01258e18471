"""``kubectl apply -f dist/<endpoint>/endpoint/`` applies exactly one endpoint; placeholders never sit where an apply
reads; each endpoint of a config has its own folder.

Expected values: the DPD and colocated manifests carry the same name, so applying both applies the last one
(docs/endpoint.md); ``endpoint.apply`` picks the one ``endpoint/`` holds (hyperpod_core.dist_layout).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path

import yaml

from hyperpod_core.dist_layout import PLACEHOLDERS, PLACEHOLDERS_README

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def _kinds(folder: Path) -> list[tuple[str, str]]:
    """What ``kubectl apply -f <folder>`` applies: every document of its .yaml/.yml/.json files (not recursive)."""
    docs = [d for p in sorted(folder.iterdir()) if p.suffix in (".yaml", ".yml", ".json")
            for d in yaml.load_all(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            if d]
    return [(d["kind"], d["metadata"]["name"]) for d in docs]


def _synth(config: Path, outdir: Path, outputs: Path | None) -> str:
    from hyperpod_k8s import main

    copy = outdir.parent / f"cdk8s-{config.name}"  # outside the checkout: no stray cdk-outputs.json of its folder
    shutil.copy(config, copy)
    argv = ["--config", str(copy), "--outdir", str(outdir)] + (["--outputs-file", str(outputs)] if outputs else [])
    err = io.StringIO()
    saved_cwd = Path.cwd()
    os.chdir(outdir.parent)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            main.main(argv)
    finally:
        os.chdir(saved_cwd)
    return err.getvalue()


def test_the_endpoint_folder_holds_exactly_the_configured_endpoint(synthesized):
    s = synthesized["p5en-two-prefill"]
    name = "llama-3-3-70b-p5en"
    dpd = [n for n in s.files if n.endswith("-dpd.k8s.yaml")]
    assert [s.folders[n] for n in dpd] == [f"{name}/endpoint"]
    assert {s.folders[n] for n in s.files if n.endswith("-colocated.k8s.yaml")} == {f"{name}/alternate"}
    assert {s.folders[n] for n in s.files if "-reference-" in n} == {f"{name}/reference"}
    assert {s.folders[n] for n in s.files if n.endswith("-benchmark.k8s.yaml")} == {f"{name}/benchmark"}
    assert "apply: exactly one endpoint" in s.stderr and f"  kubectl apply -f {s.dist}/{name}/endpoint/" in s.stderr
    assert "  hyperpod-dpd rollout --config " in s.stderr, "a live endpoint changes through rollout (issue 36)"
    assert "delete -f" not in s.stderr


def test_placeholders_go_where_no_apply_command_reads(synthesized, tmp_path):
    """Without the deploy outputs (the default case) nothing deployable-looking is written: no endpoint/,
    alternate/, reference/ or benchmark/ in the endpoint's folder, and a README that says why."""
    s = synthesized["default"]
    name = "llama-3-3-70b"
    assert set(s.folders.values()) == {f"{name}/{PLACEHOLDERS}/{f}" for f in ("endpoint", "alternate", "reference",
                                                                               "benchmark")}
    assert "not deployable yet" in s.stderr and "model_bucket_name" in s.stderr
    out = tmp_path / "dist"
    _synth(REPO / "config" / "default.yaml", out, None)
    assert not (out / name / "endpoint").exists()
    readme = (out / name / PLACEHOLDERS / PLACEHOLDERS_README).read_text(encoding="utf-8")
    assert readme.startswith(f"These manifests of endpoint {name} are NOT deployable") and "cdk-outputs.json" in readme
    assert f"dist/{name}/endpoint/" in readme
    assert sorted(p.name for p in out.iterdir()) == ["dashboards", name]
    assert sorted(p.name for p in (out / name).iterdir()) == [PLACEHOLDERS]


def test_endpoint_apply_colocated_swaps_the_folders(tmp_path):
    data = yaml.safe_load((REPO / "config" / "examples" / "p5en-two-prefill.yaml").read_text(encoding="utf-8"))
    data["endpoint"]["apply"] = "colocated"
    data["observability"] = {**data.get("observability", {}), "in_cluster_manifests": True}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "dist"
    _synth(config, out, FIXTURES / "p5en-cdk-outputs.json")
    name = data["endpoint"]["name"]
    assert sorted(_kinds(out / name / "endpoint")) == [("InferenceEndpointConfig", name), ("Service", name)]
    assert "pdSpec" not in yaml.safe_load((out / name / "endpoint" / f"{name}-colocated.k8s.yaml").read_text())["spec"]
    assert [p.name for p in (out / name / "alternate").iterdir()] == [f"{name}-dpd.k8s.yaml"]
    # The prometheus-operator and sidecar objects only when asked for, in the deployment's own folder: the endpoint's
    # rules and, in their own file, the cluster-wide ones.
    assert sorted(_kinds(out / "in-cluster-observability")) == [
        ("ConfigMap", f"grafana-dashboard-dpd-overview-{name}"),
        ("ConfigMap", f"grafana-dashboard-dpd-vs-colocated-{name}"),
        ("PrometheusRule", "dpd-cluster-alerts"), ("PrometheusRule", f"{name}-dpd-alerts")]
    assert not (out / name / PLACEHOLDERS).exists()


def test_npx_cdk8s_synth_o_dir_writes_to_dir_and_without_it_to_dist(tmp_path, monkeypatch):
    """The cdk8s CLI names its output folder in ``$CDK8S_OUTDIR``: ``-o DIR`` (its documented output flag), or
    ``output`` of cdk8s.yaml, the scratch folder that stands for the config's dist/ (linked to it after the app wrote
    it)."""
    from hyperpod_k8s import main

    scratch = yaml.safe_load((REPO / "cdk8s.yaml").read_text())["output"]
    assert scratch == main.CLI_SCRATCH_OUTPUT
    assert "--outdir" not in yaml.safe_load((REPO / "cdk8s.yaml").read_text())["app"]
    assert main.default_outdir({"CDK8S_OUTDIR": str(tmp_path / "out")}) == str(tmp_path / "out")
    assert main.default_outdir({"CDK8S_OUTDIR": scratch}) == main.default_outdir({"CDK8S_OUTDIR": f"./{scratch}"})
    # No -o: None, the config's own dist/ (hyperpod_core.environment.folder_of; the root's for config/default.yaml).
    assert main.default_outdir({"CDK8S_OUTDIR": scratch}) == main.default_outdir({}) is None

    dist, link = tmp_path / "dist", tmp_path / scratch
    dist.mkdir()
    monkeypatch.setenv("CDK8S_OUTDIR", str(link))
    main._show_to_cdk8s_cli(dist)  # no -o: the CLI lists dist/ through its scratch folder
    assert link.resolve() == dist.resolve()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("CDK8S_OUTDIR", str(out))
    main._show_to_cdk8s_cli(out)  # -o DIR: the app wrote DIR itself, nothing to link
    assert out.is_dir() and not out.is_symlink()


def test_under_the_cdk8s_cli_the_files_it_does_not_list_are_named_on_stderr(tmp_path, monkeypatch, capsys):
    """``npx cdk8s synth`` lists the ``*.yaml`` files under its output folder only (cdk8s-cli ``lib/util.js``
    ``findManifests``: ``file.name.endsWith('.yaml')``) and keeps the app's stdout to itself (``shell``: stdio
    ``['inherit', 'pipe', 'inherit']``), so the app names the other files it wrote (the dashboards' JSON) on stderr,
    in the CLI's list form (newcomer friction 24)."""
    from hyperpod_k8s import main

    cli = REPO / "node_modules" / "cdk8s-cli" / "lib" / "util.js"
    if cli.is_file():  # the premise, read from the pinned CLI itself
        source = cli.read_text(encoding="utf-8")
        assert "file.name.endsWith('.yaml')" in source and "stdio: ['inherit', 'pipe', 'inherit']" in source
    out = tmp_path / "out"
    out.mkdir()
    written = [out / "endpoint" / "e-dpd.k8s.yaml", out / "dashboards" / "dpd-overview-e.json",
               out / "dashboards" / "dpd-vs-colocated-e.json"]
    monkeypatch.setenv("CDK8S_OUTDIR", str(out))  # npx cdk8s synth -o out
    main._show_to_cdk8s_cli(out, written)
    assert capsys.readouterr().err.splitlines() == [
        "also written (the cdk8s CLI lists *.yaml only):", f"  - {written[1]}", f"  - {written[2]}"]
    monkeypatch.delenv("CDK8S_OUTDIR")  # python -m hyperpod_k8s.main: its stdout lists every file
    main._show_to_cdk8s_cli(out, written)
    assert capsys.readouterr().err == ""


def test_reordering_the_endpoints_leaves_the_cluster_rule_where_it_was(two_models_config, tmp_path):
    """The cluster-wide PrometheusRule is the deployment's: listing two-models.yaml's endpoints the other way round
    keeps it in the same file and namespace, once (``kubectl apply`` does not prune: a rule that moved with the
    first endpoint would be left behind and fire twice)."""
    from hyperpod_core.config import parse_config
    from hyperpod_core.dist_layout import cluster_alerts_file
    from hyperpod_core.inputs import resolve_inputs
    from hyperpod_k8s import main

    data = yaml.safe_load((REPO / "config" / "examples" / "two-models.yaml").read_text(encoding="utf-8"))
    data["observability"] = {**data.get("observability", {}), "in_cluster_manifests": True}
    as_written = [s.name for s in two_models_config.specs()]
    placed = {}
    for order, names in (("as written", as_written), ("reversed", as_written[::-1])):
        data["endpoints"] = sorted(data["endpoints"], key=lambda e: names.index(e["name"]))
        config = parse_config(data)
        assert [s.name for s in config.specs()] == names
        out = tmp_path / order.replace(" ", "-") / "dist"
        written = main.synth(config, out, resolve_inputs(config, None, None))
        rules = [(p.relative_to(out), d["metadata"].get("namespace"))
                 for p in written if p.suffix == ".yaml"
                 for d in yaml.safe_load_all(p.read_text(encoding="utf-8"))
                 if d and d["kind"] == "PrometheusRule" and d["metadata"]["name"] == "dpd-cluster-alerts"]
        assert rules == [(cluster_alerts_file(out).relative_to(out), "default")], (order, rules)
        placed[order] = rules
    assert placed["as written"] == placed["reversed"]
