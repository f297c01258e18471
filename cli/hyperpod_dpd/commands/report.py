"""``hyperpod-dpd report``: genai-bench results of both modes -> a decision report (HTML, Markdown, PNG charts).

The results are of one endpoint (``--endpoint``, else the config's only one): ``bench`` collects them into
``<workdir>/benchmark-results/<endpoint>/``, and the report judges them by that endpoint's settings (its instance
type, scenarios, SLO)."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from hyperpod_analysis.report.analysis import (
    build_cells,
    dpd_path_problems,
    planner_estimates,
    serving_problems,
    token_costs,
    verdict,
)
from hyperpod_analysis.report.render import Report, experiment_title, write_report
from hyperpod_analysis.report.results import Measurement, check_matrix, experiments_of, load_results
from hyperpod_core import environment, paths
from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import UsageError
from hyperpod_core.prices import InstancePrice, instance_price, no_price_line
from hyperpod_dpd.benchmark.download import download_s3
from hyperpod_dpd.commands.options import (
    ConfigOption,
    EndpointOption,
    EnvOption,
    JsonOption,
    OutputOption,
    ProfileOption,
    RegionOption,
)
from hyperpod_dpd.deployment import endpoint_of, endpoint_selector, report_dir, results_dir
from hyperpod_dpd.render import console as render_console
from hyperpod_dpd.render import emit, output_format

ResultsOption = Annotated[str | None, typer.Option(
    "--results", metavar="PATH", help="Folder or s3://bucket/prefix holding both modes' genai-bench results "
                      "(default: the folder 'bench' collects the endpoint's into).", show_default=False)]
OutOption = Annotated[Path | None, typer.Option(
    "--out", metavar="PATH", help="Report folder (default: <workdir>/benchmark-report/<endpoint>).",
    show_default=False)]
PriceOption = Annotated[float | None, typer.Option(
    "--price", metavar="USD", help="USD per instance-hour of the endpoint's instance_type, for the cost columns "
                      "(default: benchmark.instance_hour_usd, else the pinned price table).", show_default=False)]


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def _check_out(target: Path, source: str) -> None:
    """The report replaces ``target`` whole (:func:`hyperpod_analysis.report.render.write_report`, atomically): refuse
    a folder that holds the results, and one that holds anything but a previous report (``report.md``)."""
    where = target.resolve()
    if not source.startswith("s3://") and (where == Path(source).resolve() or where in Path(source).resolve().parents):
        raise UsageError(f"--out {target} holds the results (--results {source}) and the report replaces it whole: "
                         "name another folder")
    if where.is_file() or (where.is_dir() and any(where.iterdir()) and not (where / "report.md").is_file()):
        raise UsageError(f"--out {target} is not a report folder (no report.md) and the report replaces it whole: "
                         "name a new or empty folder, or a previous report's")


def _matplotlib_folder() -> None:
    """Where matplotlib keeps its font list (``fontlist-v<format>.json``, ~40 KB, built in ~1 s on the first chart
    and again when its format changes) and its settings: in a checkout, its ``.cache/matplotlib/`` (git-ignored,
    beside the cfn-lint cache), unless ``MPLCONFIGDIR`` names a folder; from an installed wheel, matplotlib's own
    ``~/.cache/matplotlib/`` and ``~/.config/matplotlib/`` (README, the caches). Set before matplotlib is imported
    (it reads the variable once)."""
    if "MPLCONFIGDIR" not in os.environ and paths.CHECKOUT is not None:
        os.environ["MPLCONFIGDIR"] = str(paths.CHECKOUT / ".cache" / "matplotlib")


def report(results: ResultsOption = None, out: OutOption = None, config: ConfigOption = None,
           env: EnvOption = None, endpoint: EndpointOption = None, output: OutputOption = None,
           as_json: JsonOption = False, region: RegionOption = None, profile: ProfileOption = None,
           price: PriceOption = None) -> None:
    """Compare colocated and DPD from genai-bench result files and write the decision report.

    Each experiment is reported on its own (equal-gpu: the verdicts; aws-reference: beside AWS's published
    numbers). DPD runs whose requests did not take the DPD path, and runs on other GPUs than they record, are marked
    invalid and left out of the verdicts, as are runs of fewer than 100 requests. Cost per 1M input and output tokens
    at --price, else benchmark.instance_hour_usd, else the pinned price table."""
    fmt = output_format(output, as_json)
    if price is not None and not (price > 0 and math.isfinite(price)):
        raise UsageError(f"--price must be a positive USD amount per instance-hour, got {price!r}")
    e = environment.resolve(config, env)
    spec = endpoint_of(e, endpoint, "report")
    cost = instance_price(spec.endpoint.instance_type, given=price, configured=spec.benchmark.instance_hour_usd)
    source = results or str(results_dir(e, spec))
    if results is None and not Path(source).is_dir():  # the user named no folder: say what makes one
        raise UsageError(f"no results yet: {source}/ does not exist; run: hyperpod-dpd bench "
                         f"{endpoint_selector(e, spec)} (or "
                         "pass --results DIR|s3://bucket/prefix; the shipped sample: --results "
                         "docs/sample-benchmark-report/raw)")
    target = out or report_dir(e, spec)
    _check_out(target, source)
    names = {s.traffic.replace(" ", ""): s.name for s in spec.benchmark_scenarios()}
    scenario_paths = {s.name: s.path for s in spec.benchmark_scenarios()}
    _matplotlib_folder()
    with tempfile.TemporaryDirectory(prefix="hyperpod-report-") as tmp:
        root = download_s3(source, Path(tmp), region or spec.region) if source.startswith("s3://") else Path(source)
        report_data = _analyse(spec, load_results(root, names), scenario_paths, source, cost)
        files = write_report(report_data, target)
    if fmt.data:
        emit({"endpoint": spec.name, "source": source, "report": str(target), "files": [str(f) for f in files],
              "experiments": {x: experiment_title(report_data, x) for x in report_data.experiments()},
              "invalid": [{"experiment": x.experiment, "scenario": x.scenario, "concurrency": x.concurrency,
                           "why": x.invalid} for x in report_data.cells if x.invalid],
              "verdicts": [{"scenario": v.scenario, "split": v.split, "reason": v.reason}
                           for v in report_data.verdicts],
              "price": None if cost is None else {"usd_per_instance_hour": cost.usd_per_instance_hour,
                                                  "source": cost.source}}, fmt)
        return
    _print_summary(report_data, files, target)


def _analyse(spec: EndpointSpec, measurements: list[Measurement], paths: Mapping[str, str], source: str,
             cost: InstancePrice | None) -> Report:
    """Each experiment's cells (runs marked invalid when their requests took another path than their scenario
    declares, or ran on other GPUs than they record) beside the planner's estimates, and the equal-gpu verdicts."""
    costs, cost_note = token_costs(measurements, spec)
    problems = dpd_path_problems(measurements, paths)
    for folder, why in serving_problems(measurements).items():
        problems[folder] = f"{problems[folder]}; {why}" if folder in problems else why
    built, note = [], "no experiment: no planner estimates"
    verdicts = []
    for experiment in experiments_of(measurements):
        cells = check_matrix(measurements, experiment)
        traffic_of = {m.scenario: m.traffic for m in measurements}
        levels = sorted({n for _, n in cells})
        estimates, note = planner_estimates(spec, list(dict.fromkeys(traffic_of[s] for s, _ in cells)), levels,
                                            experiment=experiment)  # the layouts this experiment measures
        these = build_cells(measurements, cells, estimates, experiment=experiment, invalid=problems)
        if experiment == "equal-gpu":
            scenarios = list(dict.fromkeys(s for s, _ in cells))
            verdicts = [verdict(s, [x for x in these if x.scenario == s], spec, cost) for s in scenarios]
        built += these
    return Report(spec=spec, cells=built, verdicts=verdicts, planner_note=note, source=source, price=cost,
                  costs=costs, cost_note=cost_note)


def _print_summary(report_data: Report, files: list[Path], target: Path) -> None:
    console = render_console(soft_wrap=True)  # one line per finding, whatever the terminal width
    if report_data.price is None:
        console.print(no_price_line(report_data.spec.endpoint.instance_type), highlight=False)
    for experiment in report_data.experiments():
        console.print(experiment_title(report_data, experiment), highlight=False)
    for cell in report_data.cells:
        if cell.invalid:
            console.print(f"  invalid: {cell.experiment} {cell.scenario} c{cell.concurrency}: {cell.invalid}",
                          highlight=False)
    if not report_data.verdicts:
        console.print("no verdict: the equal-gpu experiment (the decision basis) was not run", highlight=False)
    for v in report_data.verdicts:
        word = {True: "split", False: "stay colocated", None: "no verdict"}[v.split]
        console.print(f"{v.scenario}: [bold]{word}[/bold] - {v.reason}", highlight=False)
    console.print(f"wrote {len(files)} files to {target}/ (report.html, report.md, charts/)", highlight=False)
