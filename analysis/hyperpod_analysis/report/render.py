"""The decision report: PNG charts (matplotlib, headless), Markdown, a self-contained HTML page, summary JSON.

One section per experiment, each labelled with its layouts: the equal-GPU comparison (the decision basis, with
the verdicts) and the AWS reference (AWS's published statements beside it, and how this setup deviates from
AWS's). AWS's numbers appear only in the reference section. Invalid runs are marked, never compared.

Written into a temporary folder beside the target and moved into place only when every file is written:
a failed report never leaves half a report behind.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_analysis.report.analysis import (
    AWS_H100_REFERENCE,
    LABELS,
    METRICS,
    MIN_REQUESTS,
    Cell,
    TokenCost,
    Verdict,
    gpu_hours_text,
    judged,
    reference_deviations,
    slo_check,
)
from hyperpod_analysis.report.results import Measurement
from hyperpod_core.atomic import staged_dir
from hyperpod_core.config import SloConfig
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.prices import InstancePrice, no_price_line

COLORS = {"tpot": "#1f77b4", "e2e_p50": "#2ca02c", "e2e_p90": "#98df8a", "ttft": "#d62728",
          "output_throughput": "#ff7f0e", "dpd": "#1f77b4", "colocated": "#7f7f7f"}
PLANNER_KEYS = {"tpot": "tpot", "e2e_p50": "e2e_p50", "output_throughput": "output_throughput"}


@dataclass(frozen=True, kw_only=True)
class Report:
    spec: EndpointSpec
    """The endpoint the results are of."""
    cells: list[Cell]
    verdicts: list[Verdict]
    planner_note: str
    source: str
    price: InstancePrice | None = None
    """What an instance-hour costs (``hyperpod_core.prices.instance_price``). Default: none (GPU-hours only)."""
    costs: dict[str, TokenCost] = field(default_factory=dict)
    """Each run's cost per token, by its ``source`` (:func:`~hyperpod_analysis.report.analysis.token_costs`).
    Default: none computed."""
    cost_note: str = ""
    """How the colocated runs' GPU-hours were split between input and output tokens. Default: not said."""

    def experiments(self) -> list[str]:
        """The experiments present, the decision basis first."""
        present = {c.experiment for c in self.cells}
        return [x for x in EXPERIMENT_ORDER if x in present]

    def scenarios(self, experiment: str | None = None) -> list[str]:
        return list(dict.fromkeys(c.scenario for c in self.cells if experiment in (None, c.experiment)))

    def cells_of(self, scenario: str) -> list[Cell]:
        return sorted((c for c in self.cells if c.scenario == scenario), key=lambda c: c.concurrency)

    def experiment_cells(self, experiment: str) -> list[Cell]:
        return [c for c in self.cells if c.experiment == experiment]

    def measurements(self) -> list[Measurement]:
        return [m for c in self.cells for m in (c.colocated, c.dpd)]


EXPERIMENT_ORDER = ("equal-gpu", "aws-reference")


def experiment_title(report: Report, experiment: str) -> str:
    """The experiment's label with its layouts, as measured (GPUs from the runs)."""
    first = report.experiment_cells(experiment)[0]
    if experiment == "aws-reference":
        return (f"AWS reference: 1 prefill + 1 decode replica ({first.dpd.gpus} GPUs) vs one colocated replica "
                f"({first.colocated.gpus} GPUs), AWS's published setup")
    return (f"Equal-GPU comparison (the decision basis): DPD ({first.dpd.gpus} GPUs) vs colocated replicas "
            f"({first.colocated.gpus} GPUs)")


def _fmt(x: float, digits: int = 1) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:+.1f}%"


# --- charts -----------------------------------------------------------------------------------------------


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(scenario: str, traffic: str) -> str:
    return traffic if scenario == traffic else f"{scenario} {traffic}"


