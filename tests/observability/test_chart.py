"""The ``<endpoint>-observability`` chart, built alone in a bare cdk8s app from explicit props: only with
``observability.in_cluster_manifests`` are there props at all (HyperPod's add-on installs neither prometheus-operator's
CRDs nor a Grafana sidecar: lifecycle-facts.md); the dashboards become sidecar ConfigMaps (Kubernetes 1.33 schema,
kubernetes-validate strict) and the alerts PrometheusRules with the rule groups AMP gets: the endpoint's in its chart,
the cluster-wide ones in the deployment's own chart."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from hyperpod_core.config import Config, parse_config
from hyperpod_core.telemetry.alerts import alert_rule_groups
from hyperpod_core.telemetry.dashboards import dashboards
from hyperpod_k8s.observability.props import (
    CLUSTER_ALERTS_NAMESPACE,
    ClusterAlertsChartProps,
    ObservabilityChartProps,
    PrometheusRuleSpec,
    cluster_alerts_props,
    dashboard_files,
    observability_props,
)


def _in_cluster(default_config_dict: dict) -> Config:
    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["in_cluster_manifests"] = True
    return parse_config(data)


def _docs(props: ObservabilityChartProps) -> list[dict]:
    import cdk8s

    from hyperpod_k8s.observability.observability_chart import ObservabilityChart

    return ObservabilityChart(cdk8s.App(), "observability", props=props).to_json()


def _cluster_docs(props: ClusterAlertsChartProps) -> list[dict]:
    import cdk8s

    from hyperpod_k8s.observability.cluster_alerts_chart import ClusterAlertsChart

    return ClusterAlertsChart(cdk8s.App(), "dpd-cluster-alerts", props=props).to_json()


@pytest.fixture(scope="module")
def in_cluster(default_config_dict: dict) -> Config:
    return _in_cluster(default_config_dict)


@pytest.fixture(scope="module")
def docs(in_cluster: Config) -> list[dict]:
    props = observability_props(in_cluster.spec())
    assert props is not None
    return _docs(props)


@pytest.fixture(scope="module")
def cluster_docs(in_cluster: Config) -> list[dict]:
    props = cluster_alerts_props(in_cluster.name, in_cluster.observability)
    assert props is not None
    return _cluster_docs(props)


def test_by_default_nothing_needs_prometheus_operator(default_config: Config) -> None:
    assert default_config.observability.in_cluster_manifests is False
    assert observability_props(default_config.spec()) is None
    assert cluster_alerts_props(default_config.name, default_config.observability) is None


def test_nothing_is_wanted_when_observability_is_disabled(default_config_dict: dict) -> None:
    data = json.loads(json.dumps(default_config_dict))
    data["observability"].update(enabled=False, in_cluster_manifests=True)
    data["endpoint"]["autoscaling"]["enabled"] = False
    config = parse_config(data)
    assert observability_props(config.spec()) is None
    assert cluster_alerts_props(config.name, config.observability) is None


def test_the_charts_hold_the_dashboards_and_the_alerts(in_cluster: Config, docs: list[dict],
                                                       cluster_docs: list[dict]) -> None:
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "ConfigMap", "PrometheusRule"]
    assert [d["kind"] for d in cluster_docs] == ["PrometheusRule"]
    shipped = {k: v for d in docs if d["kind"] == "ConfigMap" for k, v in d["data"].items()}
    assert shipped == dashboard_files(in_cluster.spec())
    rules = [d for d in (*docs, *cluster_docs) if d["kind"] == "PrometheusRule"]
    assert {(r["apiVersion"], r["metadata"]["namespace"]) for r in rules} == {("monitoring.coreos.com/v1", "default")}
    # Together, exactly the rule groups AMP gets.
    assert [g for r in rules for g in r["spec"]["groups"]] == alert_rule_groups(in_cluster.specs())["groups"]
    again = observability_props(in_cluster.spec())
    assert again is not None and _docs(again) == docs, "the same props give the same objects"
    cluster_again = cluster_alerts_props(in_cluster.name, in_cluster.observability)
    assert cluster_again is not None and _cluster_docs(cluster_again) == cluster_docs


def test_the_cluster_rules_are_the_deployments_never_an_endpoints(in_cluster: Config, cluster_docs: list[dict],
                                                                  default_config_dict: dict) -> None:
    """The heartbeat and the cluster-metrics alert once per deployment, in their own chart and the fixed namespace
    ``default``, never in an endpoint's chart (each would fire once more), whatever the endpoint's namespace."""
    endpoint = observability_props(in_cluster.spec())
    assert endpoint is not None and [r.name for r in endpoint.alerts] == ["llama-3-3-70b-dpd-alerts"]
    assert [(d["metadata"]["name"], d["metadata"]["namespace"]) for d in cluster_docs] == [
        ("dpd-cluster-alerts", CLUSTER_ALERTS_NAMESPACE)]
    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["in_cluster_manifests"] = True
    data["endpoint"]["namespace"] = "inference"
    moved = parse_config(data)
    props = cluster_alerts_props(moved.name, moved.observability)
    assert props is not None and props.namespace == CLUSTER_ALERTS_NAMESPACE == "default"


def test_the_sidecar_files_the_dashboards_under_the_deployments_folder(docs: list[dict]) -> None:
    """Two deployments' dashboards in one Grafana keep apart (kube-prometheus-stack's sidecar: folderAnnotation)."""
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert {m["metadata"]["annotations"]["grafana_folder"] for m in maps} == {"HyperPod DPD (hyperpod-dpd)"}


def test_config_maps_are_valid_and_labelled_for_the_grafana_sidecar(in_cluster: Config, docs: list[dict]) -> None:
    maps = [d for d in docs if d["kind"] == "ConfigMap"]
    assert len(maps) == len(dashboards(in_cluster.spec()))
    for cm in maps:
        kubernetes_validate.validate(cm, "1.33", strict=True)
        assert cm["metadata"]["labels"] == {in_cluster.observability.grafana_sidecar_label: "1"}
        (name, text), = cm["data"].items()
        assert name.endswith(".json") and json.loads(text)["uid"] == name.removesuffix(".json")
        assert len(text.encode()) < 1_000_000  # ConfigMap size limit
        # cdk8s-plus's one default on a ConfigMap, kept: the Kubernetes default (the sidecar reloads changed maps).
        assert cm["immutable"] is False


def test_fails_validation_when_a_config_map_is_malformed(docs: list[dict]) -> None:
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**cm, "data": {"x.json": 1}}, "1.33", strict=True)


def test_fails_when_a_rule_has_a_field_a_prometheus_rule_has_not(in_cluster: Config) -> None:
    """The rule groups are typed on their way into the PrometheusRule: a misspelt field is refused by name instead
    of being written into a manifest the operator would reject (prometheus-operator ``Rule``: alert, expr, for,
    labels, annotations)."""
    doc = alert_rule_groups(in_cluster.specs())
    doc["groups"][0]["rules"][0] = {**doc["groups"][0]["rules"][0], "expression": "up == 0"}
    with pytest.raises(TypeError, match="expression"):
        PrometheusRuleSpec.from_rule_file(doc)
