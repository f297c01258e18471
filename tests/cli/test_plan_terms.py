"""Each term the planner adds, against hand-computed values from published numbers (source next to each)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hyperpod_analysis.plan import terms
from hyperpod_analysis.plan.engine import ROOFLINE_H100_ANCHORS, RooflineEngine
from hyperpod_analysis.plan.facts import H100_SXM, H200_SXM, MODELS, PLANNER_INSTANCE_FACTS, GpuFacts, resolve_model
from hyperpod_analysis.plan.traffic import parse
from hyperpod_core.errors import UsageError

LLAMA_70B = MODELS["meta-llama/Llama-3.3-70B-Instruct"]
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B-Instruct"]
P5 = PLANNER_INSTANCE_FACTS["ml.p5.48xlarge"]


def test_kv_bytes_per_token_of_llama_3_3_70b() -> None:
    """config.json (huggingface.co/meta-llama/Llama-3.3-70B-Instruct): 80 layers, 8 KV heads, hidden 8192 / 64
    heads = head_dim 128, bfloat16: 2 x 80 x 8 x 128 x 2 = 327,680 bytes."""
    assert LLAMA_70B.head_dim == 128
    assert terms.kv_bytes_per_token(LLAMA_70B) == 327_680


def test_kv_bytes_per_token_of_llama_3_1_8b() -> None:
    """dpd-anchors.md: "Llama-3.1-8B (128 KiB/token in bf16: 2*32 layers*8 KV heads*128*2 B)"."""
    assert terms.kv_bytes_per_token(LLAMA_8B) == 128 * 1024


def test_parameter_count_matches_the_published_size() -> None:
    """Hugging Face lists Llama-3.3-70B-Instruct at 70.6B parameters (safetensors metadata)."""
    assert LLAMA_70B.parameters == pytest.approx(70.6e9, rel=0.005)


def test_kv_transfer_of_an_8k_prompt_at_the_measured_rate() -> None:
    """dpd-anchors.md: a Llama-3.x-70B 8k prefix is 2.5 GiB, ~280 ms at Dynamo's measured 9.6 GB/s (p5.48xlarge)."""
    rate = terms.kv_transfer_bytes_per_s(P5, terms.MEASURED_KV_TRANSFER_BYTES_PER_S)
    assert rate == 9.6e9
    assert 8192 * terms.kv_bytes_per_token(LLAMA_70B) / 2**30 == 2.5
    assert terms.kv_transfer_seconds(8192, LLAMA_70B, rate) == pytest.approx(0.2796, abs=1e-4)


def test_kv_transfer_rate_is_capped_by_the_node_efa_bandwidth() -> None:
    """p5.48xlarge: 3200 Gbps of EFA = 400 GB/s (aws.amazon.com/ec2/instance-types/p5)."""
    assert terms.kv_transfer_bytes_per_s(P5, 1e12) == 400e9


@pytest.mark.parametrize(("prompt", "disaggregated"), [(4096, True), (4095, False), (16000, True), (1, False)])
def test_router_threshold_is_inclusive(prompt: int, disaggregated: bool) -> None:
    """CRD pdSpec.routingThreshold: "Requests with estimated input tokens >= threshold go through DPD"."""
    assert terms.routed_to_prefill(prompt, 4096) is disaggregated


@pytest.mark.parametrize(("replicas", "tp", "nodes"),
                         [(1, 8, 1), (3, 8, 3), (3, 4, 2), (8, 1, 1), (9, 1, 2), (0, 8, 0)])
def test_replicas_take_whole_eight_gpu_nodes(replicas: int, tp: int, nodes: int) -> None:
    assert terms.nodes_for(replicas, tp, 8) == nodes


def test_tp_that_does_not_divide_a_node_is_refused() -> None:
    with pytest.raises(UsageError, match=r"must divide the 8 GPUs of one node .*got 3"):
        terms.replicas_per_node(3, 8)


def test_pd_buffer_holds_the_peak_prompt_tokens_per_rank_with_headroom() -> None:
    """51 requests of 4096 tokens: 208,896 x 327,680 / 8 ranks = 8.56e9 B, x1.25 = 9.96 GiB -> 10 GiB."""
    assert terms.pd_buffer_bytes(51 * 4096, LLAMA_70B, 8) == 10 * 2**30
    assert terms.pd_buffer_bytes(4096, LLAMA_70B, 8) == 2**30  # the config's minimum
    assert terms.pd_buffer_bytes(10**7, LLAMA_70B, 8) == 64 * 2**30  # the config's maximum


#: AIConfigurator 0.12.0 ``cli_estimate``, system h100_sxm, backend vllm 0.24.0, Llama-3.1-70B, TP 8: prefill
#: latency (ms) by prompt tokens (``static_ctx``) and decode TPOT (ms) by batch at 4096 in / 256 out
#: (``static_gen``). Written here, not read from the engine, so the fit cannot move its own target.
AICONFIGURATOR_H100_TP8_PREFILL_MS = {1024: 46.24, 4096: 169.60, 8192: 344.26}
AICONFIGURATOR_H100_TP8_TPOT_MS = {1: 10.34, 8: 10.38, 16: 11.42, 32: 12.72}


def test_the_engine_documents_the_data_it_was_fitted_to() -> None:
    assert ROOFLINE_H100_ANCHORS == {"prefill_ms_by_tokens": AICONFIGURATOR_H100_TP8_PREFILL_MS,
                                     "decode_tpot_ms_by_batch": AICONFIGURATOR_H100_TP8_TPOT_MS}