def chart_improvement(report: Report, scenario: str, path: Path) -> None:
    """Grouped bars of % improvement per concurrency (AWS's chart form), planner estimates as markers and AWS's
    published H100 numbers as reference marks for D(4096,256)."""
    plt = _plt()
    cells = report.cells_of(scenario)
    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=100)
    width = 0.8 / len(METRICS)
    xs = range(len(cells))
    for i, metric in enumerate(METRICS):
        vals = [math.nan if c.invalid else c.improvement()[metric] for c in cells]
        pos = [x - 0.4 + width * (i + 0.5) for x in xs]
        ax.bar(pos, vals, width=width, color=COLORS[metric], label=LABELS[metric])
        for p, v in zip(pos, vals, strict=True):
            if not math.isnan(v):
                ax.annotate(f"{v:.0f}", (p, v), ha="center", va="bottom" if v >= 0 else "top", fontsize=7)
        key = PLANNER_KEYS.get(metric)
        est = [(p, c.estimate["improvement_pct"][key]) for p, c in zip(pos, cells, strict=True)
               if key and c.estimate and key in c.estimate.get("improvement_pct", {})]
        if est:
            ax.scatter([p for p, _ in est], [v for _, v in est], marker="D", facecolors="none",
                       edgecolors="black", zorder=3, label="planner estimate" if metric == "tpot" else None)
    if _is_aws_reference(cells[0]):
        _reference_marks(ax, cells, width)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), [f"concurrency {c.concurrency}" + (" (run invalid)" if c.invalid else "")
                             for c in cells])
    ax.set_ylabel("DPD improvement over colocated (%)")
    ax.set_title(f"{_title(scenario, cells[0].traffic)}: DPD improvement, higher is better")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _is_aws_reference(cell: Cell) -> bool:
    """AWS's numbers belong next to the aws-reference experiment's D(4096,256) only, never the equal-GPU one."""
    return cell.experiment == "aws-reference" and cell.traffic.replace(" ", "") == AWS_H100_REFERENCE["traffic"]


def _reference_marks(ax: Any, cells: list[Cell], width: float) -> None:
    ref = AWS_H100_REFERENCE
    for i, c in enumerate(cells):
        tpot = ref["points"]["tpot"].get(c.concurrency)
        if tpot is not None:
            x = i - 0.4 + width * 0.5
            ax.hlines(tpot, x - width, x + width, colors="black", linestyles="--")
            ax.annotate(f"AWS H100 {tpot:.0f}%", (x, tpot), fontsize=6, ha="center", va="bottom")
    lo, hi = ref["ranges"]["e2e_p50"]
    ax.axhspan(lo, hi, color=COLORS["e2e_p50"], alpha=0.08, label=f"AWS H100 E2E P50 {lo:.0f}-{hi:.0f}%")
    ax.axhline(ref["up_to"]["output_throughput"], color=COLORS["output_throughput"], linestyle=":",
               label=f"AWS H100 throughput up to {ref['up_to']['output_throughput']:.0f}%")


def chart_curves(report: Report, scenario: str, path: Path) -> None:
    """Absolute latency against throughput: TPOT vs output tokens/s, and E2E P50 vs output tokens/s per GPU."""
    plt = _plt()
    cells = report.cells_of(scenario)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=100)
    for mode in ("colocated", "dpd"):
        ms: list[Measurement] = [getattr(c, mode) for c in cells]
        a1.plot([m.output_tokens_per_s for m in ms], [m.tpot_ms["mean"] for m in ms], marker="o",
                color=COLORS[mode], label=f"{mode} ({ms[0].gpus} GPUs)")
        a2.plot([m.tokens_per_s_per_gpu for m in ms], [m.e2e_ms["p50"] for m in ms], marker="o",
                color=COLORS[mode], label=mode)
        for m in ms:
            a1.annotate(f"c{m.concurrency}", (m.output_tokens_per_s, m.tpot_ms["mean"]), fontsize=7)
            a2.annotate(f"c{m.concurrency}", (m.tokens_per_s_per_gpu, m.e2e_ms["p50"]), fontsize=7)
    a1.set_xlabel("output tokens/s (endpoint)")
    a1.set_ylabel("TPOT (mean), ms")
    a2.set_xlabel("output tokens/s per GPU")
    a2.set_ylabel("E2E (p50), ms")
    a1.legend(fontsize=8)
    a2.legend(fontsize=8)
    fig.suptitle(f"{_title(scenario, cells[0].traffic)}: latency vs throughput")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --- tables ---------------------------------------------------------------------------------------------


