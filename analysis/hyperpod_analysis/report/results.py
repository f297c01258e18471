"""genai-bench result files -> :class:`Measurement` per (mode, scenario, concurrency).

The files are genai-bench's own (``genai_bench/cli/cli.py`` ``benchmark``: ``experiment_metadata.json`` per
experiment folder and one ``<scenario>_<task>_num_concurrency_<N>_time_<T>s.json`` per run, written by
``AggregatedMetricsCollector.save``: ``{"aggregated_metrics": {..., "stats": {<metric>: {mean, p50, p90, p95,
p99, ...}}}, "individual_request_metrics": [...], "_time_unit": "s"|"ms"}``), plus our ``bench-run.json``
(what the run ran under, its experiment included; written by the Job's runner), ``serving.json`` (the endpoint's
Deployments before and after the run, the GPUs their ready pods held against the GPUs the run records, and why the run
is invalid when they differ; written by ``bench``) and, for DPD runs, ``dpd-path.json`` (the prefill pods' finished
requests during the run, or the router's decisions; written by ``bench``).

Layout read: any folder tree; every folder holding ``experiment_metadata.json`` is one experiment. Its mode
comes from ``bench-run.json``, else from the nearest ancestor folder named ``dpd`` or ``colocated``.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_core.errors import UsageError
from hyperpod_runtime.bench_runner import FILE_MARKER  # the pod-log format the Jobs write

MODES = ("dpd", "colocated")
EXPERIMENTS = ("aws-reference", "equal-gpu")
METADATA = "experiment_metadata.json"
RUN_RECORD = "bench-run.json"
DPD_PATH = "dpd-path.json"
SERVING = "serving.json"
RUN_FILE = re.compile(r"^.+_num_concurrency_(\d+)_time_\d+s\.json$")


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One run: latencies in milliseconds, throughput in output tokens per second (the whole endpoint)."""

    mode: str
    scenario: str
    traffic: str
    concurrency: int
    gpus: int
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tokens_per_s: float
    requests_per_s: float
    error_rate: float
    completed: int
    """Requests that completed (genai-bench ``num_completed_requests``, warm-up included)."""
    n: int
    """Requests the latency statistics cover: the completed ones after genai-bench left out the warm-up and
    cool-down share (its ``sum / mean`` of ``e2e_latency``, both over exactly those requests)."""
    input_tokens_mean: float
    output_tokens_mean: float
    input_tokens_per_s: float
    """Input tokens of those requests per second of the run (genai-bench ``mean_input_throughput_tokens_per_s``,
    counted like its output throughput)."""
    source: str
    record: dict[str, Any] = field(default_factory=dict)
    experiment: str = "equal-gpu"
    """``aws-reference`` or ``equal-gpu`` (``bench-run.json``; older results without it: ``equal-gpu``)."""
    dpd_path: dict[str, Any] | None = None
    """``dpd-path.json`` of the run's folder: how many requests the prefill pods finished. Default: none read."""
    serving: dict[str, Any] | None = None
    """``serving.json`` of the run's folder: the GPUs ready before and after the run. Default: none read."""

    @property
    def cell(self) -> tuple[str, int]:
        return (self.scenario, self.concurrency)

    @property
    def folder(self) -> str:
        """The experiment folder (one Job) the run file came from."""
        return str(Path(self.source).parent)

    @property
    def run_seconds(self) -> float:
        """The run's duration (genai-bench: completed requests / requests per second)."""
        return self.completed / self.requests_per_s if self.requests_per_s > 0 else 0.0

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    def gpu_hours_per_million_output_tokens(self) -> float:
        return self.gpus * 1e6 / (self.output_tokens_per_s * 3600) if self.output_tokens_per_s > 0 else float("inf")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"results file {path} is not readable JSON ({type(exc).__name__})") from None


def _stat_ms(stats: dict[str, Any], name: str, scale: float, path: Path) -> dict[str, float]:
    s = stats.get(name) or {}
    out = {k: float(s[k]) * scale for k in ("mean", "p50", "p90", "p95", "p99") if s.get(k) is not None}
    if "mean" not in out:
        raise UsageError(f"results file {path} has no {name} statistics (a run where no request completed?)")
    return out


def _sample_size(stats: dict[str, Any], completed: int) -> int:
    """How many requests genai-bench's statistics are over: it computes ``sum`` and ``mean`` of every metric over
    the same requests (``aggregated_metrics_collector.py`` ``aggregate_metrics_data``: the completed requests
    between the warm-up and the cool-down share), so ``sum / mean`` counts them; ``completed`` when either is
    missing."""
    e2e = stats.get("e2e_latency") or {}
    if e2e.get("sum") is None or not e2e.get("mean"):
        return completed
    return round(float(e2e["sum"]) / float(e2e["mean"]))


def _mode_of(folder: Path, record: dict[str, Any]) -> str:
    if record.get("mode") in MODES:
        return str(record["mode"])
    for parent in (folder, *folder.parents):
        if parent.name in MODES:
            return parent.name
    raise UsageError(f"results folder {folder} says neither dpd nor colocated (no bench-run.json, no dpd/ or "
                     f"colocated/ parent folder)")


