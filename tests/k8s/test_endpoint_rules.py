"""One failing case per semantic rule of the endpoint (hyperpod_infra.config cross-field rules).

Each test mutates a copy of config/default.yaml and expects one line that names the offending field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from hyperpod_infra.config import parse_config
from hyperpod_infra.errors import ConfigError


def _fails(base: dict, mutate: Callable[[dict], None], field: str, *, mentions: str = "") -> str:
    data = copy.deepcopy(base)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(field) or f"{field}:" in message or f" {field} " in f" {message}", message
    assert mentions in message, message
    return message


def _groups(d: dict, **counts: int) -> None:
    for g in d["hyperpod"]["instance_groups"]:
        g["instance_count"] = counts.get(g["pool"], g["instance_count"])


def test_default_config_passes(default_config_dict):
    parse_config(default_config_dict)


def test_fails_when_role_gpus_exceed_the_instance_type(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"]["decode"].update(gpus=16), "endpoint.decode.gpus")


def test_fails_when_tensor_parallel_size_differs_from_role_gpus(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(tensor_parallel_size=4),
           "endpoint.prefill.gpus", mentions="endpoint.tensor_parallel_size (4)")


def test_fails_when_tensor_parallel_size_does_not_divide_the_node(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(tensor_parallel_size=3),
           "endpoint.tensor_parallel_size")


def test_fails_when_routing_threshold_reaches_max_model_len(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(routing_threshold_tokens=16384),
           "endpoint.routing_threshold_tokens", mentions="max_model_len")


def test_fails_when_more_than_one_decode_replica(default_config_dict):
    def mutate(d):
        _groups(d, decode=2)  # enough GPUs, so the operator limit is what fails
        d["endpoint"]["decode"]["replicas"] = 2
    _fails(default_config_dict, mutate, "endpoint.decode.replicas", mentions="operator v3.2")


def test_fails_when_decode_autoscaling_exceeds_one_decoder(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"]["autoscaling"]["decode"].update(max_replicas=2),
           "endpoint.autoscaling.decode.max_replicas", mentions="single decoder")


def test_fails_when_prefill_can_scale_past_what_the_decoder_admits(default_config_dict):
    def mutate(d):
        _groups(d, prefill=3)
        d["endpoint"]["autoscaling"].update(enabled=True, prefill={"min_replicas": 1, "max_replicas": 3,
                                                                   "target_value": 8})
    _fails(default_config_dict, mutate, "endpoint.autoscaling.prefill.max_replicas", mentions="48 sequences")


def test_fails_when_role_peak_needs_more_gpus_than_its_pool(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"]["prefill"].update(replicas=2), "endpoint.prefill.replicas",
           mentions="needs 16 GPUs")


def test_fails_when_kvaware_routing_uses_the_chat_path(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(routing_strategy="kvaware"),
           "endpoint.routing_strategy", mentions="v1/completions")


def test_kvaware_routing_passes_with_the_completions_path(default_config_dict):
    data = copy.deepcopy(default_config_dict)
    data["endpoint"].update(routing_strategy="kvaware", invocation_path="v1/completions")
    assert parse_config(data).endpoint.routing_strategy == "kvaware"


@pytest.mark.parametrize(("field", "mutate"), [
    ("endpoint.name", lambda d: d["endpoint"].update(name="Llama_70B")),
    ("endpoint.namespace", lambda d: d["endpoint"].update(namespace="Inference")),
    ("endpoint.name", lambda d: d["endpoint"].update(name="x" * 40, namespace="y" * 10)),
    ("model.name", lambda d: d["model"].update(name="llama.3.3")),
])
def test_fails_when_names_are_invalid_for_kubernetes_or_sagemaker(default_config_dict, field, mutate):
    _fails(default_config_dict, mutate, field)


def test_fails_when_the_endpoint_instance_type_cannot_run_dpd(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(instance_type="ml.g5.48xlarge"),
           "endpoint.instance_type", mentions="EFA RDMA")


def test_fails_when_autoscaling_has_no_prometheus_workspace(default_config_dict):
    def mutate(d):
        d["endpoint"]["autoscaling"]["enabled"] = True
        d["observability"]["enabled"] = False
    _fails(default_config_dict, mutate, "endpoint.autoscaling.enabled", mentions="observability.enabled")


def test_fails_when_decode_target_is_not_a_ratio(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"]["autoscaling"]["decode"].update(target_value=80),
           "endpoint.autoscaling.decode.target_value")


def test_fails_when_the_image_is_not_pinned(default_config_dict):
    _fails(default_config_dict, lambda d: d["endpoint"].update(image="lmcache/vllm-openai"), "endpoint.image")


def test_operator_limits_that_are_only_reported_cite_their_source(default_config_dict):
    from hyperpod_k8s.endpoint.props import limit_notes

    data = copy.deepcopy(default_config_dict)
    _groups(data, prefill=2)
    data["endpoint"]["prefill"]["replicas"] = 2
    data["endpoint"]["image"] = "example.com/vllm:1.0"
    notes = limit_notes(parse_config(data))
    assert any("'roundrobin' for several prefillers (DPD guide" in n for n in notes), notes
    assert any("not one of the DPD images AWS supports" in n for n in notes), notes
    assert limit_notes(parse_config(default_config_dict)) == []