def _path_text(report: Report, c: Cell, m: Measurement) -> str:
    """The DPD-path evidence of the run: its folder's prefill request count, marked ``folder-level`` when that
    count covers the runs of more than one row (one Job measured several concurrency levels)."""
    if m.mode != "dpd":
        return "-"
    if c.invalid:
        return f"INVALID: {c.invalid}"
    record = m.dpd_path or {}
    rows = sorted({(x.scenario, x.concurrency) for x in report.measurements() if x.folder == m.folder})
    scope = (f" folder-level, over {len(rows)} rows ({', '.join(f'{s} c{n}' for s, n in rows)}):"
             if len(rows) > 1 else "")
    return (f"ok:{scope} {float(record.get('prefill_requests', 0)):.0f} requests on prefill "
            f"({record.get('source')})")


def _slo_text(m: Measurement, slo: SloConfig) -> str:
    if not judged(m):
        return f"not judged (n < {MIN_REQUESTS})"
    check = slo_check(m, slo)
    return "yes" if check.ok else "no: " + "; ".join(check.misses)


def measurement_rows(report: Report, scenario: str) -> list[list[str]]:
    rows = []
    for c in report.cells_of(scenario):
        for m in (c.colocated, c.dpd):
            rows.append([str(m.concurrency), m.mode, str(m.gpus), str(m.n), _fmt(m.ttft_ms["mean"]),
                         _fmt(m.ttft_ms.get("p95", math.nan)), _fmt(m.tpot_ms["mean"], 2),
                         _fmt(m.tpot_ms.get("p95", math.nan), 2), _fmt(m.e2e_ms["p50"]), _fmt(m.e2e_ms["p90"]),
                         _fmt(m.output_tokens_per_s), _fmt(m.tokens_per_s_per_gpu), f"{m.error_rate:.1%}",
                         _slo_text(m, report.spec.slo), _path_text(report, c, m)])
        if c.estimate:  # the planner's estimate of the same layouts, next to the measurements of this concurrency
            gpus = c.estimate.get("gpus") or {}
            for mode in ("colocated", "dpd"):
                e = c.estimate.get(mode) or {}
                rows.append([str(c.concurrency), f"{mode} (planner, p50)", str(gpus.get(mode, "-")), "-",
                             _est(e, "ttft_ms", 1), "-", _est(e, "tpot_ms", 2), "-", _est(e, "e2e_p50_ms", 1), "-",
                             _est(e, "output_tokens_per_s", 1), "-", "-", "-", "-"])
    return rows


def _est(e: dict[str, Any], key: str, digits: int) -> str:
    return _fmt(float(e[key]), digits) if isinstance(e.get(key), int | float) else "n/a"


#: Every column that shows a statistic names it; the planner's rows hold its medians in the (mean) columns and say
#: so in their mode ("(planner, p50)"). TTFT is the benchmark client's, end to end.
MEASUREMENT_HEADER = ["concurrency", "mode", "GPUs", "n", "client TTFT (mean) ms", "client TTFT (p95) ms",
                      "TPOT (mean) ms", "TPOT (p95) ms", "E2E (p50) ms", "E2E (p90) ms", "output tok/s",
                      "tok/s per GPU", "errors", "meets SLO", "DPD path"]
#: What the planner column compares, per experiment: the layouts that experiment measures.
PLANNER_LAYOUTS = {"equal-gpu": "DPD vs colocated on as many GPUs",
                   "aws-reference": "1 prefill + 1 decode vs one colocated replica"}


def improvement_header(experiment: str) -> list[str]:
    return ["concurrency", *(LABELS[k] for k in METRICS), LABELS["output_throughput_per_gpu"],
            f"planner TPOT (p50) / E2E (p50) / throughput ({PLANNER_LAYOUTS[experiment]})", "AWS H100 (published)"]


def improvement_rows(report: Report, scenario: str) -> list[list[str]]:
    rows = []
    for c in report.cells_of(scenario):
        if c.invalid:
            rows.append([str(c.concurrency), *(["invalid run"] * (len(improvement_header(c.experiment)) - 2)),
                         _aws_text(c)])
            continue
        imp = c.improvement()
        est = "n/a"
        if c.estimate:
            e = c.estimate.get("improvement_pct", {})
            est = " / ".join(_pct(float(e[k])) if k in e else "n/a" for k in ("tpot", "e2e_p50", "output_throughput"))
        rows.append([str(c.concurrency), *(_pct(imp[k]) for k in METRICS), _pct(imp["output_throughput_per_gpu"]),
                     est, _aws_text(c)])
    return rows


