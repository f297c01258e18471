"""Cold start and the load balancer (operator v3.3): ``spec.modelCacheConfig`` and ``loadBalancer.idleTimeoutSeconds``.

Expected values come from the v3.3 CRD (read here from the pinned file), AWS's model-caching page
(sagemaker-hyperpod-model-deployment-model-caching: "You configure both caching mechanisms through the
modelCacheConfig field on your InferenceEndpointConfig"; the operator creates the ModelImageCache), EC2's
instance-store table (8 x 3840 GB NVMe SSD on every DPD instance type) and the issue's formula for the timeout.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import yaml

from hyperpod_core.config import parse_config

REPO_ROOT = Path(__file__).resolve().parents[2]
CASE_IDS = ["default", "p5en-two-prefill"]  # the cases of conftest.CASES


@pytest.fixture(scope="module")
def iec_schema() -> dict:
    from hyperpod_k8s.crd_source import resolve_crd

    crd = yaml.safe_load(resolve_crd().read_text(encoding="utf-8"))
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def _endpoints(synthesized, case: str) -> list[dict]:
    s = synthesized[case]
    return [s.one("-dpd.k8s.yaml"), s.one("-colocated.k8s.yaml")]


@pytest.mark.parametrize("case", CASE_IDS)
def test_both_manifests_carry_the_same_cache_and_timeout(synthesized, case):
    """The colocated baseline starts as fast as DPD does, or the A/B compares cold starts."""
    dpd, colocated = _endpoints(synthesized, case)
    assert dpd["spec"]["modelCacheConfig"] == colocated["spec"]["modelCacheConfig"]
    assert dpd["spec"]["loadBalancer"] == colocated["spec"]["loadBalancer"]


@pytest.mark.parametrize("case", CASE_IDS)
def test_image_pre_pull_and_nvme_weights_cache_are_on_by_default(synthesized, iec_schema, case):
    weights_schema = iec_schema["modelCacheConfig"]["properties"]["weightsCache"]["properties"]
    for doc in _endpoints(synthesized, case):
        cache = doc["spec"]["modelCacheConfig"]
        assert cache == {"imageCache": {"enabled": True},
                         "weightsCache": {"enabled": True, "hostPath": weights_schema["hostPath"]["default"]}}
        assert cache["weightsCache"]["hostPath"] == "/opt/dlami/nvme"


def test_only_the_endpoint_is_written_the_operator_creates_the_cache_objects(synthesized):
    """AWS's page has users write ``modelCacheConfig`` only; ModelImageCache / ModelWeightsCacheConfig are the
    operator's (CRD: "the operator creates a ModelImageCache resource")."""
    texts = [text for case in CASE_IDS for text in synthesized[case].files.values()]
    assert texts and not [t for t in texts if re.search(r"^kind: (ModelImageCache|ModelWeightsCacheConfig)$", t, re.M)]
    assert all(re.search(r"^kind: ", t, re.M) for t in texts)  # the pattern sees every object's kind line


@pytest.mark.parametrize(("case", "expected"), [
    ("default", math.ceil(2.5 + 16384 * 0.1)),          # slo 2.5 s + 16384 tokens x 0.1 s = 1640.9 -> 1641
    ("p5en-two-prefill", math.ceil(2.5 + 32768 * 0.1)),  # max-model-len 32768 -> 3279.3 -> 3280
])
def test_idle_timeout_is_the_longest_answer_the_slos_allow(synthesized, iec_schema, case, expected):
    bounds = iec_schema["loadBalancer"]["properties"]["idleTimeoutSeconds"]
    for doc in _endpoints(synthesized, case):
        timeout = doc["spec"]["loadBalancer"]["idleTimeoutSeconds"]
        assert timeout == expected
        assert bounds["minimum"] <= timeout <= bounds["maximum"] == 4000
    assert "clamped" not in synthesized[case].stderr


def test_restricted_example_gets_the_documented_defaults():
    c = parse_config(yaml.safe_load((REPO_ROOT / "config/examples/restricted-endpoint.yaml").read_text()))
    cache = c.spec().resolved_model_cache()
    assert (cache.image_cache, cache.weights_cache, cache.weights_cache_host_path) == (True, True, "/opt/dlami/nvme")
    assert c.spec().load_balancer_idle_timeout().seconds == math.ceil(2.0 + 16384 * 0.1)


@pytest.fixture(scope="module")
def default_config_dict_module() -> dict:
    return yaml.safe_load((REPO_ROOT / "config" / "default.yaml").read_text())


def _props(data: dict):
    from tests.k8s.endpoint_props import props_of

    c = parse_config(data)
    return c.spec(), props_of(c)


def test_a_timeout_past_the_alb_maximum_is_clamped_with_one_note(default_config_dict):
    from hyperpod_k8s.endpoint.props import cold_start_notes

    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["max_model_len"] = 65536  # 2.5 + 65536 x 0.1 = 6556.1 s: above the CRD's 4000
    c, p = _props(data)
    assert p.load_balancer_idle_timeout_seconds == 4000
    (note,) = cold_start_notes(c)
    assert note.startswith("endpoint.load_balancer_idle_timeout_seconds clamped to 4000: slo.ttft_p95_seconds 2.5 "
                           "+ endpoint.max_model_len 65536 x slo.tpot_p95_seconds 0.1 = 6556 s")
    assert "\n" not in note


def test_an_explicit_timeout_is_emitted_as_given(default_config_dict):
    from hyperpod_k8s.endpoint.props import cold_start_notes

    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["load_balancer_idle_timeout_seconds"] = 600
    c, p = _props(data)
    assert p.load_balancer_idle_timeout_seconds == 600 and cold_start_notes(c) == []


@pytest.fixture(scope="module")
def caches_off_long_context(tmp_path_factory, default_config_dict_module):
    """One synth through the real entry point: caches switched off in the file, and a max-model-len whose
    derived timeout exceeds the ALB's maximum."""
    import contextlib
    import io

    from hyperpod_k8s import main

    data = copy.deepcopy(default_config_dict_module)
    data["endpoint"]["max_model_len"] = 65536
    data["endpoint"]["model_cache"] = {"image_cache": False, "weights_cache": False}
    tmp = tmp_path_factory.mktemp("cold-start")
    config = tmp / "long.yaml"
    config.write_text(yaml.safe_dump(data))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        main.main(["--config", str(config), "--outdir", str(tmp / "dist")])
    from hyperpod_core.dist_layout import DistLayout

    placed = DistLayout.found(tmp / "dist", "llama-3-3-70b", "dpd")  # no outputs: under placeholders/
    dpd = yaml.safe_load(placed.endpoint_file("dpd").read_text())
    colocated = yaml.safe_load(placed.endpoint_file("colocated").read_text())
    return err.getvalue(), dpd, colocated


def test_synth_clamps_with_one_note_and_writes_the_caches_off(caches_off_long_context, crd_validator):
    stderr, dpd, colocated = caches_off_long_context
    notes = [line for line in stderr.splitlines() if "idle_timeout" in line]
    assert len(notes) == 1 and notes[0].startswith("note: endpoint.load_balancer_idle_timeout_seconds clamped to 4000")
    for doc in (dpd, colocated):
        assert doc["spec"]["loadBalancer"]["idleTimeoutSeconds"] == 4000
        # hostPath only with the cache on: the CRD default would otherwise be written for a cache that is off
        assert doc["spec"]["modelCacheConfig"] == {"imageCache": {"enabled": False}, "weightsCache": {"enabled": False}}
        assert crd_validator.errors(doc) == []
