"""``hyperpod-dpd plan``: estimate colocated vs DPD for your traffic, recommend a split, optionally write it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from hyperpod_analysis.plan import calibration, planner, terms
from hyperpod_analysis.plan.facts import PINNED_PRICES, PriceTable, load_price_file, parse_price_flag
from hyperpod_analysis.plan.traffic import parse
from hyperpod_analysis.plan.write import merge_recommendation
from hyperpod_core import environment
from hyperpod_core.errors import UsageError
from hyperpod_dpd.commands.options import ConfigOption, EnvOption, JsonOption


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    config: ConfigOption = None,
    env: EnvOption = None,
    traffic: Annotated[list[str] | None, typer.Option(
        "--traffic", "-t", help="genai-bench scenario: D(in,out), N(mean,std)/(mean,std), U(min,max)/(min,max), "
        "P(prefix,suffix)/out. Repeatable. Default: D(4096,256).", show_default=False)] = None,
    concurrency: Annotated[str | None, typer.Option(
        help="Comma-separated concurrency levels (closed loop, like genai-bench). Default: 8,16,32.",
        show_default=False)] = None,
    request_rate: Annotated[float | None, typer.Option(
        help="Open-loop Poisson request rate (requests/s) instead of --concurrency.", show_default=False)] = None,
    prefix_reuse: Annotated[float, typer.Option(help="Share of prompt tokens found in the prefix cache (0-1).")] = 0.0,
    model: Annotated[str | None, typer.Option(
        help="Known model name or a Hugging Face config.json (file or folder). Default: the config's model.name.",
        show_default=False)] = None,
    ttft_p95: Annotated[float | None, typer.Option(
        help="TTFT p95 SLO in seconds. Default: observability.slo.ttft_p95_seconds.", show_default=False)] = None,
    tpot_p95: Annotated[float | None, typer.Option(
        help="TPOT p95 SLO in seconds. Default: observability.slo.tpot_p95_seconds.", show_default=False)] = None,
    price: Annotated[list[str] | None, typer.Option(
        help="INSTANCE_TYPE=USD per instance-hour; overrides the pinned table. Repeatable.",
        show_default=False)] = None,
    prices: Annotated[Path | None, typer.Option(
        help="YAML/JSON file mapping instance types to USD per instance-hour.", show_default=False)] = None,
    kv_transfer_gbps: Annotated[float, typer.Option(
        help="Measured effective KV-transfer rate over EFA, GB/s (Dynamo measured 9.6 on p5.48xlarge).")] =
        terms.MEASURED_KV_TRANSFER_BYTES_PER_S / 1e9,
    engine: Annotated[str, typer.Option(help="roofline (built in) or aiconfigurator (extra 'plan').")] = "roofline",
    write: Annotated[bool, typer.Option(
        "--write", help="Merge the recommendation into the config file (validated first, replaced atomically).")] =
        False,
    as_json: JsonOption = False,
) -> None:
    """Estimate colocated vs disaggregated prefill/decode for your traffic and recommend a layout."""
    e = environment.resolve(config, env)
    scenarios = [parse(t) for t in (traffic or ["D(4096,256)"])]
    if request_rate is not None and concurrency is not None:
        raise UsageError(f"pass either --concurrency or --request-rate, not both, got {concurrency!r} and "
                         f"{request_rate!r}")
    if request_rate is not None and request_rate <= 0:
        raise UsageError(f"--request-rate must be a positive number of requests per second, got {request_rate!r}")
    levels = [] if request_rate is not None else _levels(concurrency or "8,16,32")
    if not 0 <= prefix_reuse < 1:
        raise UsageError(f"--prefix-reuse must be in [0, 1), got {prefix_reuse!r}")
    if kv_transfer_gbps <= 0:
        raise UsageError(f"--kv-transfer-gbps must be positive, got {kv_transfer_gbps!r}")
    for name, slo in (("--ttft-p95", ttft_p95), ("--tpot-p95", tpot_p95)):
        if slo is not None and slo <= 0:
            raise UsageError(f"{name} must be a positive number of seconds, got {slo!r}")
    overrides: dict[str, Any] = {"prefix_reuse": prefix_reuse, "kv_transfer_bytes_per_s": kv_transfer_gbps * 1e9,
                                 "engine": engine, "prices": _prices(price, prices)}
    if ttft_p95 is not None:
        overrides["ttft_slo_s"] = ttft_p95
    if tpot_p95 is not None:
        overrides["tpot_slo_s"] = tpot_p95
    inputs = planner.inputs_from_config(e.config, model=model, **overrides)
    inputs.prices.price(inputs.instance.instance_type)  # fail early without a price
    for t in scenarios:
        planner.check_traffic(inputs, t)
    sm = planner.step_model(inputs)
    loads: list[tuple[int | None, float | None]] = [(c, None) for c in levels] or [(None, request_rate)]
    comparisons = [planner.compare(inputs, sm, t, concurrency=c, request_rate=r) for t in scenarios for c, r in loads]
    rec = planner.recommend(inputs, sm, scenarios, levels, request_rate)
    checks = calibration.check(inputs)
    if as_json:
        print(json.dumps({"scenarios": [c.as_dict() for c in comparisons], "recommendation": rec}, indent=2))
        print(_calibration_line(checks), file=sys.stderr)
    else:
        _print_tables(inputs, comparisons, rec, checks)
    if write:
        if not rec["split"]:
            print("not written: the recommendation is colocated; set endpoint.apply: colocated (dist/endpoint/ then "
                  "holds the colocated manifest) instead of the DPD one", file=sys.stderr)
            return
        changes = merge_recommendation(e.config_path, rec)
        print(f"wrote {e.config_path}: " + ("; ".join(changes) if changes else "already as recommended"),
              file=sys.stderr)


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        levels = []
    if not levels or levels[0] < 1 or levels[-1] > 1024:
        raise UsageError(f"--concurrency must be comma-separated integers from 1 to 1024, got {text!r}")
    return levels


def _prices(flags: list[str] | None, path: Path | None) -> PriceTable:
    table = dict(PINNED_PRICES.usd_per_instance_hour)
    source, as_of = PINNED_PRICES.source, PINNED_PRICES.as_of
    if path is not None:
        table.update(load_price_file(path))
        source, as_of = f"{path} over {source}", "as given"
    for flag in flags or []:
        name, usd = parse_price_flag(flag)
        table[name] = usd
        source, as_of = f"--price over {source}", "as given"
    return PriceTable(usd_per_instance_hour=table, source=source, as_of=as_of)


def _pct(x: float) -> str:
    return f"{x:+.1f}%"


def _print_tables(inputs: planner.PlanInputs, comparisons: list[planner.Comparison], rec: dict[str, Any],
                  checks: list[dict[str, Any]]) -> None:
    out = Console(width=None if sys.stdout.isatty() else 140)
    out.print(f"{inputs.model.name} on {inputs.instance.instance_type} (TP {inputs.tp}), engine {rec['engine']}, "
              f"KV {terms.kv_bytes_per_token(inputs.model):,} bytes/token over EFA at "
              f"{terms.kv_transfer_bytes_per_s(inputs.instance, inputs.kv_transfer_bytes_per_s) / 1e9:g} GB/s")
    for c in comparisons:
        nodes = c.layout.nodes(inputs)
        load = f"concurrency {c.concurrency}" if c.concurrency is not None else f"{c.request_rate:g} req/s"
        t = Table(title=f"{c.traffic.text} at {load}", title_justify="left")
        for col in ("layout", "nodes", "TTFT p50 ms", "TPOT p50 ms", "E2E p50 ms", "out tok/s", "tok/s/GPU",
                    "USD/1M out"):
            t.add_column(col, justify="right" if col not in ("layout",) else "left")
        rows = [("colocated, 1 node (AWS compared)", 1, c.colocated),
                (f"colocated, {nodes} nodes (equal GPUs)", nodes, c.colocated_equal_gpus),
                (f"DPD {c.layout.prefill_replicas}P+{c.layout.decode_replicas}D", nodes, c.dpd)]
        for name, n, m in rows:
            name += " (overloaded)" if m.saturated else ""
            per_gpu = planner.tokens_per_s_per_gpu(inputs, n, m.output_tokens_per_s)
            t.add_row(name, str(n), f"{m.ttft_ms:.0f}", f"{m.tpot_ms:.1f}", f"{m.e2e_p50_ms:.0f}",
                      f"{m.output_tokens_per_s:.0f}", f"{per_gpu}",
                      f"{planner.cost_per_million_output_tokens(inputs, n, m.output_tokens_per_s):.2f}")
        out.print(t)
        aws, eq = planner.improvement(c.colocated, c.dpd), planner.improvement(c.colocated_equal_gpus, c.dpd)
        out.print(f"  DPD vs 1 colocated node: TPOT {_pct(aws['tpot'])}, E2E {_pct(aws['e2e_p50'])}, "
                  f"throughput {_pct(aws['output_throughput'])}; at equal GPUs: TPOT {_pct(eq['tpot'])}, "
                  f"E2E {_pct(eq['e2e_p50'])}, throughput {_pct(eq['output_throughput'])} (positive = DPD better)")
    verdict = (f"split: {rec['prefill_replicas']} prefill replica(s) on {rec['prefill_nodes']} node(s) + "
               f"{rec['decode_replicas']} decode on {rec['decode_nodes']}, routing threshold "
               f"{rec['routing_threshold_tokens']}, PD buffer {rec['pd_buffer_size_bytes'] >> 30} GiB, max-num-seqs "
               f"prefill {rec['max_num_seqs']['prefill']} / decode {rec['max_num_seqs']['decode']}"
               if rec["split"] else f"do not split: colocated x{rec['colocated_replicas']} on {rec['nodes']} node(s)")
    out.print(f"recommendation: {verdict} ({rec['reason']}; SLO TTFT p95 <= {inputs.ttft_slo_s:g} s, TPOT p95 <= "
              f"{inputs.tpot_slo_s:g} s; price {rec['price_usd_per_instance_hour']} USD/h, {rec['price_source']})")
    out.print(_calibration_line(checks))


def _calibration_line(checks: list[dict[str, Any]]) -> str:
    parts = [f"{c['metric']}@c{c['concurrency']} {c['estimated_pct']:+.1f}% vs {c['published_pct']:+.1f}% "
             f"({c['off_points']:+.1f} pts)" for c in checks]
    worst = max(abs(c["off_points"]) for c in checks)
    ok = "within" if all(c["within_tolerance"] for c in checks) else "OUTSIDE"
    return (f"calibration (AWS 1P+1D vs 1 colocated p5, Llama-3.3-70B, D(4096,256)), same engine and parameters: "
            f"{'; '.join(parts)}; worst {worst:.1f} pts, {ok} +-{calibration.TOLERANCE_POINTS:g}")