def _load_run(path: Path, mode: str, metadata: dict[str, Any], record: dict[str, Any],
              names: dict[str, str], dpd_path: dict[str, Any] | None,
              serving: dict[str, Any] | None = None) -> Measurement:
    data = _read_json(path)
    agg = data.get("aggregated_metrics") if isinstance(data, dict) else None
    if not isinstance(agg, dict) or not isinstance(agg.get("stats"), dict):
        raise UsageError(f"results file {path} is not a genai-bench run file (no aggregated_metrics.stats)")
    scale = {"s": 1000.0, "ms": 1.0}.get(data.get("_time_unit", "s"))
    if scale is None:
        raise UsageError(f"results file {path} has _time_unit {data.get('_time_unit')!r}; allowed: s, ms")
    stats = agg["stats"]
    traffic = str(agg.get("scenario") or "")
    gpus = record.get("gpus") or metadata.get("server_gpu_count")
    if not gpus:
        raise UsageError(f"results {path.parent}: GPU count unknown (bench-run.json gpus or genai-bench "
                         f"--server-gpu-count)")
    scenario = str((record.get("scenarios") or {}).get(traffic) or names.get(traffic.replace(" ", ""), traffic))
    completed = int(agg.get("num_completed_requests") or 0)
    return Measurement(
        mode=mode, scenario=scenario, traffic=traffic, concurrency=int(agg["num_concurrency"]), gpus=int(gpus),
        ttft_ms=_stat_ms(stats, "ttft", scale, path), tpot_ms=_stat_ms(stats, "tpot", scale, path),
        e2e_ms=_stat_ms(stats, "e2e_latency", scale, path),
        output_tokens_per_s=float(agg.get("mean_output_throughput_tokens_per_s") or 0.0),
        requests_per_s=float(agg.get("requests_per_second") or 0.0),
        error_rate=float(agg.get("error_rate") or 0.0), completed=completed, n=_sample_size(stats, completed),
        input_tokens_mean=float((stats.get("num_input_tokens") or {}).get("mean") or 0.0),
        output_tokens_mean=float((stats.get("num_output_tokens") or {}).get("mean") or 0.0),
        input_tokens_per_s=float(agg.get("mean_input_throughput_tokens_per_s") or 0.0),
        source=str(path), record=record, experiment=_experiment_of(record, path), dpd_path=dpd_path,
        serving=serving)


def _experiment_of(record: dict[str, Any], path: Path) -> str:
    value = record.get("experiment", "equal-gpu")
    if value not in EXPERIMENTS:
        raise UsageError(f"results {path.parent}: {RUN_RECORD} experiment {value!r}; allowed: "
                         f"{', '.join(EXPERIMENTS)}")
    return str(value)


def load_results(root: Path, names: dict[str, str] | None = None) -> list[Measurement]:
    """Every run under ``root``. ``names`` maps traffic strings to scenario names (from the config).

    Raises :class:`UsageError` (exit 2) for a missing folder, a folder with no experiment, an experiment
    without any run file (partial), unreadable files, or the same cell measured twice.
    """
    if not root.is_dir():
        raise UsageError(f"--results {root} is not a folder (local path or s3://bucket/prefix)")
    experiments = sorted(p.parent for p in root.rglob(METADATA))
    if not experiments:
        raise UsageError(f"--results {root} holds no genai-bench experiment ({METADATA} not found)")
    names = names or {}
    seen: dict[tuple[str, str, str, int], str] = {}
    out: list[Measurement] = []
    for folder in experiments:
        metadata = _read_json(folder / METADATA)
        record = _read_json(folder / RUN_RECORD) if (folder / RUN_RECORD).is_file() else {}
        dpd_path = _read_json(folder / DPD_PATH) if (folder / DPD_PATH).is_file() else None
        serving = _read_json(folder / SERVING) if (folder / SERVING).is_file() else None
        mode = _mode_of(folder, record)
        runs = sorted(p for p in folder.iterdir() if RUN_FILE.match(p.name))
        if not runs:
            raise UsageError(f"results folder {folder} is partial: {METADATA} but no run file (did the run fail? "
                             f"see its debug_*.json or the Job's log)")
        for path in runs:
            m = _load_run(path, mode, metadata, record, names, dpd_path, serving)
            key = (m.experiment, m.mode, m.scenario, m.concurrency)
            if key in seen:
                raise UsageError(f"results: {m.mode} {m.scenario} at concurrency {m.concurrency} measured twice "
                                 f"({seen[key]} and {path}); keep one")
            seen[key] = str(path)
            out.append(m)
    return out


def check_matrix(measurements: list[Measurement], experiment: str | None = None) -> list[tuple[str, int]]:
    """The cells both modes measured (in ``experiment``, default: all), in order; a cell only one mode has is an
    error (mismatched matrices)."""
    chosen = [m for m in measurements if experiment is None or m.experiment == experiment]
    cells = {mode: {m.cell for m in chosen if m.mode == mode} for mode in MODES}
    where = f" in the {experiment} experiment" if experiment else ""
    for mode in MODES:
        if not cells[mode]:
            raise UsageError(f"results hold no {mode} run{where}; the report compares dpd with colocated")
    for mode, other in (("dpd", "colocated"), ("colocated", "dpd")):
        extra = sorted(cells[mode] - cells[other])
        if extra:
            s, c = extra[0]
            raise UsageError(f"results: {mode} and {other} ran different matrices{where}: only {mode} has {s} at "
                             f"concurrency {c} ({len(extra)} cell(s) unmatched)")
    return sorted(cells["dpd"])


def experiments_of(measurements: list[Measurement]) -> list[str]:
    """The experiments present, in report order (the decision basis first)."""
    present = {m.experiment for m in measurements}
    return [x for x in ("equal-gpu", "aws-reference") if x in present]


def decode_log(text: str, dest: Path) -> list[Path]:
    """Write the files a runner printed to its pod log (``HYPERPOD-BENCH-FILE <name> <base64 gzip>``)."""
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for line in text.splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3 and parts[0] == FILE_MARKER:
            name = Path(parts[1]).name
            (dest / name).write_bytes(gzip.decompress(base64.b64decode(parts[2])))
            written.append(dest / name)
    return written
