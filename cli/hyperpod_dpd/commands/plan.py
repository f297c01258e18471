"""``hyperpod-dpd plan``: estimate colocated vs DPD for your traffic, recommend a split, optionally write it.

It sizes one endpoint (``--endpoint``, else the config's only one) and shows the fleet: per set of instance groups,
the GPUs every endpoint's roles may hold there at peak against the groups' GPUs
(:mod:`hyperpod_analysis.plan.fleet`)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from hyperpod_analysis.plan import planner, terms, validation
from hyperpod_analysis.plan.coldstart import cold_start, cold_start_line
from hyperpod_analysis.plan.facts import PriceTable, load_price_file, parse_price_flag
from hyperpod_analysis.plan.fleet import GroupPeak, fleet_peaks
from hyperpod_analysis.plan.traffic import Traffic, parse
from hyperpod_analysis.plan.write import merge_recommendation, role_groups_to_size, unused_nodes
from hyperpod_core import environment
from hyperpod_core.config import load_config
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import DistLayout
from hyperpod_core.errors import UsageError
from hyperpod_core.names import ROLES
from hyperpod_core.prices import configured_table
from hyperpod_dpd.commands.options import ConfigOption, EndpointOption, EnvOption, JsonOption, OutputOption
from hyperpod_dpd.deployment import endpoint_of
from hyperpod_dpd.render import OutputFormat, console, emit, output_format

TrafficOption = Annotated[list[str] | None, typer.Option(
    "--traffic", "-t", metavar="SCENARIO", show_default=False,
    help="genai-bench scenario: D(in,out), N(mean,std)/(mean,std), U(min,max)/(min,max), P(prefix,suffix)/out. "
         "Repeatable. Default: D(4096,256).")]
ConcurrencyOption = Annotated[str | None, typer.Option(
    metavar="LEVELS", show_default=False,
    help="Comma-separated concurrency levels (closed loop, like genai-bench). Default: 8,16,32.")]
RequestRateOption = Annotated[float | None, typer.Option(
    metavar="RATE", show_default=False, help="Open-loop Poisson request rate (requests/s) instead of --concurrency.")]
PrefixReuseOption = Annotated[float, typer.Option(
    metavar="SHARE", help="Share of prompt tokens found in the prefix cache (0-1).")]
ModelOption = Annotated[str | None, typer.Option(
    metavar="MODEL", show_default=False,
    help="Known model name or a Hugging Face config.json (file or folder). Default: the endpoint's model.name.")]
TtftOption = Annotated[float | None, typer.Option(
    metavar="SECONDS", show_default=False,
    help="TTFT p95 SLO in seconds. Default: the endpoint's slo, else observability.slo.ttft_p95_seconds.")]
TpotOption = Annotated[float | None, typer.Option(
    metavar="SECONDS", show_default=False,
    help="TPOT p95 SLO in seconds. Default: the endpoint's slo, else observability.slo.tpot_p95_seconds.")]
PriceOption = Annotated[list[str] | None, typer.Option(
    metavar="INSTANCE_TYPE=USD", show_default=False,
    help="INSTANCE_TYPE=USD per instance-hour; overrides the pinned table. Repeatable.")]
PricesOption = Annotated[Path | None, typer.Option(
    metavar="PATH", show_default=False, help="YAML/JSON file mapping instance types to USD per instance-hour.")]
KvTransferOption = Annotated[float, typer.Option(
    metavar="GBPS",
    help="Measured effective KV-transfer rate over EFA, GB/s (Dynamo measured 9.6 on p5.48xlarge).")]
EngineOption = Annotated[str, typer.Option(
    metavar="ENGINE", help="roofline (built in) or aiconfigurator (extra 'plan').")]
WriteOption = Annotated[bool, typer.Option(
    "--write", help="Merge the recommendation into the config file (validated first, replaced atomically).")]
CalibrationOption = Annotated[bool, typer.Option(
    "--calibration", help="Print the leave-one-out validation against the published data (predicted vs "
    "published, error per point) and the six efficiencies, then exit.")]


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    config: ConfigOption = None, env: EnvOption = None, endpoint: EndpointOption = None, traffic: TrafficOption = None,
    concurrency: ConcurrencyOption = None, request_rate: RequestRateOption = None,
    prefix_reuse: PrefixReuseOption = 0.0, model: ModelOption = None, ttft_p95: TtftOption = None,
    tpot_p95: TpotOption = None, price: PriceOption = None, prices: PricesOption = None,
    kv_transfer_gbps: KvTransferOption = terms.MEASURED_KV_TRANSFER_BYTES_PER_S / 1e9,
    engine: EngineOption = "roofline", write: WriteOption = False, show_calibration: CalibrationOption = False,
    as_json: JsonOption = False, output: OutputOption = None,
) -> None:
    """Estimate colocated vs disaggregated prefill/decode for your traffic and recommend a layout."""
    fmt = output_format(output, as_json)
    if show_calibration:
        _print_calibration(validation.validate(), fmt)
        return
    e = environment.resolve(config, env)
    specs = e.config.specs()
    scenarios = [parse(t) for t in (traffic or ["D(4096,256)"])]
    levels = _loads(concurrency, request_rate)
    overrides = _overrides(prefix_reuse=prefix_reuse, kv_transfer_gbps=kv_transfer_gbps, ttft_p95=ttft_p95,
                           tpot_p95=tpot_p95)
    size = functools.partial(_size, scenarios=scenarios, levels=levels, request_rate=request_rate, engine=engine,
                             price=price, prices=prices, overrides=overrides)
    fleet = fleet_peaks(specs)
    if endpoint is None and len(specs) > 1 and not write and model is None:
        _plan_fleet([(spec, *size(spec)) for spec in specs], fleet, fmt)
        return
    spec = endpoint_of(e, endpoint, "plan --write" if write else "plan --model" if model is not None else "plan")
    inputs, comparisons, rec = size(spec, model=model)
    notes = [planner.price_note(inputs), _validation_line(), cold_start_line(inputs.model)]
    if fmt.data:
        emit({"endpoint": spec.name, "scenarios": [c.as_dict() for c in comparisons], "recommendation": rec,
              "fleet": [row.as_dict() for row in fleet]}, fmt)
        for note in notes:
            print(note, file=sys.stderr)
    else:
        _print_tables(inputs, comparisons, rec, notes)
        _print_fleet(fleet)
    _write(e, spec, _groups_of_others(specs, spec), rec, write)


def _size(spec: EndpointSpec, *, scenarios: list[Traffic], levels: list[int], request_rate: float | None,
          engine: str, price: list[str] | None, prices: Path | None, overrides: dict[str, Any],
          model: str | None = None) -> tuple[planner.PlanInputs, list[planner.Comparison], dict[str, Any]]:
    """One endpoint sized: its planner inputs, colocated vs DPD per scenario and load, and the recommendation."""
    base = configured_table(spec.endpoint.instance_type, spec.benchmark.instance_hour_usd)
    inputs = planner.inputs_of(spec, model=model, engine=engine, prices=_prices(price, prices, base), **overrides)
    for t in scenarios:
        planner.check_traffic(inputs, t)
    sm = planner.step_model(inputs)
    loads: list[tuple[int | None, float | None]] = [(c, None) for c in levels] or [(None, request_rate)]
    rec = planner.recommend(inputs, sm, scenarios, levels, request_rate)
    chosen = planner.recommended_layout(rec)
    comparisons = [planner.compare(inputs, sm, t, concurrency=c, request_rate=r, recommended=chosen)
                   for t in scenarios for c, r in loads]
    rec["cold_start"] = [{"source": c.source, "seconds": list(c.seconds) if c.seconds else None, "note": c.note}
                         for c in cold_start(inputs.model)]
    return inputs, comparisons, rec


def _plan_fleet(sized: list[tuple[EndpointSpec, planner.PlanInputs, list[planner.Comparison], dict[str, Any]]],
                fleet: list[GroupPeak], fmt: OutputFormat) -> None:
    """A config of several endpoints and no ``--endpoint``: one summary per endpoint, then the fleet table
    (``--json``: each endpoint's scenarios and recommendation, and the fleet)."""
    if fmt.data:
        emit({"endpoints": [{"endpoint": spec.name, "scenarios": [c.as_dict() for c in comparisons],
                             "recommendation": rec} for spec, _, comparisons, rec in sized],
              "fleet": [row.as_dict() for row in fleet]}, fmt)
        print(_validation_line(), file=sys.stderr)
        return
    out = console()
    for spec, inputs, _, rec in sized:
        configured = planner.Layout(prefill_replicas=inputs.prefill_replicas, decode_replicas=inputs.decode_replicas)
        out.print(f"{spec.name}: {inputs.model.name} on {inputs.instance.instance_type} (TP {inputs.tp}): configured "
                  f"DPD {inputs.prefill_replicas}P+{inputs.decode_replicas}D on {configured.nodes(inputs)} node(s); "
                  f"recommendation: {_verdict(inputs, rec)}, TTFT p95 {rec['ttft_p95_ms']:g} ms, TPOT p95 "
                  f"{rec['tpot_p95_ms']:g} ms ({rec['reason']})", highlight=False)
    _print_fleet(fleet)
    out.print(_validation_line())
    out.print("each endpoint's tables per scenario and load, and --write: hyperpod-dpd plan --endpoint NAME")


def _loads(concurrency: str | None, request_rate: float | None) -> list[int]:
    """The concurrency levels to estimate; none for an open-loop ``--request-rate``."""
    if request_rate is not None and concurrency is not None:
        raise UsageError(f"pass either --concurrency or --request-rate, not both, got {concurrency!r} and "
                         f"{request_rate!r}")
    if request_rate is not None and request_rate <= 0:
        raise UsageError(f"--request-rate must be a positive number of requests per second, got {request_rate!r}")
    return [] if request_rate is not None else _levels(concurrency or "8,16,32")


def _overrides(*, prefix_reuse: float, kv_transfer_gbps: float, ttft_p95: float | None,
               tpot_p95: float | None) -> dict[str, Any]:
    """What the options change in the planner's inputs (checked first)."""
    if not 0 <= prefix_reuse < 1:
        raise UsageError(f"--prefix-reuse must be in [0, 1), got {prefix_reuse!r}")
    if kv_transfer_gbps <= 0:
        raise UsageError(f"--kv-transfer-gbps must be positive, got {kv_transfer_gbps!r}")
    for name, slo in (("--ttft-p95", ttft_p95), ("--tpot-p95", tpot_p95)):
        if slo is not None and slo <= 0:
            raise UsageError(f"{name} must be a positive number of seconds, got {slo!r}")
    overrides: dict[str, Any] = {"prefix_reuse": prefix_reuse, "kv_transfer_bytes_per_s": kv_transfer_gbps * 1e9}
    if ttft_p95 is not None:
        overrides["ttft_slo_s"] = ttft_p95
    if tpot_p95 is not None:
        overrides["tpot_slo_s"] = tpot_p95
    return overrides


def _groups_of_others(specs: tuple[EndpointSpec, ...], spec: EndpointSpec) -> frozenset[str]:
    """The instance groups another endpoint's roles may land on (the recommendation does not size them)."""
    return frozenset(g.name for s in specs if s.name != spec.name for role in ROLES for g in s.role_groups(role))


def _write(e: environment.Environment, spec: EndpointSpec, others: frozenset[str], rec: dict[str, Any],
           write: bool) -> None:
    """``--write``: merge a split into the endpoint's keys (and the node counts of the groups that hold its roles
    only); then warn about nodes of its groups the recommendation leaves unused."""
    written = spec
    if write and not rec["split"]:
        folder = DistLayout.of(e.dist, spec.name, "colocated").endpoint_dir
        print(f"not written: the recommendation is colocated; set {spec.field('apply')}: colocated ({folder}/ then "
              "holds the colocated manifest) instead of the DPD one", file=sys.stderr)
    elif write:
        changes = merge_recommendation(e.config_path, rec, at=spec.at, groups=role_groups_to_size(spec, others))
        print(f"wrote {e.config_path}: " + ("; ".join(changes) if changes else "nothing: already as recommended"),
              file=sys.stderr)
        written = load_config(e.config_path).spec(spec.name)
    for warning in unused_nodes(written, rec, others=others):
        print(f"warning: {warning}", file=sys.stderr)


def _print_fleet(fleet: list[GroupPeak]) -> None:
    """The fleet's GPUs at peak per set of instance groups (:mod:`hyperpod_analysis.plan.fleet`)."""
    out = console()
    t = Table(title="fleet: GPUs the endpoints' roles may hold at peak (autoscaling maxima), per instance group",
              title_justify="left")
    for col in ("instance groups", "GPUs", "roles that run only there (peak GPUs)", "at peak", "free"):
        t.add_column(col, justify="left" if col in ("instance groups", "roles that run only there (peak GPUs)")
                     else "right")
    for row in fleet:
        roles = ", ".join(f"{r.endpoint} {r.role} {r.gpus}" for r in row.roles) or "-"
        t.add_row(", ".join(row.groups), str(row.gpus), roles, str(row.peak_gpus),
                  str(row.free_gpus) if row.free_gpus >= 0 else f"[red]{row.free_gpus}[/red]")
    out.print(t)


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        levels = []
    if not levels or levels[0] < 1 or levels[-1] > 1024:
        raise UsageError(f"--concurrency must be comma-separated integers from 1 to 1024, got {text!r}")
    return levels


def _prices(flags: list[str] | None, path: Path | None, base: PriceTable) -> PriceTable:
    """``base`` (the pinned table with ``benchmark.instance_hour_usd`` over it) under the file and the flags."""
    table = dict(base.usd_per_instance_hour)
    source, as_of = base.source, base.as_of
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


def _band(metric: str) -> str:
    return f"+-{validation.BANDS[metric]:.0f}"


def _print_tables(inputs: planner.PlanInputs, comparisons: list[planner.Comparison], rec: dict[str, Any],
                  notes: list[str]) -> None:
    out = console()
    priced = inputs.prices.price(inputs.instance.instance_type) is not None
    out.print(f"{inputs.model.name} on {inputs.instance.instance_type} (TP {inputs.tp}), engine {rec['engine']}, "
              f"KV {terms.kv_bytes_per_token(inputs.model):,} bytes/token over EFA at "
              f"{terms.kv_transfer_bytes_per_s(inputs.instance, inputs.kv_transfer_bytes_per_s) / 1e9:g} GB/s; "
              f"times +-{validation.BANDS['time_pct']:.0f} % (validation)")
    for c in comparisons:
        nodes = c.layout.nodes(inputs)
        load = f"concurrency {c.concurrency}" if c.concurrency is not None else f"{c.request_rate:g} req/s"
        t = Table(title=f"{c.traffic.text} at {load}", title_justify="left")
        columns = ["layout", "nodes", "TTFT p50 ms", "TPOT p50 ms", "E2E p50 ms", "out tok/s", "tok/s/GPU",
                   "node-h/1M out"] + (["USD/1M out"] if priced else [])
        for col in columns:
            t.add_column(col, justify="right" if col != "layout" else "left")
        chosen = planner.recommended_layout(rec)
        per_node = inputs.instance.gpus // inputs.tp
        rows = [("colocated, 1 node (AWS compared)", planner.Layout(colocated_replicas=per_node), 1, c.colocated),
                (f"colocated, {nodes} nodes (equal GPUs)",
                 planner.Layout(colocated_replicas=nodes * per_node), nodes,
                 c.colocated_equal_gpus),
                (f"DPD {c.layout.prefill_replicas}P+{c.layout.decode_replicas}D (config)", c.layout, nodes, c.dpd)]
        if c.recommended is not None:
            layout, metrics = c.recommended
            rows.append((planner.layout_text(layout), layout, layout.nodes(inputs), metrics))
        for name, layout, n, m in rows:
            name += " (overloaded)" if m.saturated else ""
            name = f"* {name} (recommended)" if layout == chosen else name
            per_gpu = planner.tokens_per_s_per_gpu(inputs, n, m.output_tokens_per_s)
            cells = [name, str(n), f"{m.ttft_ms:.0f}", f"{m.tpot_ms:.1f}", f"{m.e2e_p50_ms:.0f}",
                     f"{m.output_tokens_per_s:.0f}", f"{per_gpu}",
                     f"{planner.node_hours_per_million(n, m.output_tokens_per_s):.3g}"]
            cost = planner.cost_per_million_output_tokens(inputs, n, m.output_tokens_per_s)
            t.add_row(*cells, *([f"{cost:.2f}"] if priced and cost is not None else []))
        out.print(t)
        aws, eq = planner.improvement(c.colocated, c.dpd), planner.improvement(c.colocated_equal_gpus, c.dpd)
        out.print(f"  DPD vs 1 colocated node: TPOT {_pct(aws['tpot'])} ({_band('tpot')} pts), E2E "
                  f"{_pct(aws['e2e_p50'])} ({_band('e2e_p50')}), throughput {_pct(aws['output_throughput'])} "
                  f"({_band('output_throughput')}); at equal GPUs: TPOT {_pct(eq['tpot'])}, E2E {_pct(eq['e2e_p50'])}, "
                  f"throughput {_pct(eq['output_throughput'])} (positive = DPD better)")
    out.print(f"recommendation (* row): {_verdict(inputs, rec)} ({rec['reason']}; SLO TTFT p95 <= "
              f"{inputs.ttft_slo_s:g} s, "
              f"TPOT p95 <= {inputs.tpot_slo_s:g} s)")
    if rec["uncertain"]:
        out.print(f"  uncertain: {rec['uncertainty']}")
    for note in notes:
        out.print(note)


def _verdict(inputs: planner.PlanInputs, rec: dict[str, Any]) -> str:
    """The recommendation in one phrase: the split and its settings, or colocated."""
    if not rec["split"]:
        return f"do not split: colocated x{rec['colocated_replicas']} on {rec['nodes']} node(s)"
    where = (f"{rec['prefill_replicas']} prefill + {rec['decode_replicas']} decode replica(s) on {rec['nodes']} "
             "node(s) both roles may land on" if inputs.roles_share_nodes else
             f"{rec['prefill_replicas']} prefill replica(s) on {rec['prefill_nodes']} node(s) + "
             f"{rec['decode_replicas']} decode on {rec['decode_nodes']}")
    return (f"split: {where}, routing threshold {rec['routing_threshold_tokens']}, PD buffer "
            f"{rec['pd_buffer_size_bytes'] >> 30} GiB, max-num-seqs prefill {rec['max_num_seqs']['prefill']} / "
            f"decode {rec['max_num_seqs']['decode']}")


def _validation_line() -> str:
    b = validation.BANDS
    return (f"validation (plan --calibration, leave-one-out on published data): bands TPOT +-{b['tpot']:g} pts, "
            f"E2E +-{b['e2e_p50']:g} pts, throughput +-{b['output_throughput']:g} pts, step times "
            f"+-{b['time_pct']:g} %")


def _print_calibration(report: validation.Report, fmt: OutputFormat) -> None:
    k = report.efficiencies
    if fmt.data:
        emit({"efficiencies": {f: getattr(k, f) for f in k.__dataclass_fields__},
              "rows": [r.__dict__ for r in report.rows], "bands": report.bands(),
              "not_used": [{"source": s, "why": w} for s, w in validation.NOT_USED]}, fmt)
        return
    out = console()
    out.print("efficiencies (fitted on every point): " + ", ".join(
        f"{f} {getattr(k, f):.3g}" for f in k.__dataclass_fields__))
    t = Table(title="leave-one-out: each point predicted from a fit without it (kernel points: without their GPU)",
              title_justify="left")
    for col in ("published point", "published", "fit on all", "left out", "error"):
        t.add_column(col, justify="left" if col == "published point" else "right")
    for r in report.rows:
        unit = " %" if r.unit == "pct" else " ms"
        err = f"{r.error:+.1f} {'pts' if r.unit == 'pct' else '%'}"
        miss = r.kind == "pd" and abs(r.error) > validation.TOLERANCE_POINTS
        t.add_row(r.name, f"{r.published:g}{unit}", f"{r.fitted:g}{unit}", f"{r.left_out:g}{unit}",
                  err + (" MISS" if miss else ""))
    out.print(t)
    b = report.bands()
    out.print(f"bands: TPOT +-{b['tpot']:.1f} pts, E2E +-{b['e2e_p50']:.1f} pts, throughput "
              f"+-{b['output_throughput']:.1f} pts, step times +-{b['time_pct']:.1f} %; worst P/D error "
              f"{report.worst_pd_error():.1f} (tolerance +-{validation.TOLERANCE_POINTS:g}); causes of misses: "
              f"docs/sizing.md")
    for source, why in validation.NOT_USED:
        out.print(f"not used: {source}: {why}")