COST_HEADER = ["concurrency", "mode", "GPU-hours split", "idle GPU-hours (at least)", "per 1M input tokens",
               "per 1M output tokens", "all GPU-hours per 1M output tokens (the verdict's measure)"]


def cost_rows(report: Report, scenario: str) -> list[list[str]]:
    """Per run: GPU-hours (and USD with a price) per 1M input and per 1M output tokens, and the idle share."""
    rows = []
    for c in report.cells_of(scenario):
        for m in (c.colocated, c.dpd):
            cost = report.costs.get(m.source)
            every_gpu = gpu_hours_text(m.gpu_hours_per_million_output_tokens(), report.price)
            if cost is None:
                rows.append([str(m.concurrency), m.mode, "-", "-", "-", "-", every_gpu])
                continue
            idle = "n/a" if cost.idle_share is None else f"{cost.idle_share:.0%}"
            rows.append([str(m.concurrency), m.mode, cost.basis, idle,
                         gpu_hours_text(cost.input_gpu_hours, report.price),
                         gpu_hours_text(cost.output_gpu_hours, report.price), every_gpu])
    return rows


def _aws_text(c: Cell) -> str:
    ref = AWS_H100_REFERENCE
    if not _is_aws_reference(c):
        return "-"
    parts = []
    if c.concurrency in ref["points"]["tpot"]:
        parts.append(f"TPOT +{ref['points']['tpot'][c.concurrency]:.0f}%")
    lo, hi = ref["ranges"]["e2e_p50"]
    parts.append(f"E2E P50 +{lo:.0f}..{hi:.0f}%")
    parts.append(f"throughput up to +{ref['up_to']['output_throughput']:.0f}%")
    return ", ".join(parts)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --- documents ------------------------------------------------------------------------------------------


def _verdict_text(v: Verdict) -> str:
    word = {True: "split (use DPD)", False: "do not split (stay colocated)", None: "no verdict"}[v.split]
    return f"**{v.scenario}: {word}** - {v.reason}"


def _intro(report: Report) -> list[str]:
    spec = report.spec
    e, slo = spec.endpoint, spec.slo
    source = "`observability.slo`" + (f" with `{spec.field('slo')}`" if e.slo is not None else "")
    price = (f"Price: {report.price.text()}." if report.price is not None
             else f"Price: {no_price_line(e.instance_type)}.")
    return [
        f"Endpoint `{e.namespace}/{e.name}` ({e.instance_type}); routing threshold {e.routing_threshold_tokens} "
        f"tokens; DPD routing strategy `{e.routing_strategy}`, colocated `roundrobin` (spreads over its replicas).",
        f"SLO ({source}): TTFT p95 <= {slo.ttft_p95_seconds:g} s, TPOT p95 <= "
        f"{slo.tpot_p95_seconds * 1000:g} ms, errors <= {slo.error_ratio:.0%}.",
        "Statistics are genai-bench's over each run's requests after its warm-up share (column n counts them); "
        "every column says which statistic it shows. A run is checked against the SLO, and a cell takes part in a "
        f"verdict, only with n >= {MIN_REQUESTS} (of {MIN_REQUESTS} sorted latencies, the 90th and the 99th "
        "bound the p95 with 95 % confidence; docs/benchmark.md).",
        "TTFT is the benchmark client's, end to end: from sending the request to the first streamed token, through "
        "the Service or load balancer, the router, the sidecars and every hop. The dashboards' 'Time to first "
        "token as users see it' adds only vLLM's in-engine intervals (each from the engine's own arrival_time: "
        "vLLM docs/design/metrics.md, 'Frontend Stats Collection') and is a lower bound of it.",
        "Improvement: latency (colocated - DPD) / colocated, throughput (DPD - colocated) / colocated; "
        "positive = DPD better.",
        f"{price} Cost per token: a run's GPU-hours (its GPUs x its duration) per 1M tokens; on DPD the prefill "
        "pods' go to input tokens and the decode pods' to output tokens; "
        f"{report.cost_note or 'colocated: not split'}. "
        "Idle: at least this share of the GPU-hours went to pods with no request running (docs/benchmark.md, "
        "'Cost per token').",
        "A DPD run counts only when the prefill pods' request counters show its requests took the path its "
        "scenario declares (column 'DPD path'; 'folder-level' when one count covers several rows), and a run of "
        "either mode only when the GPUs ready before and after it are the GPUs it records (serving.json); an "
        "invalid run is shown and never compared.",
        f"Results: {report.source}. {report.planner_note}.",
        "Live view during a run: the `dpd-vs-colocated` Grafana dashboard (docs/observability.md).",
    ]


