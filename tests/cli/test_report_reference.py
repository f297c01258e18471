"""AWS's published H100 numbers as the reference of D(4096,256), and the verdict rules, on hand-made cells.

Reference values: AWS ML blog "Disaggregated prefill and decode for LLM inference on SageMaker HyperPod"
(2026-07-10), "Benchmarking performance": TPOT improvement 22% at concurrency 8 to 66% at 32, output throughput
up to 35%, E2E P50 14-32% (H100, ml.p5.48xlarge). The measurements below are inputs of the rendering rules,
not claims about hardware.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hyperpod_analysis.report.analysis import AWS_H100_REFERENCE, Cell, verdict
from hyperpod_analysis.report.render import Report, improvement_rows, write_report
from hyperpod_analysis.report.results import Measurement
from hyperpod_core.config import parse_config

REPO = Path(__file__).resolve().parents[2]


def _config(**benchmark):
    """The default config's endpoint (its spec) with ``benchmark`` set."""
    data = yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))
    data["benchmark"] = benchmark
    return parse_config(data).spec()


def _m(mode: str, n: int, *, tpot: float, ttft: float = 500.0, tput: float = 1000.0, errors: float = 0.0,
       gpus: int = 16, experiment: str = "aws-reference", scenario: str = "aws-reference",
       requests: int = 288) -> Measurement:
    """A run of the default size: 320 requests, 10 % warm-up (``benchmark.max_requests_per_run``, ``warmup_ratio``)."""
    e2e = ttft + 255 * tpot
    return Measurement(mode=mode, scenario=scenario, traffic="D(4096,256)", concurrency=n, gpus=gpus,
                       ttft_ms={"mean": ttft, "p95": ttft}, tpot_ms={"mean": tpot, "p95": tpot},
                       e2e_ms={"p50": e2e, "p90": e2e, "mean": e2e}, output_tokens_per_s=tput,
                       requests_per_s=1.0, error_rate=errors, completed=10, n=requests, input_tokens_mean=4096,
                       output_tokens_mean=256, input_tokens_per_s=tput * 16,
                       source=f"/r/{experiment}/{mode}-{scenario}-c{n}/run.json",
                       experiment=experiment, record={"routing_strategy": "prefixaware"})


def _cell(n: int, col: Measurement, dpd: Measurement, experiment: str = "aws-reference",
          scenario: str = "aws-reference") -> Cell:
    return Cell(scenario=scenario, traffic="D(4096,256)", concurrency=n, colocated=col, dpd=dpd, estimate=None,
                experiment=experiment)


def test_reference_is_what_the_blog_states():
    assert AWS_H100_REFERENCE["traffic"] == "D(4096,256)"
    assert AWS_H100_REFERENCE["points"]["tpot"] == {8: 22.0, 32: 66.0}
    assert AWS_H100_REFERENCE["ranges"]["e2e_p50"] == (14.0, 32.0)
    assert AWS_H100_REFERENCE["up_to"]["output_throughput"] == 35.0


def test_reference_appears_beside_the_aws_reference_experiment_only(tmp_path):
    config = _config()
    cells = [_cell(n, _m("colocated", n, tpot=40.0, gpus=8), _m("dpd", n, tpot=30.0)) for n in (8, 16, 32)]
    # The same traffic in the equal-GPU experiment: AWS's numbers never go next to it (different experiment).
    fair = [_cell(n, _m("colocated", n, tpot=40.0, experiment="equal-gpu", scenario="same-shape"),
                  _m("dpd", n, tpot=30.0, experiment="equal-gpu", scenario="same-shape"), "equal-gpu", "same-shape")
            for n in (8, 16, 32)]
    report = Report(spec=config, cells=cells + fair, verdicts=[verdict("same-shape", fair, config)],
                    planner_note="none", source="test")
    rows = improvement_rows(report, "aws-reference")
    assert rows[0][-1].startswith("TPOT +22%") and rows[2][-1].startswith("TPOT +66%")
    assert rows[1][-1].startswith("E2E P50 +14..32%")  # no per-concurrency TPOT value published for 16
    assert rows[0][1] == "+25.0%"  # (40 - 30) / 40
    assert {r[-1] for r in improvement_rows(report, "same-shape")} == {"-"}
    files = write_report(report, tmp_path / "r")
    assert {p.name for p in files} >= {"report.md", "report.html", "summary.json", "improvement-aws-reference.png"}
    md = (tmp_path / "r" / "report.md").read_text()
    equal, reference = md.split("## Equal-GPU comparison")[1].split("## AWS reference")
    assert "AWS H100" not in equal.replace("AWS H100 (published)", "") and "TPOT +22%" in reference
    assert "1 prefill + 1 decode replica (16 GPUs) vs one colocated replica (8 GPUs)" in reference
    import json

    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert "aws_published" in summary["experiments"]["aws-reference"]
    assert "aws_published" not in summary["experiments"]["equal-gpu"]


