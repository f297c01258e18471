"""Dashboards: SDK-valid JSON, the required panels and variables, deterministic delivery."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from hyperpod_infra.config import Config
from hyperpod_k8s.observability.dashboards import dashboards, dpd_overview, dpd_vs_colocated
from hyperpod_k8s.observability.delivery import (
    dashboard_config_maps,
    dashboard_files,
    prometheus_rule,
    write_dashboard_files,
)
from hyperpod_k8s.observability.grafana import render

OVERVIEW_PANELS = {
    "Request rate", "Tokens per second", "Time to first token", "Prefill time",
    "Time per output token / inter-token latency", "End-to-end latency", "Prefill queue",
    "Decode running sequences", "Decode KV-cache usage", "Decode preemptions", "KV retrieve time on decode",
    "KV transfer throughput", "KV retrieved / requested", "Error ratio", "Aborted requests",
    "Pod restarts (1h)", "GPU utilisation per role", "GPU memory used per role",
}


def test_dashboards_load_with_the_sdk_model(default_config: Config) -> None:
    for text in dashboard_files(default_config).values():
        raw = json.loads(text)
        model = Dashboard.from_json(raw)
        assert json.loads(json.dumps(model, cls=JSONEncoder)) == raw, "SDK round trip changed the JSON"
        ids = [p["id"] for p in raw["panels"]]
        assert len(ids) == len(set(ids))
        for panel in raw["panels"]:
            assert panel["type"] in ("row", "timeseries", "stat")
            assert panel["gridPos"]["w"] > 0


def test_overview_shows_every_dpd_signal(default_config: Config) -> None:
    titles = {p.title for p in dpd_overview(default_config).panels}
    assert titles >= OVERVIEW_PANELS
    split = next(p for p in dpd_overview(default_config).panels if p.title == "Request rate")
    assert [q.legend for q in split.queries] == ["total", "disaggregated (prefill + decode)",
                                                 "direct (decode only)"]


def test_comparison_puts_the_same_panels_side_by_side(default_config: Config) -> None:
    spec = dpd_vs_colocated(default_config)
    for row in spec.rows:
        left, right = row.columns
        assert [p.title.removeprefix("DPD: ") for p in left] == \
               [p.title.removeprefix("Colocated: ") for p in right]
    raw = render(spec)
    lines: dict[int, list[str]] = {}
    for panel in raw["panels"]:
        if panel["type"] != "row":
            lines.setdefault(panel["gridPos"]["y"], []).append(panel["title"].split(":")[0])
    assert all(sides == ["DPD", "Colocated"] for sides in lines.values()), lines
    colocated_exprs = [q.expr for row in spec.rows for p in row.columns[1] for q in p.queries]
    assert all("$baseline" in e and "$endpoint" not in e for e in colocated_exprs)


def test_template_variables_default_to_the_configured_endpoint(default_config: Config) -> None:
    for spec in dashboards(default_config):
        variables = {v["name"]: v for v in render(spec)["templating"]["list"]}
        assert variables["namespace"]["current"]["value"] == default_config.endpoint.namespace
        assert variables["endpoint"]["current"]["value"] == default_config.endpoint.name
        assert variables["datasource"]["type"] == "datasource"
    comparison = {v["name"]: v for v in render(dpd_vs_colocated(default_config))["templating"]["list"]}
    assert comparison["baseline"]["current"]["value"] == f"{default_config.endpoint.name}-colocated"


def test_dashboard_files_are_byte_identical_across_runs(default_config: Config, tmp_path: Path) -> None:
    first = write_dashboard_files(default_config, tmp_path / "a")
    second = write_dashboard_files(default_config, tmp_path / "b")
    assert [p.name for p in first] == [p.name for p in second] == sorted(dashboard_files(default_config))
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_config_maps_are_valid_and_labelled_for_the_grafana_sidecar(default_config: Config) -> None:
    maps = dashboard_config_maps(default_config)
    assert len(maps) == len(dashboards(default_config))
    for cm in maps:
        kubernetes_validate.validate(cm, "1.33", strict=True)
        assert cm["metadata"]["labels"] == {default_config.observability.grafana_sidecar_label: "1"}
        (name, text), = cm["data"].items()
        assert name.endswith(".json") and json.loads(text)["uid"] == name.removesuffix(".json")
        assert len(text.encode()) < 1_000_000  # ConfigMap size limit


def test_fails_validation_when_a_config_map_is_malformed(default_config: Config) -> None:
    cm = dashboard_config_maps(default_config)[0]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**cm, "data": {"x.json": 1}}, "1.33", strict=True)


def test_prometheus_rule_wraps_the_same_rule_groups(default_config: Config) -> None:
    from hyperpod_k8s.observability.alerts import alert_rule_groups

    rule = prometheus_rule(default_config)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"] == alert_rule_groups(default_config)