def _experiment_notes(report: Report, experiment: str) -> list[str]:
    if experiment == "equal-gpu":
        return ["The configured DPD endpoint against colocated replicas on as many GPUs: the fair comparison, and "
                "the only one the verdicts use."]
    ref = AWS_H100_REFERENCE
    notes = [f"Reproduces AWS's published run ({ref['setup']}; {ref['source']}): compare with AWS's statements "
             "only here, never with the equal-GPU experiment (AWS's colocated side held half the GPUs). No verdict "
             "comes from it."]
    deviations = reference_deviations(report.spec, report.experiment_cells(experiment))
    notes.append("Deviations from AWS's setup: " + ("; ".join(deviations) if deviations else "none") + ".")
    return notes


def _invalid(report: Report) -> list[str]:
    return [f"{c.experiment} {c.scenario} at concurrency {c.concurrency}: {c.invalid}" for c in report.cells
            if c.invalid]


def markdown(report: Report, charts: dict[str, dict[str, str]]) -> str:
    out = ["# DPD vs colocated: benchmark report", "", *[f"- {x}" for x in _intro(report)]]
    if bad := _invalid(report):
        out += ["", "## Invalid runs", "", *[f"- {x}" for x in bad]]
    for experiment in report.experiments():
        out += ["", f"## {experiment_title(report, experiment)}", "",
                *[f"- {x}" for x in _experiment_notes(report, experiment)]]
        if experiment == "equal-gpu":
            out += ["", "### Verdicts", "", *[f"- {_verdict_text(v)}" for v in report.verdicts]]
        for s in report.scenarios(experiment):
            traffic = report.cells_of(s)[0].traffic
            out += ["", f"### {s} `{traffic}`", "", f"![improvement]({charts[s]['improvement']})", "",
                    f"![latency vs throughput]({charts[s]['curves']})", "", "#### DPD improvement over colocated", "",
                    _md_table(improvement_header(experiment), improvement_rows(report, s)), "", "#### Measurements",
                    "",
                    _md_table(MEASUREMENT_HEADER, measurement_rows(report, s)), "", "#### Cost per token", "",
                    _md_table(COST_HEADER, cost_rows(report, s))]
    return "\n".join(out) + "\n"


def html_page(report: Report, charts: dict[str, dict[str, str]], folder: Path) -> str:
    def img(rel: str) -> str:
        data = base64.b64encode((folder / rel).read_bytes()).decode()
        return f'<img alt="{html.escape(rel)}" src="data:image/png;base64,{data}">'

    def items(lines: list[str]) -> str:
        return "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"

    css = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;"
           "font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
           "th{background:#f3f3f3}img{max-width:100%}")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>DPD vs colocated</title>"
             f"<style>{css}</style></head><body><h1>DPD vs colocated: benchmark report</h1>", items(_intro(report))]
    if bad := _invalid(report):
        parts += ["<h2>Invalid runs</h2>", items(bad)]
    for experiment in report.experiments():
        parts += [f"<h2>{html.escape(experiment_title(report, experiment))}</h2>",
                  items(_experiment_notes(report, experiment))]
        if experiment == "equal-gpu":
            parts.append("<h3>Verdicts</h3><ul>")
            for v in report.verdicts:
                word = {True: "split (use DPD)", False: "do not split (stay colocated)", None: "no verdict"}[v.split]
                parts.append(f"<li><b>{html.escape(v.scenario)}: {word}</b> - {html.escape(v.reason)}</li>")
            parts.append("</ul>")
        for s in report.scenarios(experiment):
            parts += [f"<h3>{html.escape(s)} <code>{html.escape(report.cells_of(s)[0].traffic)}</code></h3>",
                      img(charts[s]["improvement"]), img(charts[s]["curves"]),
                      "<h4>DPD improvement over colocated</h4>",
                      _html_table(improvement_header(experiment), improvement_rows(report, s)),
                      "<h4>Measurements</h4>",
                      _html_table(MEASUREMENT_HEADER, measurement_rows(report, s)),
                      "<h4>Cost per token</h4>",
                      _html_table(COST_HEADER, cost_rows(report, s))]
    parts.append("</body></html>")
    return "\n".join(parts)


