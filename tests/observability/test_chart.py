"""The cdk8s chart: only with ``observability.in_cluster_manifests`` does synth write the dashboard ConfigMaps and
the PrometheusRule (HyperPod's add-on installs neither prometheus-operator's CRDs nor a Grafana sidecar:
lifecycle-facts.md), deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from hyperpod_core.config import Config, parse_config
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_k8s.observability.delivery import dashboard_files


def _synth(config: Config, outdir: Path) -> list[Path]:
    import cdk8s

    from hyperpod_k8s.observability import build_observability_charts

    app = cdk8s.App(outdir=str(outdir), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    build_observability_charts(app, config)
    app.synth()
    return sorted(outdir.glob("*.k8s.yaml"))


def _in_cluster(default_config_dict: dict) -> Config:
    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["in_cluster_manifests"] = True
    return parse_config(data)


def test_by_default_nothing_needs_prometheus_operator(default_config: Config, tmp_path: Path) -> None:
    assert default_config.observability.in_cluster_manifests is False
    assert _synth(default_config, tmp_path) == []


def test_synth_writes_dashboards_and_alerts_when_asked(default_config_dict: dict, tmp_path: Path) -> None:
    default_config = _in_cluster(default_config_dict)
    (path,) = _synth(default_config, tmp_path / "a")
    assert path.name == f"{default_config.endpoint.name}-observability.k8s.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ConfigMap", "ConfigMap", "PrometheusRule"]
    shipped = {k: v for d in docs if d["kind"] == "ConfigMap" for k, v in d["data"].items()}
    assert shipped == dashboard_files(default_config)
    assert all(json.loads(v) for v in shipped.values())
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert rule["spec"] == alert_rule_groups(default_config)
    (again,) = _synth(default_config, tmp_path / "b")
    assert again.read_bytes() == path.read_bytes()


def test_nothing_is_synthesized_when_observability_is_disabled(default_config_dict: dict,
                                                              tmp_path: Path) -> None:
    data = json.loads(json.dumps(default_config_dict))
    data["observability"].update(enabled=False, in_cluster_manifests=True)
    data["endpoint"]["autoscaling"]["enabled"] = False
    assert _synth(parse_config(data), tmp_path) == []
