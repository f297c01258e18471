"""Cost per token (issue 35 item 6): one price table and one order of price sources for the planner, the report and
the dashboards; the report's GPU-hours and USD per 1M input and per 1M output tokens, and the idle share.

Users asked for exactly these numbers: "$/1M token for input tokens, output tokens" (kubernetes-sigs/inference-perf
#139) and what an idle environment costs (modelplane#54). The pinned price is AWS's (AWS Price List API,
AmazonSageMaker, us-west-2 on-demand ml.p5.48xlarge, 63.296 USD per hour on 2026-09-12: the table's own citation);
an ml.p5.48xlarge holds 8 H100 GPUs (EC2 "Accelerated computing instances - specifications").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from hyperpod_analysis.report.analysis import TokenCost, _input_share, token_cost
from hyperpod_analysis.report.results import Measurement
from hyperpod_core.config import parse_config

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RAW = REPO / "docs" / "sample-benchmark-report" / "raw"
#: AWS Price List API, ml.p5.48xlarge us-west-2 on-demand (see the module docstring), and its 8 GPUs.
P5_HOUR_USD, P5_GPUS = 63.296, 8


def test_there_is_one_price_table_and_it_is_in_core() -> None:
    """The planner re-exports core's table; no other source file pins a price."""
    from hyperpod_analysis.plan import facts
    from hyperpod_core import prices

    assert facts.PINNED_PRICES is prices.PINNED_PRICES
    assert prices.PINNED_PRICES.price("ml.p5.48xlarge") == P5_HOUR_USD
    pinned = sorted(str(p.relative_to(REPO)) for folder in ("core", "analysis", "cli", "k8s", "infra")
                    for p in (REPO / folder).rglob("*.py") if "63.296" in p.read_text(encoding="utf-8"))
    assert pinned == ["core/hyperpod_core/prices.py"]


@pytest.mark.parametrize(("given", "configured", "instance_type", "usd", "source"), [
    (70.0, 55.04, "ml.p5.48xlarge", 70.0, "--price"),
    (None, 55.04, "ml.p5.48xlarge", 55.04, "benchmark.instance_hour_usd"),
    (None, None, "ml.p5.48xlarge", P5_HOUR_USD, "pinned table: AWS Price List API"),
    (None, None, "ml.p5en.48xlarge", None, None),  # not pinned: no public page gives its price
])
def test_a_price_comes_from_the_flag_then_the_config_then_the_pinned_table(given, configured, instance_type, usd,
                                                                          source) -> None:
    from hyperpod_core.prices import instance_price, no_price_line

    price = instance_price(instance_type, given=given, configured=configured)
    if usd is None:
        assert price is None
        assert no_price_line(instance_type) == (f"no price for {instance_type} (not in the pinned table; no --price, "
                                                "no benchmark.instance_hour_usd): costs in GPU-hours only")
        return
    assert price is not None and price.usd_per_instance_hour == usd and price.source.startswith(source)
    assert price.usd_per_gpu_hour == pytest.approx(usd / P5_GPUS)


def _config_file(tmp_path: Path, **benchmark: object) -> Path:
    data = yaml.safe_load((REPO / "config" / "default.yaml").read_text(encoding="utf-8"))
    data["benchmark"] = {**(data.get("benchmark") or {}), **benchmark}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_planner_takes_the_configured_price_before_the_pinned_one(run_cli, tmp_path: Path) -> None:
    """The issue's disagreement: the report priced at benchmark.instance_hour_usd (55.04) while the planner used the
    pinned 63.296. Both now take the configured price first."""
    result = run_cli("plan", "--config", str(_config_file(tmp_path, instance_hour_usd=55.04)), "--concurrency", "8")
    assert result.exit_code == 0, result.output
    assert "price 55.04 USD per instance-hour (benchmark.instance_hour_usd for ml.p5.48xlarge" in result.stdout


@pytest.mark.parametrize(("flag", "usd", "source"), [(["--price", "70"], 70.0, "--price"),
                                                     ([], 55.04, "benchmark.instance_hour_usd")])
