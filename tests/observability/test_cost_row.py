"""The dashboards' cost row (issue 35 item 6): USD per 1M input and per 1M output tokens and the idle GPU share, from
live series only, evaluated by promtool on contract-shaped series.

Expected values come from the price AWS publishes (AWS Price List API, AmazonSageMaker, us-west-2 on-demand
ml.p5.48xlarge: 63.296 USD per hour, pinned in ``hyperpod_core.prices`` with that citation) and the 8 GPUs of that
instance (EC2 "Accelerated computing instances - specifications"), not from the queries.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.observability import contract

from hyperpod_core.config import Config, load_config
from hyperpod_core.telemetry import catalogue as m
from hyperpod_core.telemetry import labels as lbl
from hyperpod_core.telemetry.dashboards import dpd_overview, dpd_vs_colocated
from hyperpod_core.telemetry.panels import PanelSpec
from hyperpod_core.telemetry.targets import collector_labels

REPO = Path(__file__).resolve().parents[2]
USD_PER_GPU_HOUR = 63.296 / 8
GPUS_PER_POD = 8
WINDOW = "5m"


def _panels(panels: tuple[PanelSpec, ...], side: str = "") -> dict[str, PanelSpec]:
    return {p.title.removeprefix(side): p for p in panels}


def test_the_cost_row_is_priced_from_the_one_price_source(default_config: Config, default_config_dict: dict) -> None:
    """benchmark.instance_hour_usd first, then the pinned table; an instance type with neither is shown in
    GPU-hours and says so."""
    (row,) = [r for r in dpd_overview(default_config.spec()).rows if r.title == "Cost per token"]
    cost = _panels(row.columns[0])["USD per 1M tokens"]
    assert cost.unit == "currencyUSD" and [q.legend for q in cost.queries] == ["input tokens", "output tokens"]
    assert all(f"* {USD_PER_GPU_HOUR:g} / 3600 * 1e6" in q.expr for q in cost.queries)
    configured = json.loads(json.dumps(default_config_dict))
    configured.setdefault("benchmark", {})["instance_hour_usd"] = 55.04
    from hyperpod_core.config import parse_config

    (row,) = [r for r in dpd_overview(parse_config(configured).spec()).rows if r.title == "Cost per token"]
    assert all(f"* {55.04 / 8:g} / 3600 * 1e6" in q.expr for q in _panels(row.columns[0])["USD per 1M tokens"].queries)
    unpriced = load_config(REPO / "config" / "examples" / "p5en-two-prefill.yaml")  # ml.p5en.48xlarge: not pinned
    (row,) = [r for r in dpd_overview(unpriced.spec()).rows if r.title == "Cost per token"]
    hours = _panels(row.columns[0])["GPU-hours per 1M tokens"]
    assert hours.unit == "short" and "* 1 / 3600 * 1e6" in hours.queries[0].expr
    assert "No price for the instance type" in hours.description


def _series(metric: m.Metric, pod: str, values: str, config: Config, suffix: str = "", **labels: str) -> dict:
    """An input series with every label the contract gives ``metric`` on HyperPod."""
    collector = collector_labels(config.observability)
    (family,) = [f for f in contract.families(collector) if f.name == metric.family]
    all_labels = {x: f"{x}-value" for x in family.labels}
    all_labels.update({metric.namespace_label(collector): config.spec().endpoint.namespace,
                       metric.pod_label(collector): pod, **labels})
    if family.metric_source is not None:
        all_labels[lbl.METRIC_SOURCE] = family.metric_source
    body = ", ".join(f'{k}="{v}"' for k, v in all_labels.items())
    return {"series": f"{metric.series(suffix)}{{{body}}}", "values": values}


def _pod(config: Config, pod: str, *, running: int, prompt_per_min: int = 0, output_per_min: int = 0,
         prefill_seconds_per_min: float = 0.0) -> list[dict]:
    """One pod: its GPUs (one DCGM series each), its running requests and its token and prefill-time counters."""
    out = [_series(m.GPU_UTIL, pod, "70x40", config, gpu=str(g)) for g in range(GPUS_PER_POD)]
    out += [_series(m.NUM_REQUESTS_RUNNING, pod, f"{running}x40", config),
            _series(m.PROMPT_TOKENS, pod, f"0+{prompt_per_min}x40", config),
            _series(m.GENERATION_TOKENS, pod, f"0+{output_per_min}x40", config),
            _series(m.PREFILL_TIME, pod, f"0+{prefill_seconds_per_min:g}x40", config, "_sum")]
    return out


def _expr(expr: str, config: Config) -> str:
    for var, value in {"$__rate_interval": WINDOW, "$namespace": config.spec().endpoint.namespace,
                       "$endpoint": config.spec().endpoint.name, "$baseline": config.spec().endpoint.name}.items():
        expr = expr.replace(var, value)
    return expr


def test_cost_per_token_and_idle_share_from_live_series(default_config: Config, tmp_path: Path,
                                                        promtool: str) -> None:
    """DPD: two prefill pods (one idle) and one decode pod, 8 GPUs each; decode finishes 100 input and 10 output
    tokens a second. Colocated: two workers (one idle); the busy one spends a quarter of its time in requests'
    prefill intervals."""
    ep = default_config.spec().endpoint.name
    series = [
        *_pod(default_config, f"prefill-{ep}-6d5f7c8b9-x2k4p", running=0),
        # the prefill pods count prompts too (their leg): never the denominator, or disaggregated prompts count twice
        *_pod(default_config, f"prefill-{ep}-6d5f7c8b9-q7w8e", running=2, prompt_per_min=999_999),
        *_pod(default_config, f"decode-{ep}-5b8c9d7f6-klm2n", running=12, prompt_per_min=6000, output_per_min=600),
        *_pod(default_config, f"{ep}-7f6d5c4b3-pq9rs", running=4, prompt_per_min=6000, output_per_min=600,
              prefill_seconds_per_min=15),
        *_pod(default_config, f"{ep}-7f6d5c4b3-zt5wx", running=0),
    ]
    per_second = USD_PER_GPU_HOUR / 3600
    expected = {  # (side, panel, legend) -> value
        ("DPD: ", "USD per 1M tokens", "input tokens"): 16 * per_second * 1e6 / 100,
        ("DPD: ", "USD per 1M tokens", "output tokens"): 8 * per_second * 1e6 / 10,
        ("DPD: ", "Idle GPU share", "GPUs of pods with no request running"): 8 / 24,
        ("Colocated: ", "USD per 1M tokens", "input tokens"): 16 * per_second * 1e6 * 0.25 / 100,
        ("Colocated: ", "USD per 1M tokens", "output tokens"): 16 * per_second * 1e6 * 0.75 / 10,
        ("Colocated: ", "Idle GPU share", "GPUs of pods with no request running"): 8 / 16,
    }
    (row,) = [r for r in dpd_vs_colocated(default_config.spec()).rows if r.title == "Cost per token"]
    tests = []
    for (side, title, legend), value in expected.items():
        column = row.columns[0] if side == "DPD: " else row.columns[1]
        (query,) = [q for q in _panels(column, side)[title].queries if q.legend == legend]
        tests.append({"expr": _expr(query.expr, default_config), "eval_time": "20m",
                      "exp_samples": [{"labels": "{}", "value": value}]})
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": []}))
    test_file = tmp_path / "test.yml"
    test_file.write_text(json.dumps({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [
        {"name": "cost row", "interval": "1m", "input_series": series, "promql_expr_test": tests}]}))
    out = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("side", ["DPD: ", "Colocated: "])
def test_both_columns_of_the_comparison_have_the_cost_row(default_config: Config, side: str) -> None:
    (row,) = [r for r in dpd_vs_colocated(default_config.spec()).rows if r.title == "Cost per token"]
    column = row.columns[0] if side == "DPD: " else row.columns[1]
    assert set(_panels(column, side)) == {"USD per 1M tokens", "Idle GPU share"}