def test_reference_deviations_are_listed_next_to_the_result(tmp_path):
    """AWS ran KV-aware routing (needs v1/completions); genai-bench 0.0.5 posts to chat completions only, so the
    reference runs with the configured routing, and the report says so next to the result."""
    from hyperpod_analysis.report.analysis import reference_deviations

    config = _config()
    cells = [_cell(8, _m("colocated", 8, tpot=40.0, gpus=8), _m("dpd", 8, tpot=30.0))]
    (line,) = reference_deviations(config, cells)
    assert line.startswith("routing: prefixaware instead of AWS's kvaware")
    data = yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))
    data["endpoint"]["tensor_parallel_size"] = 4
    data["endpoint"]["prefill"] = {"gpus": 4}
    data["endpoint"]["decode"] = {"gpus": 4}
    assert "tensor_parallel_size: 4 (AWS: 8)" in reference_deviations(parse_config(data).spec(), cells)


@pytest.mark.parametrize(("col", "dpd", "split", "words"), [
    # both meet the SLO: the cheaper per output token wins (same GPUs: higher throughput)
    (dict(tpot=40.0, tput=1000.0), dict(tpot=30.0, tput=1300.0), True, "DPD is cheaper"),
    (dict(tpot=40.0, tput=1300.0), dict(tpot=30.0, tput=1000.0), False, "colocated is cheaper"),
    # 5 % cheaper is within benchmark.split_min_saving (10 %): stay with one pool
    (dict(tpot=40.0, tput=1000.0), dict(tpot=30.0, tput=1055.0), False, "less than benchmark.split_min_saving (10%)"),
    # TPOT p95 SLO 100 ms (observability.slo default): only DPD meets it
    (dict(tpot=140.0), dict(tpot=60.0), True, "only DPD meets the endpoint's SLO"),
    # TTFT p95 SLO 2.5 s (observability.slo default): DPD's KV transfer pushes it over
    (dict(tpot=40.0), dict(tpot=30.0, ttft=3000.0), False, "DPD misses the endpoint's SLO (TTFT p95 3.00 s > 2.5 s"),
    (dict(tpot=140.0), dict(tpot=130.0), None, "neither mode meets"),
])
def test_verdict(col, dpd, split, words):
    config = _config()
    cells = [_cell(8, _m("colocated", 8, **col), _m("dpd", 8, **dpd))]
    v = verdict("aws-reference", cells, config)
    assert v.split is split and words in v.reason


@pytest.mark.parametrize(("scenario_path", "prefill", "invalid"), [
    ("dpd", 11, None),                      # 10 completed + a warm-up request: all went through prefill
    ("reference", 3, "only 3 of 10 requests reached the prefill pods"),  # the estimate sent most straight to decode
    ("direct", 0, None),
    ("direct", 8, "8 of 10 requests of a direct scenario reached the prefill pods"),
])
def test_a_dpd_run_counts_only_when_its_requests_took_the_declared_path(scenario_path, prefill, invalid):
    from hyperpod_analysis.report.analysis import dpd_path_problems

    dpd = _m("dpd", 8, tpot=30.0)
    dpd = Measurement(**{**dpd.__dict__, "dpd_path": {"source": "counters", "prefill_requests": prefill}})
    problems = dpd_path_problems([dpd, _m("colocated", 8, tpot=40.0)], {"aws-reference": scenario_path})
    assert (problems.get(dpd.folder) is None) if invalid is None else invalid in problems[dpd.folder]


def test_a_dpd_run_without_a_path_record_is_not_verified_and_gets_no_verdict():
    from hyperpod_analysis.report.analysis import dpd_path_problems

    dpd = _m("dpd", 8, tpot=30.0)
    problems = dpd_path_problems([dpd], {"aws-reference": "dpd"})
    assert problems[dpd.folder].startswith("DPD path not verified: no dpd-path.json")
    cell = Cell(**{**_cell(8, _m("colocated", 8, tpot=40.0), dpd).__dict__, "invalid": problems[dpd.folder]})
    v = verdict("aws-reference", [cell], _config())
    assert v.split is None and v.reason.startswith("no valid DPD run")