def test_report_prices_at_the_flag_before_the_config(run_cli, tmp_path: Path, flag: list[str], usd: float,
                                                     source: str) -> None:
    config = _config_file(tmp_path, instance_hour_usd=55.04)
    result = run_cli("report", "--config", str(config), "--results", str(SAMPLE_RAW), "--out", str(tmp_path / "r"),
                     *flag)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text(encoding="utf-8"))
    assert summary["price"]["usd_per_instance_hour"] == usd and summary["price"]["source"] == source
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert f"Price: {usd:g} USD per ml.p5.48xlarge hour ({source})" in md
    cell = summary["experiments"]["equal-gpu"]["cells"][0]["dpd"]
    assert cell["cost_per_token"]["usd_per_million_output_tokens"] == pytest.approx(
        cell["cost_per_token"]["gpu_hours_per_million_output_tokens"] * usd / P5_GPUS)


@pytest.mark.parametrize("value", ["-3", "0", "nan"])
def test_fails_when_the_price_is_not_a_positive_amount(run_cli, tmp_path: Path, value: str,
                                                      default_config_copy: Path) -> None:
    result = run_cli("report", "--config", str(default_config_copy), "--results", str(SAMPLE_RAW),
                     "--out", str(tmp_path / "r"), "--price", value)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: --price must be a positive USD amount per instance-hour, got {float(value)!r}\n"
    assert not (tmp_path / "r").exists()


def _run(mode: str, *, concurrency: int = 8, pods: dict[str, tuple[int, int]], ttft_ms: float = 400.0,
         input_per_s: float = 20000.0, output_per_s: float = 500.0, completed: int = 320) -> Measurement:
    """A run on ``pods``: role -> (ready replicas, GPUs per pod), as ``serving.json`` records them."""
    names = {"prefill": "prefill-llama", "decode": "decode-llama", "colocated": "llama"}
    seen = {names[r]: {"replicas": n, "ready": n, "gpus_per_pod": g} for r, (n, g) in pods.items()}
    gpus = sum(n * g for n, g in pods.values())
    return Measurement(mode=mode, scenario="s", traffic="D(4096,128)", concurrency=concurrency, gpus=gpus,
                       ttft_ms={"mean": ttft_ms}, tpot_ms={"mean": 20.0}, e2e_ms={"p50": 1.0, "p90": 1.0},
                       output_tokens_per_s=output_per_s, requests_per_s=4.0, error_rate=0.0, completed=completed,
                       n=288, input_tokens_mean=4096.0, output_tokens_mean=128.0, input_tokens_per_s=input_per_s,
                       source=f"/r/{mode}/run.json", serving={"before": seen, "after": seen})


def _paid(m: Measurement, cost: TokenCost) -> float:
    """GPU-hours per second the tokens of both classes pay for at their cost per 1M."""
    assert cost.input_gpu_hours is not None and cost.output_gpu_hours is not None
    return (cost.input_gpu_hours * m.input_tokens_per_s + cost.output_gpu_hours * m.output_tokens_per_s) / 1e6


def test_dpd_prefill_gpu_hours_go_to_input_tokens_and_decode_to_output_tokens() -> None:
    """1 prefill + 1 decode replica of 8 GPUs: 8 GPU-hours per hour each side, over 20,000 input and 500 output
    tokens per second; together the two classes pay for all 16 GPUs."""
    m = _run("dpd", pods={"prefill": (1, 8), "decode": (1, 8)})
    cost = token_cost(m, input_share=None, share_basis="", prefill_requests=4.0 * m.run_seconds)
    assert cost.input_gpu_hours == pytest.approx(8 * 1e6 / (20000 * 3600))
    assert cost.output_gpu_hours == pytest.approx(8 * 1e6 / (500 * 3600))
    assert _paid(m, cost) == pytest.approx(16 / 3600)
    assert cost.basis == "prefill 8 GPUs -> input, decode 8 GPUs -> output"


def test_colocated_gpu_hours_split_by_the_input_tokens_share_of_step_time() -> None:
    m = _run("colocated", pods={"colocated": (2, 8)})
    cost = token_cost(m, input_share=0.3, share_basis="step model", prefill_requests=None)
    assert cost.input_gpu_hours == pytest.approx(16 * 0.3 * 1e6 / (20000 * 3600))
    assert _paid(m, cost) == pytest.approx(16 / 3600)


