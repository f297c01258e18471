"""The cdk8s chart: synth writes the dashboard ConfigMaps and the PrometheusRule, deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from hyperpod_core.config import Config, parse_config
from hyperpod_k8s.observability.delivery import dashboard_files


def _synth(config: Config, outdir: Path) -> list[Path]:
    import cdk8s

    from hyperpod_k8s.observability import build_observability_charts

    app = cdk8s.App(outdir=str(outdir), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    build_observability_charts(app, config)
    app.synth()
    return sorted(outdir.glob("*.k8s.yaml"))


def test_synth_writes_dashboards_and_alerts(default_config: Config, tmp_path: Path) -> None:
    (path,) = _synth(default_config, tmp_path / "a")
    assert path.name == f"{default_config.endpoint.name}-observability.k8s.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ConfigMap", "ConfigMap", "PrometheusRule"]
    shipped = {k: v for d in docs if d["kind"] == "ConfigMap" for k, v in d["data"].items()}
    assert shipped == dashboard_files(default_config)
    assert all(json.loads(v) for v in shipped.values())
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert len(rule["spec"]["groups"][0]["rules"]) == 8
    (again,) = _synth(default_config, tmp_path / "b")
    assert again.read_bytes() == path.read_bytes()


def test_nothing_is_synthesized_when_observability_is_disabled(default_config_dict: dict,
                                                              tmp_path: Path) -> None:
    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["enabled"] = False
    data["endpoint"]["autoscaling"]["enabled"] = False
    assert _synth(parse_config(data), tmp_path) == []
