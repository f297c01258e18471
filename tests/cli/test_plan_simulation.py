"""The simulation's behaviour that the added terms promise: router threshold, eager prefill, prefix reuse, load."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hyperpod_analysis.plan import planner
from hyperpod_analysis.plan.engine import EFFICIENCIES
from hyperpod_analysis.plan.traffic import parse
from hyperpod_core.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def inputs() -> planner.PlanInputs:
    return planner.inputs_of(load_config(REPO_ROOT / "config" / "default.yaml").spec())


def _dpd(inputs: planner.PlanInputs, traffic: str, concurrency: int, threshold: int = 4096) -> planner.Metrics:
    layout = planner.Layout(prefill_replicas=1, decode_replicas=1, routing_threshold_tokens=threshold)
    return planner.run(inputs, planner.step_model(inputs), parse(traffic), layout, concurrency=concurrency,
                       request_rate=None)


def test_prompts_below_the_threshold_never_cross_efa(inputs: planner.PlanInputs) -> None:
    """pdSpec.routingThreshold: shorter prompts go straight to the decoder, so nothing lands in its PD buffer."""
    assert _dpd(inputs, "D(1024,128)", 8).peak_buffer_tokens == 0
    assert _dpd(inputs, "D(8192,128)", 8).peak_buffer_tokens >= 8192


def test_short_prompts_prefilled_on_the_decoder_slow_its_decode(inputs: planner.PlanInputs) -> None:
    """Below the threshold the decoder is a colocated engine: its TPOT carries the prefill interference."""
    split = _dpd(inputs, "D(3000,256)", 16, threshold=2048)
    unsplit = _dpd(inputs, "D(3000,256)", 16, threshold=4096)
    assert unsplit.tpot_ms > 1.2 * split.tpot_ms


def test_eager_mode_costs_small_steps_not_large_prefills(inputs: planner.PlanInputs) -> None:
    """Without CUDA graphs the host launches every kernel (11 per layer at TP 8); launches are asynchronous, so a
    4096-token prefill (~170 ms of GPU work) hides them while a one-token decode step (~10 ms) waits for them."""
    sm = planner.step_model(inputs)

    def step(eager: bool, prefill: int, decode: int) -> float:
        return sm.step_seconds(decode_tokens=decode, decode_context=decode * 4096, prefill_tokens=prefill,
                               prefill_attention=prefill * prefill / 2, eager=eager)

    assert step(True, 4096, 0) == step(False, 4096, 0)
    assert step(True, 0, 1) == pytest.approx(80 * 11 * EFFICIENCIES.host_call_seconds)
    assert step(True, 0, 1) > step(False, 0, 1)


def test_light_load_ttft_is_one_prefill(inputs: planner.PlanInputs) -> None:
    """At 0.2 requests/s nothing queues: colocated TTFT ~ AIConfigurator's 4096-token prefill on H100 TP 8
    (169.6 ms, validation.AIC_DATA; the band is the validation's), and DPD adds the KV transfer (4096 x 327,680 B
    at 9.6 GB/s = 140 ms), the hand-off and one decode step (~12 ms)."""
    sm = planner.step_model(inputs)
    m = planner.compare(inputs, sm, parse("D(4096,64)"), request_rate=0.2)
    assert m.colocated.ttft_ms == pytest.approx(169.6, rel=0.12)
    extra = 140 + 1e3 * EFFICIENCIES.handoff_seconds + 12
    assert m.dpd.ttft_ms - m.colocated.ttft_ms == pytest.approx(extra, rel=0.2)


def test_prefix_reuse_shortens_prefill(inputs: planner.PlanInputs) -> None:
    sm = planner.step_model(inputs)
    cold = planner.compare(inputs, sm, parse("D(4096,64)"), request_rate=0.2)
    warm = planner.compare(replace(inputs, prefix_reuse=0.75), sm, parse("D(4096,64)"), request_rate=0.2)
    assert warm.colocated.ttft_ms < 0.5 * cold.colocated.ttft_ms


def test_closed_loop_obeys_littles_law(inputs: planner.PlanInputs) -> None:
    """Closed loop with c clients: throughput = c x output tokens / mean E2E (D() makes every request alike), less
    the ramp-up genai-bench counts in its run duration (320 requests of 16 clients: a few percent)."""
    c = planner.compare(inputs, planner.step_model(inputs), parse("D(2048,128)"), concurrency=16).colocated
    assert c.output_tokens_per_s == pytest.approx(16 * 128 / (c.e2e_p50_ms / 1e3), rel=0.1)


def test_an_offered_rate_above_capacity_is_flagged_as_overloaded(inputs: planner.PlanInputs) -> None:
    """One node prefills a 4096-token prompt in ~170 ms (AIConfigurator), so it cannot serve 10 requests/s."""
    sm = planner.step_model(inputs)
    layout = planner.Layout(colocated_replicas=1)
    assert planner.run(inputs, sm, parse("D(4096,64)"), layout, concurrency=None, request_rate=10).saturated
    assert not planner.run(inputs, sm, parse("D(4096,64)"), layout, concurrency=None, request_rate=1).saturated


def test_a_shared_prefix_scenario_is_prefilled_from_cache(inputs: planner.PlanInputs) -> None:
    """genai-bench P(prefix,suffix)/out: after the first request only the suffix is computed."""
    sm = planner.step_model(inputs)
    shared = planner.compare(inputs, sm, parse("P(3584,512)/64"), request_rate=0.2)
    cold = planner.compare(inputs, sm, parse("D(4096,64)"), request_rate=0.2)
    assert shared.colocated.ttft_ms < 0.3 * cold.colocated.ttft_ms
