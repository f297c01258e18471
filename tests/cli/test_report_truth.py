"""What the report claims, claimed only as far as the runs show it (issue 35 item 5; fourth review, observability
findings 6, 7 and 8): DPD-path evidence per cell, n per cell and no verdict below :data:`MIN_REQUESTS`, the
statistic named in every column, and TTFT as the client measures it.

Measurements are hand-made inputs of the rules; genai-bench's own files are checked in test_report_genai.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hyperpod_analysis.report.analysis import MIN_REQUESTS, Cell, dpd_path_problems, verdict
from hyperpod_analysis.report.render import (
    MEASUREMENT_HEADER,
    Report,
    improvement_header,
    markdown,
    measurement_rows,
)
from hyperpod_analysis.report.results import Measurement
from hyperpod_core.config import parse_config

REPO = Path(__file__).resolve().parents[2]
#: The scenarios of the review's demonstration: long prompts declared ``dpd``, short ones ``direct``.
PATHS = {"long-in": "dpd", "short-in": "direct"}
TRAFFIC = {"long-in": "D(5600,40)", "short-in": "D(600,40)"}


def _config():
    """The default config's endpoint (its spec)."""
    return parse_config(yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))).spec()


def _m(mode: str, scenario: str, concurrency: int, *, folder: str, completed: int = 320, n: int = 288,
       prefill: float | None = None, tput: float = 1000.0) -> Measurement:
    return Measurement(
        mode=mode, scenario=scenario, traffic=TRAFFIC[scenario], concurrency=concurrency, gpus=16,
        ttft_ms={"mean": 300.0, "p95": 600.0}, tpot_ms={"mean": 20.0, "p95": 30.0},
        e2e_ms={"p50": 1100.0, "p90": 1400.0, "mean": 1150.0}, output_tokens_per_s=tput, requests_per_s=4.0,
        error_rate=0.0, completed=completed, n=n, input_tokens_mean=1000.0, output_tokens_mean=40.0,
        input_tokens_per_s=tput * 25,
        source=f"{folder}/{TRAFFIC[scenario]}_num_concurrency_{concurrency}_time_60s.json",
        dpd_path=None if prefill is None else {"source": "prefill pods' vllm:request_success_total",
                                               "prefill_requests": prefill})


def test_a_folder_whose_scenarios_declare_different_paths_is_not_verified() -> None:
    """The review's demonstration: one DPD folder with long-in (declared dpd) and short-in (declared direct), 320
    requests each at two concurrency levels, and 640 requests on the prefill pods: exactly what every long prompt
    going straight to decode and every short one through prefill gives. One count cannot tell the two apart."""
    folder = "/r/dpd/dpd-long-in+short-in-c2-4"
    runs = [_m("dpd", s, c, folder=folder, prefill=640) for s in PATHS for c in (2, 4)]
    problems = dpd_path_problems(runs, PATHS)
    assert folder in problems
    assert "declare different paths (long-in: dpd, short-in: direct)" in problems[folder]


def _report(cells: list[Cell]) -> Report:
    return Report(spec=_config(), cells=cells, verdicts=[], planner_note="none", source="test")


def test_a_count_over_several_rows_says_folder_level_and_one_per_cell_does_not() -> None:
    """One Job that ran two concurrency levels has one prefill count for both rows: each row says so."""
    shared = "/r/dpd/dpd-long-in-c2-4"
    cells = [Cell(scenario="long-in", traffic=TRAFFIC["long-in"], concurrency=c, estimate=None,
                  colocated=_m("colocated", "long-in", c, folder=f"/r/colocated/c{c}"),
                  dpd=_m("dpd", "long-in", c, folder=shared, prefill=650)) for c in (2, 4)]
    cells.append(Cell(scenario="short-in", traffic=TRAFFIC["short-in"], concurrency=8, estimate=None,
                      colocated=_m("colocated", "short-in", 8, folder="/r/colocated/c8"),
                      dpd=_m("dpd", "short-in", 8, folder="/r/dpd/dpd-short-in-c8", prefill=0)))
    report = _report(cells)
    path = MEASUREMENT_HEADER.index("DPD path")
    shared_rows = [r[path] for r in measurement_rows(report, "long-in") if r[1] == "dpd"]
    assert len(shared_rows) == 2
    assert all(r.startswith("ok: folder-level, over 2 rows (long-in c2, long-in c4): 650 requests on prefill")
               for r in shared_rows), shared_rows
    (own,) = [r[path] for r in measurement_rows(report, "short-in") if r[1] == "dpd"]
    assert own.startswith("ok: 0 requests on prefill") and "folder-level" not in own