def summary(report: Report) -> dict[str, Any]:
    def cost(x: Measurement) -> dict[str, Any] | None:
        c = report.costs.get(x.source)
        if c is None:
            return None
        usd = report.price.usd_per_gpu_hour if report.price is not None else None
        return {"basis": c.basis, "input_share": c.input_share, "idle_share_at_least": c.idle_share,
                "gpu_hours_per_million_input_tokens": c.input_gpu_hours,
                "gpu_hours_per_million_output_tokens": c.output_gpu_hours,
                "usd_per_million_input_tokens": None if usd is None or c.input_gpu_hours is None
                else c.input_gpu_hours * usd,
                "usd_per_million_output_tokens": None if usd is None or c.output_gpu_hours is None
                else c.output_gpu_hours * usd}

    def m(x: Measurement) -> dict[str, Any]:
        return {"gpus": x.gpus, "n": x.n, "slo_judged": judged(x), "ttft_ms": x.ttft_ms, "tpot_ms": x.tpot_ms,
                "e2e_ms": x.e2e_ms, "output_tokens_per_s": x.output_tokens_per_s,
                "input_tokens_per_s": x.input_tokens_per_s, "tokens_per_s_per_gpu": x.tokens_per_s_per_gpu,
                "error_rate": x.error_rate, "gpu_hours_per_million_output_tokens":
                    x.gpu_hours_per_million_output_tokens(), "cost_per_token": cost(x), "dpd_path": x.dpd_path,
                "source": x.source}

    experiments: dict[str, Any] = {}
    for experiment in report.experiments():
        cells = report.experiment_cells(experiment)
        entry: dict[str, Any] = {
            "title": experiment_title(report, experiment),
            "cells": [{"scenario": c.scenario, "traffic": c.traffic, "concurrency": c.concurrency,
                       "colocated": m(c.colocated), "dpd": m(c.dpd), "invalid": c.invalid,
                       "improvement_pct": None if c.invalid else c.improvement(), "planner_estimate": c.estimate}
                      for c in cells]}
        if experiment == "equal-gpu":
            entry["verdicts"] = [{"scenario": v.scenario, "split": v.split, "reason": v.reason}
                                 for v in report.verdicts]
        else:
            entry["aws_published"] = {k: (v if k != "points" else {m_: {str(c): p for c, p in d.items()}
                                                                   for m_, d in v.items()})
                                      for k, v in AWS_H100_REFERENCE.items()}
            entry["deviations"] = reference_deviations(report.spec, cells)
        experiments[experiment] = entry
    price = None if report.price is None else {
        "instance_type": report.price.instance_type, "usd_per_instance_hour": report.price.usd_per_instance_hour,
        "usd_per_gpu_hour": report.price.usd_per_gpu_hour, "source": report.price.source}
    return {"experiments": experiments, "invalid_runs": _invalid(report), "planner": report.planner_note,
            "min_requests": MIN_REQUESTS, "price": price, "cost_split": report.cost_note}


def write_report(report: Report, out: Path) -> list[Path]:
    """Write ``report.md``, ``report.html``, ``summary.json`` and ``charts/*.png`` to ``out`` (atomically)."""
    out = out.resolve()
    with staged_dir(out) as tmp:
        (tmp / "charts").mkdir()
        charts: dict[str, dict[str, str]] = {}
        for s in report.scenarios():
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")
            charts[s] = {"improvement": f"charts/improvement-{slug}.png",
                         "curves": f"charts/latency-throughput-{slug}.png"}
            chart_improvement(report, s, tmp / charts[s]["improvement"])
            chart_curves(report, s, tmp / charts[s]["curves"])
        (tmp / "report.md").write_text(markdown(report, charts), encoding="utf-8")
        (tmp / "report.html").write_text(html_page(report, charts, tmp), encoding="utf-8")
        (tmp / "summary.json").write_text(json.dumps(summary(report), indent=2, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
    return sorted(p for p in out.rglob("*") if p.is_file())