def test_the_step_time_share_grows_with_the_prompt_and_is_all_input_without_decode_steps() -> None:
    """In the planner's step model (hyperpod_analysis.plan) a request of one output token is prefill only; a longer
    prompt takes a larger share of the engine's time than a shorter one at the same output."""
    from hyperpod_analysis.plan.planner import MAX_NUM_BATCHED_TOKENS, inputs_of, step_model

    inputs = inputs_of(parse_config(yaml.safe_load((REPO / "config" / "default.yaml").read_text())).spec())
    model = step_model(inputs)

    def share(isl: int, osl: int) -> float:
        return _input_share(model, isl=isl, osl=osl, batch=8, eager=False, chunk=MAX_NUM_BATCHED_TOKENS)

    assert share(4096, 1) == 1.0
    assert 0 < share(1024, 128) < share(8192, 128) < 1
    assert share(20000, 128) > share(8192, 128)  # several prefill chunks


@pytest.mark.parametrize(("prefill_requests", "concurrency", "idle"), [
    (0.0, 8, 0.5),       # a direct scenario: the prefill pods' 8 of 16 GPUs ran nothing
    (None, 8, None),     # no count: unknown
    (320.0, 8, 0.0),     # every request on prefill at 4/s x 0.4 s TTFT = 1.6 in flight: the one pod always busy
    (320.0, 1, 0.0),     # decode holds the one request in flight (1 replica)
])
def test_idle_share_of_a_dpd_run(prefill_requests: float | None, concurrency: int, idle: float | None) -> None:
    m = _run("dpd", concurrency=concurrency, pods={"prefill": (1, 8), "decode": (1, 8)})
    assert token_cost(m, input_share=None, share_basis="", prefill_requests=prefill_requests).idle_share == idle


def test_idle_share_counts_replicas_beyond_the_concurrency_and_prefill_beyond_its_legs() -> None:
    """Closed loop: 2 requests in flight cannot keep 4 colocated replicas busy; 1 request/s of 0.4 s TTFT keeps
    two prefill replicas busy at most 20 % of the time."""
    colocated = _run("colocated", concurrency=2, pods={"colocated": (4, 8)})
    assert token_cost(colocated, input_share=0.3, share_basis="", prefill_requests=None).idle_share == 0.5
    dpd = _run("dpd", concurrency=8, pods={"prefill": (2, 8), "decode": (1, 8)}, completed=320)
    cost = token_cost(dpd, input_share=None, share_basis="", prefill_requests=dpd.run_seconds * 1.0)
    assert cost.idle_share == pytest.approx(16 * (1 - 1.0 * 0.4 / 2) / 24)


def test_the_report_shows_cost_per_input_and_output_token_and_the_idle_share(run_cli, tmp_path: Path,
                                                                             default_config_copy: Path) -> None:
    """The shipped raw set: long prompts went through prefill, short ones straight to decode (the prefill pods
    idle); the pinned price without --price or benchmark.instance_hour_usd."""
    result = run_cli("report", "--config", str(default_config_copy), "--results", str(SAMPLE_RAW),
                     "--out", str(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert f"Price: {P5_HOUR_USD:g} USD per ml.p5.48xlarge hour (pinned table: AWS Price List API" in md
    assert "| concurrency | mode | GPU-hours split | idle GPU-hours (at least) | per 1M input tokens | per 1M output " \
           "tokens |" in md
    short = md.split("### short-in-short-out")[1].split("#### Cost per token")[1]
    dpd_rows = [r for r in short.splitlines() if r.startswith("| ") and "| dpd |" in r]
    assert len(dpd_rows) == 2 and all("| prefill 8 GPUs -> input, decode 8 GPUs -> output | 50% |" in r
                                      for r in dpd_rows)
    assert all(re.search(r"\| [0-9.]+ GPU-h \(\$[0-9.]+\) \| [0-9.]+ GPU-h \(\$[0-9.]+\) \|", r) for r in dpd_rows)


def test_the_docs_state_the_shares_the_step_model_gives() -> None:
    """docs/benchmark.md, "Cost per token", quotes the colocated split of two shapes on the default layout."""
    from hyperpod_analysis.plan.planner import MAX_NUM_BATCHED_TOKENS, inputs_of, step_model

    inputs = inputs_of(parse_config(yaml.safe_load((REPO / "config" / "default.yaml").read_text())).spec())
    model = step_model(inputs)
    shares = [_input_share(model, isl=isl, osl=128, batch=4, eager=inputs.decode_eager, chunk=MAX_NUM_BATCHED_TOKENS)
              for isl in (8192, 1024)]
    text = " ".join((REPO / "docs" / "benchmark.md").read_text(encoding="utf-8").split())
    assert (f"D(8192,128) gives {shares[0]:.0%} of the GPU-hours to input tokens, D(1024,128) {shares[1]:.0%}"
            .replace("%", " %") in text)
