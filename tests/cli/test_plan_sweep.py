"""Between the published points the model stays monotone and physically sane (issue 23).

Bounds: the largest published gains of 1 prefill + 1 decode node over one colocated node on that hardware (AWS's
H100 measurement, issue 15: TPOT -66 %, E2E P50 -32 %, output throughput +35 %; no dense-model P/D gain is published
for H200, B200 or B300, so the H100 figures bound them too), plus the validation's band for each (validation.BANDS).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hyperpod_analysis.plan import planner, validation
from hyperpod_analysis.plan.facts import instance_facts
from hyperpod_analysis.plan.traffic import parse
from hyperpod_core.config import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
AWS_H100 = {"tpot": 66.0, "e2e_p50": 32.0, "output_throughput": 35.0}
ANYWHERE = {"tpot": 67.0, "e2e_p50": 47.0, "output_throughput": 100.0}
CONCURRENCY = (1, 2, 4, 8, 16, 32, 64, 128)
CASES = [("ml.p5.48xlarge", t) for t in ("D(1024,128)", "D(4096,256)", "D(8192,512)", "N(6000,1500)/(400,100)")] + [
    (i, "D(4096,256)") for i in ("ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge")]


@pytest.fixture(scope="module")
def base() -> planner.PlanInputs:
    return planner.inputs_of(load_config(REPO_ROOT / "config" / "default.yaml").spec())


@pytest.mark.parametrize(("instance_type", "traffic"), CASES, ids=[f"{i.split('.')[1]}-{t}" for i, t in CASES])
def test_sweep_is_monotone_sane_and_within_the_published_gains(base: planner.PlanInputs, instance_type: str,
                                                               traffic: str) -> None:
    inputs = replace(base, instance=instance_facts(instance_type))
    sm = planner.step_model(inputs)
    t = parse(traffic)
    one = planner.Layout(colocated_replicas=1)
    dpd = planner.Layout(prefill_replicas=1, decode_replicas=1, routing_threshold_tokens=4096)
    gpu = inputs.instance.gpu
    # No decode step can be faster than reading the weights once at the datasheet's HBM bandwidth.
    floor_ms = 1e3 * inputs.model.streamed_weight_bytes / inputs.tp / gpu.hbm_bytes_per_s
    published = AWS_H100 if gpu.name.startswith("H100") and t.max_input() <= 4096 else ANYWHERE
    previous: dict[str, float] = {}
    for c in CONCURRENCY:
        col = planner.run(inputs, sm, t, one, concurrency=c, request_rate=None)
        split = planner.run(inputs, sm, t, dpd, concurrency=c, request_rate=None)
        gain = planner.improvement(col, split)
        for metric, value in gain.items():
            assert value <= published[metric] + validation.BANDS[metric], (c, metric, value)
        for m in (col, split):
            assert m.tpot_ms >= floor_ms and m.ttft_ms > 0 and m.e2e_p50_ms > m.ttft_ms
        # More clients never lower the throughput or the latency (1 % for the closed loop's sampling).
        now = {"col_tps": col.output_tokens_per_s, "dpd_tps": split.output_tokens_per_s, "col_e2e": col.e2e_p50_ms,
               "dpd_e2e": split.e2e_p50_ms}
        for key, value in now.items():
            assert value >= 0.99 * previous.get(key, 0.0), (c, key, value, previous)
        previous = now