def test_gpu_normalized_cost_uses_each_modes_gpus_and_the_configured_price():
    """DPD on 16 GPUs at 2000 tok/s costs the same per token as colocated on 8 GPUs at 1000 tok/s."""
    config = _config(instance_hour_usd=80.0)
    col, dpd = _m("colocated", 8, tpot=40.0, tput=1000.0, gpus=8), _m("dpd", 8, tpot=30.0, tput=2000.0)
    assert col.gpu_hours_per_million_output_tokens() == pytest.approx(dpd.gpu_hours_per_million_output_tokens())
    assert col.gpu_hours_per_million_output_tokens() == pytest.approx(8 * 1e6 / (1000 * 3600))
    from hyperpod_analysis.report.analysis import cost_text
    from hyperpod_core.prices import instance_price

    price = instance_price(config.endpoint.instance_type, configured=config.benchmark.instance_hour_usd)
    assert cost_text(col, price) == "2.22 GPU-h ($22.22) per 1M output tokens"  # 2.22 GPU-h x $80 / 8 GPUs


# --- the planner's estimate beside each experiment: the layouts that experiment measures ---------------------


@pytest.mark.parametrize(("experiment", "gpus"), [
    # AWS's layouts (blog, "Benchmarking performance"): 1P+1D on 2x ml.p5.48xlarge (16 GPUs) vs one node (8 GPUs).
    ("aws-reference", {"dpd": 16, "colocated": 8}),
    # The default config's DPD endpoint (1 prefill + 1 decode replica, TP 8) vs colocated on as many GPUs.
    ("equal-gpu", {"dpd": 16, "colocated": 16}),
])
def test_planner_estimate_holds_the_layouts_the_experiment_measures(experiment, gpus):
    """The estimate drawn beside a cell simulates the GPUs the benchmark manifests give each mode in that
    experiment (hyperpod_k8s.benchmark.gpus_per_mode): never the one-node colocated estimate beside an equal-GPU
    measurement."""
    from tests.k8s.endpoint_props import props_of

    from hyperpod_analysis.plan import estimate_experiment, estimate_scenarios
    from hyperpod_k8s.benchmark import gpus_per_mode

    spec = _config()
    (row,) = estimate_experiment(spec, experiment, ["D(4096,256)"], [8])
    assert row["experiment"] == experiment and row["gpus"] == gpus
    config = parse_config(yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8")))
    assert row["gpus"] == gpus_per_mode(props_of(config), experiment)
    (one_node,) = estimate_scenarios(spec, ["D(4096,256)"], [8])  # plan --json: DPD vs one colocated node
    if experiment == "aws-reference":  # the default endpoint is 1P+1D, AWS's layout: plan's own comparison
        assert row["colocated"] == one_node["colocated"] and row["improvement_pct"] == one_node["improvement_pct"]
    else:  # twice the colocated GPUs: more output throughput than one node at the same concurrency, same DPD
        assert row["dpd"] == one_node["dpd"]
        assert row["colocated"]["output_tokens_per_s"] > one_node["colocated"]["output_tokens_per_s"]
        assert row["improvement_pct"]["output_throughput"] < one_node["improvement_pct"]["output_throughput"]


def test_an_estimate_of_another_experiment_is_never_drawn_beside_a_cell():
    from hyperpod_analysis.report.analysis import build_cells
    from hyperpod_analysis.report.render import measurement_rows

    ms = [_m("colocated", 8, tpot=40.0, experiment="equal-gpu", scenario="s"),
          _m("dpd", 8, tpot=30.0, experiment="equal-gpu", scenario="s")]
    row = {"traffic": "D(4096,256)", "concurrency": 8, "colocated": {"tpot_ms": 1.0}, "dpd": {"tpot_ms": 2.0},
           "improvement_pct": {"tpot": 50.0}, "gpus": {"colocated": 16, "dpd": 16}}
    (wrong,) = build_cells(ms, [("s", 8)], {("D(4096,256)", 8): {**row, "experiment": "aws-reference"}},
                           experiment="equal-gpu")
    assert wrong.estimate is None
    (right,) = build_cells(ms, [("s", 8)], {("D(4096,256)", 8): {**row, "experiment": "equal-gpu"}},
                           experiment="equal-gpu")
    assert right.estimate is not None
    report = Report(spec=_config(), cells=[right], verdicts=[], planner_note="", source="x")
    planner_rows = [r for r in measurement_rows(report, "s") if "(planner" in r[1]]
    assert [(r[1], r[2], r[6]) for r in planner_rows] == [("colocated (planner, p50)", "16", "1.00"),
                                                         ("dpd (planner, p50)", "16", "2.00")]