@pytest.mark.parametrize(("n", "judged"), [(MIN_REQUESTS - 1, False), (MIN_REQUESTS, True)])
def test_n_is_shown_and_no_verdict_comes_from_fewer_than_the_minimum(n: int, judged: bool) -> None:
    """A p95 from n requests: below 59 not even the slowest request bounds it with 95 % confidence, and at 100 the
    90th and 99th of them, sorted, do (Binomial(100, 0.95)); the report shows n and decides nothing below
    MIN_REQUESTS."""
    assert MIN_REQUESTS == 100
    cell = Cell(scenario="long-in", traffic=TRAFFIC["long-in"], concurrency=8, estimate=None,
                colocated=_m("colocated", "long-in", 8, folder="/r/c", n=n, tput=1000.0),
                dpd=_m("dpd", "long-in", 8, folder="/r/d", n=n, tput=1500.0))
    v = verdict("long-in", [cell], _config())
    rows = measurement_rows(_report([cell]), "long-in")
    assert [r[MEASUREMENT_HEADER.index("n")] for r in rows] == [str(n), str(n)]
    slo = [r[MEASUREMENT_HEADER.index("meets SLO")] for r in rows]
    if judged:
        assert v.split is True and slo == ["yes", "yes"]
    else:
        assert v.split is None and f"n = {n} at concurrency 8" in v.reason and "below 100" in v.reason
        assert slo == ["not judged (n < 100)"] * 2


def test_a_cell_below_the_minimum_is_left_out_of_the_verdict_and_named() -> None:
    cells = [Cell(scenario="long-in", traffic=TRAFFIC["long-in"], concurrency=c, estimate=None,
                  colocated=_m("colocated", "long-in", c, folder=f"/r/c{c}", n=n, tput=1000.0),
                  dpd=_m("dpd", "long-in", c, folder=f"/r/d{c}", n=n, tput=1500.0)) for c, n in ((8, 288), (16, 40))]
    v = verdict("long-in", cells, _config())
    assert v.split is True and v.reason.endswith("; concurrency 16 left out (n = 40 < 100)")


@pytest.mark.parametrize("experiment", ["equal-gpu", "aws-reference"])
def test_every_column_that_shows_a_statistic_names_it(experiment: str) -> None:
    """The improvement table compares means (TPOT, TTFT) and percentiles (E2E); the planner's estimates are
    medians (hyperpod_analysis.plan.simulate: statistics.median)."""
    headers = [*improvement_header(experiment), *MEASUREMENT_HEADER]
    latency = [part for h in headers for part in h.split(" / ") if any(k in part for k in ("TTFT", "TPOT", "E2E"))]
    assert len(latency) == 12
    unnamed = [p for p in latency if not any(s in p for s in ("(mean)", "(p50)", "(p90)", "(p95)"))]
    assert not unnamed, f"columns that do not name their statistic: {unnamed}"


def test_the_report_says_ttft_is_the_clients_and_the_dashboards_a_lower_bound() -> None:
    """vLLM measures TTFT and E2E from the engine's own arrival_time (vLLM docs/design/metrics.md, "Frontend Stats
    Collection"); genai-bench measures from sending the request to the first streamed chunk."""
    cell = Cell(scenario="long-in", traffic=TRAFFIC["long-in"], concurrency=8, estimate=None,
                colocated=_m("colocated", "long-in", 8, folder="/r/c"), dpd=_m("dpd", "long-in", 8, folder="/r/d"))
    md = markdown(_report([cell]), {"long-in": {"improvement": "a.png", "curves": "b.png"}})
    assert "| client TTFT (mean) ms | client TTFT (p95) ms |" in md
    intro = md.split("\n## ")[0]
    assert "TTFT is the benchmark client's, end to end" in intro
    assert "'Time to first token as users see it' adds only vLLM's in-engine intervals" in intro
    assert "is a lower bound of it" in intro and "docs/design/metrics.md" in intro


def test_the_docs_state_the_minimum_and_why() -> None:
    text = " ".join((REPO / "docs" / "benchmark.md").read_text(encoding="utf-8").split())
    assert f"a run of fewer than **{MIN_REQUESTS}** (`MIN_REQUESTS`) is shown" in text
    assert "below **59** not even the slowest request is an upper bound of the p95" in text
