"""The PrometheusRule comes from ``cdk8s import`` of prometheus-operator's CRD (vendored in k8s/crds/, SOURCES.md
there) and passes that CRD's ``openAPIV3Schema`` the way the API server checks it (tests/k8s/crd_schema.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import pytest

from hyperpod_core.config import parse_config
from hyperpod_k8s.observability.props import observability_props

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "k8s" / "crds" / "monitoring.coreos.com_prometheusrules.yaml"
SOURCES = CRD.with_name("SOURCES.md")


@pytest.fixture(scope="module")
def chart(default_config_dict: dict):
    import cdk8s

    from hyperpod_k8s.observability.observability_chart import ObservabilityChart

    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["in_cluster_manifests"] = True
    props = observability_props(parse_config(data).spec())
    assert props is not None
    return ObservabilityChart(cdk8s.App(), "observability", props=props)


@pytest.fixture(scope="module")
def rule(chart) -> dict:
    docs = [d for d in chart.to_json() if d["kind"] == "PrometheusRule"]
    assert len(docs) == 1  # the endpoint's rules (the cluster-wide ones are the deployment's chart's)
    return docs[0]


@pytest.fixture(scope="module")
def validator():
    from tests.k8s.crd_schema import CrdValidator

    return CrdValidator.from_file(CRD)


def test_the_vendored_crd_is_the_upstream_file_byte_for_byte() -> None:
    """``git hash-object`` of the copy equals the blob id SOURCES.md records for the upstream path at the tag."""
    (recorded,) = re.findall(r"Blob id \(`git hash-object`\) \| `([0-9a-f]{40})`", SOURCES.read_text(encoding="utf-8"))
    data = CRD.read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == recorded


def test_the_rule_is_the_class_cdk8s_import_generated(chart) -> None:
    from hyperpod_k8s.imports.com.coreos import monitoring

    assert chart.alerts and all(type(rule) is monitoring.PrometheusRule for rule in chart.alerts)


def test_the_synthesized_rule_validates_against_the_crd_schema(validator, rule: dict) -> None:
    assert validator.knows(rule)
    assert rule["spec"]["groups"] and all(g["rules"] for g in rule["spec"]["groups"])
    assert validator.errors(rule) == []


# One case per kind of check the API server makes on this CRD (its schema at v0.93.0).
@pytest.mark.parametrize(("what", "mutate", "expected"), [
    ("duration pattern", lambda d: d["spec"]["groups"][0]["rules"][0].update({"for": "5 minutes"}), "does not match"),
    ("unknown rule field", lambda d: d["spec"]["groups"][0]["rules"][0].update(expression="up == 0"),
     "Additional properties are not allowed ('expression'"),
    ("required expr", lambda d: d["spec"]["groups"][0]["rules"][0].pop("expr"), "'expr' is a required property"),
    ("group name list-map key", lambda d: d["spec"]["groups"].append(copy.deepcopy(d["spec"]["groups"][0])),
     "duplicate entry with {'name':"),
])
def test_fails_validation_when_the_rule_breaks_the_crd_schema(validator, rule: dict, what, mutate, expected) -> None:
    bad = copy.deepcopy(rule)
    mutate(bad)
    assert any(expected in error for error in validator.errors(bad)), what


def test_the_cluster_wide_rule_is_the_generated_class_and_validates_against_the_crd_schema(
        validator, default_config_dict: dict) -> None:
    import cdk8s

    from hyperpod_k8s.imports.com.coreos import monitoring
    from hyperpod_k8s.observability.cluster_alerts_chart import ClusterAlertsChart
    from hyperpod_k8s.observability.props import cluster_alerts_props

    data = json.loads(json.dumps(default_config_dict))
    data["observability"]["in_cluster_manifests"] = True
    config = parse_config(data)
    props = cluster_alerts_props(config.name, config.observability)
    assert props is not None
    chart = ClusterAlertsChart(cdk8s.App(), "dpd-cluster-alerts", props=props)
    assert type(chart.alerts) is monitoring.PrometheusRule
    (doc,) = chart.to_json()
    assert validator.knows(doc) and validator.errors(doc) == []