@pytest.mark.parametrize(("tokens", "ms"), sorted(AICONFIGURATOR_H100_TP8_PREFILL_MS.items()))
def test_roofline_prefill_matches_aiconfigurator_silicon_data(tokens: int, ms: float) -> None:
    engine = RooflineEngine(LLAMA_70B, H100_SXM, 8)
    got = engine.step_seconds(decode_tokens=0, decode_context=0, prefill_tokens=tokens,
                              prefill_attention=tokens * tokens / 2, eager=False)
    assert got * 1e3 == pytest.approx(ms, rel=0.06)


@pytest.mark.parametrize(("batch", "ms"), sorted(AICONFIGURATOR_H100_TP8_TPOT_MS.items()))
def test_roofline_decode_matches_aiconfigurator_silicon_data(batch: int, ms: float) -> None:
    engine = RooflineEngine(LLAMA_70B, H100_SXM, 8)
    got = engine.step_seconds(decode_tokens=batch, decode_context=batch * (4096 + 128), prefill_tokens=0,
                              prefill_attention=0, eager=False)
    assert got * 1e3 == pytest.approx(ms, rel=0.06)


def test_model_from_a_hugging_face_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8, '
        '"intermediate_size": 28672, "vocab_size": 128256, "torch_dtype": "bfloat16"}')
    assert terms.kv_bytes_per_token(resolve_model(str(tmp_path))) == 327_680


def test_unknown_model_names_what_is_allowed() -> None:
    with pytest.raises(UsageError, match=r"^--model must be one of .*Llama-3.3-70B-Instruct.* got 'gpt-9'$"):
        resolve_model("gpt-9")


@pytest.mark.parametrize(("text", "kind", "mean_in", "mean_out"), [
    ("D(4096,256)", "D", 4096, 256), ("N(480,240)/(300,150)", "N", 480, 300), ("U(100,200)/(10,20)", "U", 150, 15),
    ("U(1000,100)", "U", 500.5, 50.5), ("P(2000,500)/200", "P", 2500, 200)])
def test_genai_bench_scenarios_parse(text: str, kind: str, mean_in: float, mean_out: float) -> None:
    """The examples in genai-bench's genai_bench/scenarios/text.py docstrings."""
    t = parse(text)
    assert (t.kind, t.mean_input, t.mean_output) == (kind, mean_in, mean_out)


def test_sampling_keeps_genai_bench_floors() -> None:
    """genai-bench: N and U draw max(1, int(x)) prompt and max(2, int(x)) output tokens."""
    rng = random.Random(3)
    draws = [parse("N(10,50)/(3,50)").sample(rng) for _ in range(500)]
    assert min(i for i, _ in draws) == 1 and min(o for _, o in draws) == 2
    assert all(100 <= i < 200 and 10 <= o < 20 for i, o in (parse("U(100,200)/(10,20)").sample(rng)
                                                             for _ in range(200)))


def test_prefix_scenario_shares_its_prefix() -> None:
    t = parse("P(2000,500)/200")
    assert t.shared_prefix == 2000 and t.sample(random.Random(0)) == (2500, 200)


@pytest.mark.parametrize("text", ["D(4096)", "X(1,2)", "U(200,100)/(1,2)", "D(0,256)", "4096/256", "D(4096.5,256)",
                                  "P(2000,500)"])
def test_bad_scenarios_name_the_syntax(text: str) -> None:
    with pytest.raises(UsageError, match=r"^--traffic "):
        parse(text)


#: Not used for fitting: AIConfigurator 0.12.0 (vllm 0.24.0 silicon data, Llama-3.1-70B) at other points, to show the
#: fitted roofline carries over. (gpu, tp, kind, batch or prompt tokens, ms)
_HELD_OUT = [
    (H200_SXM, 8, "prefill", 4096, 164.92), (H200_SXM, 8, "decode", 1, 8.09), (H200_SXM, 8, "decode", 32, 10.53),
    (H100_SXM, 4, "prefill", 4096, 264.07), (H100_SXM, 4, "decode", 32, 20.30),
]


@pytest.mark.parametrize(("gpu", "tp", "kind", "n", "ms"), _HELD_OUT,
                         ids=[f"{g.name.split()[0]}-tp{tp}-{k}-{n}" for g, tp, k, n, _ in _HELD_OUT])
def test_roofline_carries_over_to_other_gpus_and_tp(gpu: GpuFacts, tp: int, kind: str, n: int, ms: float) -> None:
    engine = RooflineEngine(LLAMA_70B, gpu, tp)
    if kind == "prefill":
        got = engine.step_seconds(decode_tokens=0, decode_context=0, prefill_tokens=n, prefill_attention=n * n / 2,
                                  eager=False)
    else:
        got = engine.step_seconds(decode_tokens=n, decode_context=n * (4096 + 128), prefill_tokens=0,
                                  prefill_attention=0, eager=False)
    assert got * 1e3 == pytest.approx(ms, rel=0.08)


def test_planner_knows_every_dpd_instance_type_but_b300() -> None:
    """The planner covers the DPD instance types of the config rules; ml.p6-b300 (no GPU data in
    AIConfigurator 0.12.0) is refused with one line rather than estimated from a guess."""
    from hyperpod_core.sizing import DPD_INSTANCE_GPUS

    assert set(DPD_INSTANCE_GPUS) - set(PLANNER_INSTANCE_FACTS) == {"ml.p6-b300.48xlarge"}
