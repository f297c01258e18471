"""Every emitted object passes the API server's schema: CRD openAPIV3Schema or the built-in kinds."""

from __future__ import annotations

import copy
import os

import pytest

CASE_IDS = ["default", "p5en-two-prefill"]  # the cases of conftest.CASES


@pytest.mark.parametrize("case", CASE_IDS)
def test_every_custom_resource_validates_against_the_crd(synthesized, crd_validator, case):
    custom = [d for d in synthesized[case].docs() if crd_validator.knows(d)]
    # the DPD endpoint, the colocated baseline, the two aws-reference layouts, the equal-gpu pinned DPD layout
    assert len(custom) == 5
    for doc in custom:
        assert crd_validator.errors(doc) == [], doc["metadata"]["name"]


def test_manifests_are_checked_against_the_v33_crd(crd_validator, synthesized):
    """The schema in use is v3.3's: a v3.2 CRD has no modelCacheConfig and would reject every manifest."""
    from hyperpod_core import pins
    from hyperpod_k8s.crd_source import ENV_VAR, resolve_crd

    assert pins.INFERENCE_OPERATOR_APP_VERSION == "3.3"
    assert resolve_crd().parent.name == "v3.3" or ENV_VAR in os.environ
    doc = synthesized["default"].one("-dpd.k8s.yaml")
    assert "modelCacheConfig" in doc["spec"] and crd_validator.errors(doc) == []


@pytest.mark.parametrize("case", CASE_IDS)
def test_every_builtin_kind_validates_against_kubernetes_1_33(synthesized, crd_validator, case):
    import kubernetes_validate

    for doc in synthesized[case].docs():
        # PrometheusRule: not a built-in kind; tests/observability/test_prometheus_rule_crd.py validates it against
        # prometheus-operator's CRD (k8s/crds/).
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        if not crd_validator.knows(doc):
            kubernetes_validate.validate(doc, "1.33", strict=True)


# --- the validator itself catches what the API server would reject ------------------------------------


@pytest.fixture(scope="module")
def dpd(synthesized) -> dict:
    return synthesized["p5en-two-prefill"].one("-dpd.k8s.yaml")


def _errors(validator, doc, mutate) -> list[str]:
    bad = copy.deepcopy(doc)
    mutate(bad)
    return validator.errors(bad)


@pytest.mark.parametrize(("what", "mutate", "expected"), [
    ("unknown field", lambda d: d["spec"]["pdSpec"]["prefillSpec"].update(replica=2),
     "Additional properties are not allowed ('replica'"),
    ("enum", lambda d: d["spec"]["intelligentRoutingSpec"].update(routingStrategy="random"),
     "spec.intelligentRoutingSpec.routingStrategy"),
    ("pattern", lambda d: d["spec"]["pdSpec"]["autoScalingSpec"]["prefillAutoScaling"]["prometheusTrigger"]
     .update(serverAddress="http://prometheus:9090"), "serverAddress"),
    ("minimum", lambda d: d["spec"]["pdSpec"]["decodingSpec"].update(replicas=0), "less than the minimum of 1"),
    ("int32 range", lambda d: d["spec"]["pdSpec"].update(routingThreshold=2**31), "routingThreshold"),
    ("int-or-string", lambda d: d["spec"]["pdSpec"]["prefillSpec"]["resources"]["requests"].update(cpu=9.5),
     "requests.cpu"),
    ("quantity pattern", lambda d: d["spec"]["worker"]["resources"]["requests"].update(memory="lots"),
     "does not match"),
    ("list-map key", lambda d: d["spec"]["worker"]["environmentVariables"].append(
        {"name": "PYTHONHASHSEED", "value": "1"}), "duplicate entry with {'name': 'PYTHONHASHSEED'}"),
    ("required", lambda d: d["spec"]["pdSpec"].pop("decodingSpec"), "'decodingSpec' is a required property"),
    ("metadata name", lambda d: d["metadata"].update(name="Llama_70B"), "metadata.name"),
    # operator v3.3 fields (shared/crds/v3.3/SOURCES.md: idleTimeoutSeconds 1-4000, imageCache requires enabled,
    # weightsCache.hostPath 1-255 characters)
    ("v3.3 maximum", lambda d: d["spec"]["loadBalancer"].update(idleTimeoutSeconds=4001), "4001 is greater than"),
    ("v3.3 minimum", lambda d: d["spec"]["loadBalancer"].update(idleTimeoutSeconds=0), "0 is less than"),
    ("v3.3 required", lambda d: d["spec"]["modelCacheConfig"]["imageCache"].pop("enabled"),
     "'enabled' is a required property"),
    ("v3.3 length", lambda d: d["spec"]["modelCacheConfig"]["weightsCache"].update(hostPath=""), "hostPath"),
    ("v3.3 unknown cache", lambda d: d["spec"]["modelCacheConfig"].update(kvCache={"enabled": True}),
     "Additional properties are not allowed ('kvCache'"),
])
def test_validator_rejects(crd_validator, dpd, what, mutate, expected):
    errors = _errors(crd_validator, dpd, mutate)
    assert any(expected in e for e in errors), (what, errors)


def test_validator_accepts_int_or_string_either_way(crd_validator, dpd):
    def as_strings(d):
        d["spec"]["pdSpec"]["prefillSpec"]["resources"]["requests"].update(cpu="96", **{"nvidia.com/gpu": "8"})
    assert _errors(crd_validator, dpd, as_strings) == []


def test_validator_refuses_cel_rules_it_cannot_evaluate():
    from tests.k8s.crd_schema import to_json_schema

    with pytest.raises(ValueError, match="x-kubernetes-validations"):
        to_json_schema({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 0"}]}}})


def test_validator_keeps_preserve_unknown_fields_open():
    import jsonschema
    from tests.k8s.crd_schema import to_json_schema

    schema = to_json_schema({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {"type": "string"}}}}})
    jsonschema.Draft7Validator(schema).validate(
        {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"}, "spec": {"a": "1", "anything": {"b": 2}}})
