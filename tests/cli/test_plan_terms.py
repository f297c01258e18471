"""Each term the planner adds, against hand-computed values from published numbers (source next to each)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hyperpod_analysis.plan import terms
from hyperpod_analysis.plan.facts import MODELS, resolve_model
from hyperpod_analysis.plan.traffic import parse
from hyperpod_core.errors import UsageError
from hyperpod_core.instances import DPD_INSTANCE_GPUS, GPUS, INSTANCE_FACTS

LLAMA_70B = MODELS["meta-llama/Llama-3.3-70B-Instruct"]
LLAMA_8B = MODELS["meta-llama/Llama-3.1-8B-Instruct"]
P5 = INSTANCE_FACTS["ml.p5.48xlarge"]


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


def test_gpu_datasheet_figures() -> None:
    """NVIDIA datasheets: H100/H200 SXM 989.5 TFLOPS dense BF16 (1,979 with sparsity), 3.35 / 4.8 TB/s, NVLink 900 GB/s
    both ways; HGX B200/B300 36 PFLOPS BF16 with sparsity per 8 GPUs, 8 TB/s, NVLink 5 1.8 TB/s both ways."""
    got = {n.split()[0]: (g.bf16_dense_flops, g.hbm_bytes_per_s, g.nvlink_bytes_per_s) for n, g in GPUS.items()}
    assert got == {"H100": (989.5e12, 3.35e12, 450e9), "H200": (989.5e12, 4.8e12, 450e9),
                   "B200": (2.25e15, 8e12, 900e9), "B300": (2.25e15, 8e12, 900e9)}
    assert all(g.source for g in GPUS.values())


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


def test_planner_knows_every_dpd_instance_type_from_the_one_instance_table() -> None:
    """The config's DPD instance types, each the row of the core's instance table the config's rules read (one
    table: the planner keeps no GPU or EFA figures of its own)."""
    from hyperpod_analysis.plan.facts import instance_facts

    assert all(instance_facts(t) is INSTANCE_FACTS[t] for t in DPD_INSTANCE_GPUS)
    assert instance_facts("ml.p6-b300.48xlarge").gpu.name == "B300 288GB"


def test_qwen3_head_dim_comes_from_config_json() -> None:
    """Qwen3-32B config.json: head_dim 128 (not hidden 5120 / 64 heads = 80), 8 KV heads, 64 layers."""
    qwen = MODELS["Qwen/Qwen3-32B"]
    assert qwen.head_dim == 128
    assert terms.kv_bytes_per_token(qwen) == 2 * 64 * 8 * 128 * 2
    assert qwen.parameters == pytest.approx(32.8e9, rel=0.005)  # Hugging Face: 32.8B
