"""Leave-one-out validation of the planner's six efficiencies against published data (``plan --calibration``).

Two kinds of published data, each fitting only the efficiencies it can see:

* **Kernel level**: AIConfigurator 0.12.0's per-GPU silicon data (vLLM 0.24 backend, ``cli_estimate`` static
  context / generation steps) for H100, H200, B200 and B300, Llama-3.1-70B at TP 8 and 4 and Llama-3.1-8B at TP 1.
  They fit ``tensor_core``, ``hbm``, ``nvlink`` and ``layer_seconds``. Left out by GPU: each GPU's points are
  predicted from a fit on the other three GPUs' points (the hardware "it was not fitted on").
* **System level**: the public P/D measurements of ``dpd-anchors.md`` section 4 that specify their setup well enough
  to simulate (:data:`PD_POINTS`). They fit ``host_call_seconds`` and ``handoff_seconds``. Left out by point: each
  is predicted from a fit on the others. The fit searches a grid (:data:`HOST_CALL_GRID` x :data:`HANDOFF_GRID`)
  whose every node is simulated once; a fold minimizes its squared errors over the bilinear interpolation of
  those runs, so all folds cost one grid.

Errors are percentage points for published percentages and percent of the published value for absolute times.
The published points left out, and why, are in :data:`NOT_USED`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hyperpod_analysis.plan import planner
from hyperpod_analysis.plan.engine import EFFICIENCIES, Efficiencies, RooflineEngine
from hyperpod_analysis.plan.facts import MODELS, instance_facts, resolve_model
from hyperpod_analysis.plan.traffic import parse
from hyperpod_core.instances import GPUS

TOLERANCE_POINTS = 10.0

#: The planner's bands (:data:`hyperpod_analysis.plan.planner.BANDS`), which :func:`validate` recomputes (the test
#: compares the two).
BANDS = planner.BANDS

_GPU = {g.short_name: g for g in GPUS.values()}
_MODEL = {"70B": MODELS["meta-llama/Llama-3.1-70B-Instruct"], "8B": MODELS["meta-llama/Llama-3.1-8B-Instruct"]}

#: AIConfigurator 0.12.0 (``aiconfigurator.cli.api.cli_estimate``, backend vllm, its bundled silicon data):
#: (GPU, model, TP, phase, {prompt tokens: prefill ms} or {batch: decode TPOT ms at 4096 in / 256 out}).
#: Llama-3.1-70B and -8B, whose shapes equal Llama-3.3-70B's and our 8B's. Recorded 2026-12 with
#: ``cli_estimate(model, "<gpu>_sxm", mode="static_ctx", isl=n, osl=2, batch_size=1, tp_size=tp)`` and
#: ``mode="static_gen", isl=4096, osl=256, batch_size=b``.
AIC_DATA: tuple[tuple[str, str, int, str, dict[int, float]], ...] = (
    ("H100", "70B", 8, "prefill", {1024: 46.24, 4096: 169.60, 8192: 344.26}),
    ("H100", "70B", 8, "decode", {1: 10.34, 8: 10.38, 32: 12.72}),
    ("H100", "70B", 4, "prefill", {1024: 67.38, 4096: 264.07, 8192: 576.76}),
    ("H100", "70B", 4, "decode", {1: 15.08, 8: 16.42, 32: 20.30}),
    ("H100", "8B", 1, "prefill", {1024: 22.11, 4096: 90.07, 8192: 199.72}),
    ("H100", "8B", 1, "decode", {1: 6.29, 8: 7.90, 32: 12.50}),
    ("H200", "70B", 8, "prefill", {1024: 44.51, 4096: 164.92, 8192: 334.12}),
    ("H200", "70B", 8, "decode", {1: 8.09, 8: 8.73, 32: 10.53}),
    ("H200", "70B", 4, "prefill", {1024: 65.72, 4096: 266.62, 8192: 542.55}),
    ("H200", "70B", 4, "decode", {1: 12.43, 8: 13.17, 32: 15.80}),
    ("H200", "8B", 1, "prefill", {1024: 21.18, 4096: 92.83, 8192: 198.87}),
    ("H200", "8B", 1, "decode", {1: 4.96, 8: 6.10, 32: 9.28}),
    ("B200", "70B", 8, "prefill", {1024: 28.66, 4096: 96.41, 8192: 193.04}),
    ("B200", "70B", 8, "decode", {1: 6.80, 8: 6.95, 32: 10.42}),
    ("B200", "70B", 4, "prefill", {1024: 39.30, 4096: 137.16, 8192: 285.31}),
    ("B200", "70B", 4, "decode", {1: 9.25, 8: 9.30, 32: 12.54}),
    ("B200", "8B", 1, "prefill", {1024: 11.65, 4096: 45.98, 8192: 97.55}),
    ("B200", "8B", 1, "decode", {1: 3.50, 8: 4.01, 32: 5.99}),
    ("B300", "70B", 8, "prefill", {1024: 27.41, 4096: 88.54, 8192: 173.52}),
    ("B300", "70B", 8, "decode", {1: 6.67, 8: 6.94, 32: 10.19}),
    ("B300", "70B", 4, "prefill", {1024: 37.05, 4096: 128.52, 8192: 283.50}),
    ("B300", "70B", 4, "decode", {1: 9.09, 8: 9.28, 32: 12.56}),
    ("B300", "8B", 1, "prefill", {1024: 10.78, 4096: 43.51, 8192: 88.88}),
    ("B300", "8B", 1, "decode", {1: 3.47, 8: 4.03, 32: 5.99}),
)


@dataclass(frozen=True, kw_only=True)
class KernelPoint:
    gpu: str
    model: str
    tp: int
    phase: str
    n: int
    published_ms: float

    @property
    def label(self) -> str:
        what = f"prefill {self.n} tokens" if self.phase == "prefill" else f"decode batch {self.n}"
        return f"{self.gpu} {self.model} TP{self.tp} {what}"

    def predict_ms(self, k: Efficiencies) -> float:
        engine = RooflineEngine(_MODEL[self.model], _GPU[self.gpu], self.tp, k)
        if self.phase == "prefill":
            s = engine.step_seconds(decode_tokens=0, decode_context=0, prefill_tokens=self.n,
                                    prefill_attention=self.n * self.n / 2, eager=False)
        else:  # the mean step of 256 output tokens after a 4096-token prompt
            s = engine.step_seconds(decode_tokens=self.n, decode_context=self.n * (4096 + 128), prefill_tokens=0,
                                    prefill_attention=0.0, eager=False)
        return 1e3 * s


KERNEL_POINTS: tuple[KernelPoint, ...] = tuple(
    KernelPoint(gpu=g, model=m, tp=tp, phase=phase, n=n, published_ms=ms)
    for g, m, tp, phase, table in AIC_DATA for n, ms in table.items())

_KERNEL_FIELDS = ("tensor_core", "hbm", "nvlink", "layer_seconds")
_KERNEL_SCALE = (1.0, 1.0, 1.0, 1e-6)  # layer_seconds is searched in microseconds


def _kernel_loss(k: Efficiencies, points: Sequence[KernelPoint]) -> float:
    return sum(math.log(p.predict_ms(k) / p.published_ms) ** 2 for p in points)


def fit_kernel(points: Sequence[KernelPoint], start: Efficiencies = EFFICIENCIES) -> Efficiencies:
    """The four kernel-level efficiencies that minimize the squared log error over ``points`` (Nelder-Mead)."""

    def with_x(x: Sequence[float]) -> Efficiencies:
        return replace(start, **{f: v * s for f, v, s in zip(_KERNEL_FIELDS, x, _KERNEL_SCALE, strict=True)})

    def loss(x: Sequence[float]) -> float:
        if not all(0 < v <= 1 for v in x[:3]) or x[3] < 0:
            return math.inf
        return _kernel_loss(with_x(x), points)

    x0 = [getattr(start, f) / s for f, s in zip(_KERNEL_FIELDS, _KERNEL_SCALE, strict=True)]
    return with_x(_nelder_mead(loss, x0, [0.05, 0.05, 0.05, 5.0]))


def _nelder_mead(f: Callable[[Sequence[float]], float], x0: list[float], steps: list[float],
                 iterations: int = 300) -> list[float]:
    n = len(x0)
    simplex = [list(x0)] + [[x0[j] + (steps[j] if j == i else 0.0) for j in range(n)] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centre, worst, strict=True)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centre, worst, strict=True)]
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centre, worst, strict=True)]
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (v - b) for b, v in zip(best, x, strict=True)] for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(n + 1), key=values.__getitem__)]


# --- P/D measurements -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PdPoint:
    """One published headline figure of a P/D measurement, and the simulated setup that reproduces it."""

    name: str
    source: str
    published: float
    unit: str
    """``pct`` (an improvement in percent, DPD over colocated) or ``ms`` (an absolute time)."""
    predict: Callable[[Efficiencies], float]

    def error(self, predicted: float) -> float:
        """Points for a percentage, percent of the published value for a time."""
        return predicted - self.published if self.unit == "pct" else 100 * (predicted / self.published - 1)


AWS_SOURCE = ("AWS, SageMaker HyperPod DPD (issue 15): Llama-3.3-70B-Instruct TP 8, max-model-len 16384, "
              "genai-bench D(4096,256), 1 prefill + 1 decode ml.p5.48xlarge vs one colocated ml.p5.48xlarge, "
              "eager prefill, CUDA graphs on decode")
#: AWS states the E2E P50 gain only as a range, "14-32 %" across concurrency 8-32 (the report's
#: ``AWS_H100_REFERENCE["ranges"]``); putting its low end at 8 and its high end at 32 is our inference, by analogy
#: with the TPOT gain, which AWS states per end and which rises with concurrency.
E2E_ASSIGNED = "[I: an end of the published 14-32 % range]"
AWS_E2E_SOURCE = (AWS_SOURCE + "; AWS publishes the E2E P50 gain only as '14-32 %' across concurrency 8-32: the "
                  "low end at 8 and the high end at 32 is inferred [I] (the TPOT gain, stated per end, rises with "
                  "concurrency)")
LMCACHE_SOURCE = ("LMCache docs disaggregated_prefill/nixl/xpyd.rst: Llama-3.1-8B-Instruct, 2 prefillers + 1 decoder "
                  "(TP 1, one GPU each, one node, NIXL over NVLink), all --enforce-eager, random 7500 in / 200 out "
                  "at 1 request/s; GPU not stated [I: H100 SXM assumed]")


def aws_inputs(k: Efficiencies) -> planner.PlanInputs:
    """AWS's setup: one p5 per role, the operator's defaults (config/default.yaml reproduces it)."""
    return planner.PlanInputs(
        model=resolve_model("meta-llama/Llama-3.3-70B-Instruct"), instance=instance_facts("ml.p5.48xlarge"), tp=8,
        max_model_len=16384, gpu_memory_utilization=0.75, prefill_max_num_seqs=16, decode_max_num_seqs=32,
        prefill_eager=True, decode_eager=False, routing_threshold_tokens=4096, pd_buffer_size_bytes=8 << 30,
        prefill_replicas=1, decode_replicas=1, max_decode_replicas=1, efficiencies=k)


def lmcache_inputs(k: Efficiencies) -> planner.PlanInputs:
    gpu = instance_facts("ml.p5.48xlarge")
    return planner.PlanInputs(
        model=resolve_model("meta-llama/Llama-3.1-8B-Instruct"), instance=gpu, tp=1, max_model_len=16384,
        gpu_memory_utilization=0.9, prefill_max_num_seqs=256, decode_max_num_seqs=256, prefill_eager=True,
        decode_eager=True, routing_threshold_tokens=0, pd_buffer_size_bytes=1 << 30, prefill_replicas=2,
        decode_replicas=1, max_decode_replicas=1, efficiencies=k,
        # One node: the KV moves over NVLink (UCX cuda_ipc), at the all-reduce's share of it.
        kv_transfer_bytes_per_s=gpu.gpu.nvlink_bytes_per_s * k.nvlink)


class _Runs:
    """Simulations shared by the P/D points (the colocated baselines do not depend on the system efficiencies)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], planner.Metrics] = {}

    def aws(self, k: Efficiencies, concurrency: int, split: bool) -> planner.Metrics:
        key = ("aws", concurrency, split, k if split else replace(k, host_call_seconds=0, handoff_seconds=0))
        if key not in self._cache:
            inputs = aws_inputs(k)
            layout = (planner.Layout(prefill_replicas=1, decode_replicas=1, routing_threshold_tokens=4096) if split
                      else planner.Layout(colocated_replicas=1))
            self._cache[key] = planner.run(inputs, planner.step_model(inputs), parse("D(4096,256)"), layout,
                                           concurrency=concurrency, request_rate=None)
        return self._cache[key]

    def aws_gain(self, k: Efficiencies, concurrency: int, metric: str) -> float:
        return planner.improvement(self.aws(k, concurrency, False), self.aws(k, concurrency, True))[metric]

    def lmcache(self, k: Efficiencies) -> planner.Metrics:
        key = ("lmcache", k)
        if key not in self._cache:
            inputs = lmcache_inputs(k)
            layout = planner.Layout(prefill_replicas=2, decode_replicas=1, routing_threshold_tokens=0)
            self._cache[key] = planner.run(inputs, planner.step_model(inputs), parse("D(7500,200)"), layout,
                                           concurrency=None, request_rate=1.0)
        return self._cache[key]


RUNS = _Runs()

#: The published P/D figures the system efficiencies are fitted to and validated on.
PD_POINTS: tuple[PdPoint, ...] = (
    PdPoint(name="AWS H100: TPOT gain at concurrency 8", source=AWS_SOURCE, published=22.0, unit="pct",
            predict=lambda k: RUNS.aws_gain(k, 8, "tpot")),
    PdPoint(name="AWS H100: TPOT gain at concurrency 32", source=AWS_SOURCE, published=66.0, unit="pct",
            predict=lambda k: RUNS.aws_gain(k, 32, "tpot")),
    PdPoint(name=f"AWS H100: E2E P50 gain at concurrency 8 {E2E_ASSIGNED}", source=AWS_E2E_SOURCE, published=14.0,
            unit="pct", predict=lambda k: RUNS.aws_gain(k, 8, "e2e_p50")),
    PdPoint(name=f"AWS H100: E2E P50 gain at concurrency 32 {E2E_ASSIGNED}", source=AWS_E2E_SOURCE, published=32.0,
            unit="pct", predict=lambda k: RUNS.aws_gain(k, 32, "e2e_p50")),
    PdPoint(name="AWS H100: output throughput gain, largest of concurrency 8/16/32 (\"up to 35 %\")",
            source=AWS_SOURCE, published=35.0, unit="pct",
            predict=lambda k: max(RUNS.aws_gain(k, c, "output_throughput") for c in (8, 16, 32))),
    PdPoint(name="LMCache 2P1D (8B, TP 1): median TTFT", source=LMCACHE_SOURCE, published=272.83, unit="ms",
            predict=lambda k: RUNS.lmcache(k).ttft_ms),
    PdPoint(name="LMCache 2P1D (8B, TP 1): mean TPOT", source=LMCACHE_SOURCE + " (dpd-anchors.md 4.1 #13)",
            published=8.84, unit="ms", predict=lambda k: RUNS.lmcache(k).tpot_ms),
)

#: The published points the left-out prediction misses by more than TOLERANCE_POINTS, and the likely cause.
MISSES: dict[str, str] = {
    PD_POINTS[4].name: (
        "closed-loop arithmetic: with identical requests, output tokens/s = concurrency x output tokens / mean E2E "
        "(Little's law), so at whichever concurrency of 8-32 the published range's top E2E P50 gain (32 %) was "
        "measured (AWS gives only the range), that run had about +47 % throughput (1 / 0.68); 'up to +35 %' and a "
        "32 % E2E gain cannot both hold for one run unless E2E P50 and mean differ a lot or the throughput was "
        "counted over a different window. The model follows the E2E figures (within 5 points, with the range's "
        "ends assigned to 8 and 32 [I])"),
    PD_POINTS[5].name: (
        "weakly identified hand-off: without this point only AWS's ratios constrain handoff_seconds, and they trade "
        "it against host_call_seconds (a longer hand-off with cheaper connector hooks gives the same E2E and TPOT "
        "gains), so the fold picks a longer hand-off; with the point in, the fit lands on it (275 vs 273 ms). An "
        "absolute TTFT measured through the operator's router on p5 would pin it"),
}

#: Published P/D results in dpd-anchors.md section 4 that are not used, and why.
NOT_USED: tuple[tuple[str, str], ...] = (
    ("llm-d P/D guide, 16 x H200, gpt-oss-120b (#6)",
     "mixture-of-experts with MXFP4 experts and sliding-window attention: outside the dense model (refused)"),
    ("Dynamo architecture doc, R1-Distill-Llama-70B FP8, H100 (#8)",
     "FP8 weights and an unpublished SLO and replica split behind '+30 % throughput/GPU'"),
    ("Dynamo PR #7764, Llama-3.1-8B on p5 (#9)",
     "prompt lengths and load not published; its 9.6 GB/s KV rate is the model's stated transfer rate"),
    ("ai-dynamo/dynamo#4185, Llama-3.3-70B FP8 1P1D on p5 (#11)", "FP8, prompt length not published"),
    ("vllm-project/vllm#16625, Llama-3.1-8B 1P1D on 2 x H100 (#12)",
     "'+40 % tokens/s' at a fixed offered 3.6 requests/s: the measure is not stated"),
    ("DistServe, Splitwise, Mooncake, TaiChi, Beyond the Buzz (#1-5)", "A100 or simulated; goodput, not latency"),
    ("AIConfigurator README (#15), AWS/llm-d 'up to 70 %' (#16)", "a model's estimate; a secondary summary"),
)

HOST_CALL_GRID = (2e-6, 5e-6, 10e-6, 15e-6, 20e-6, 30e-6)
HANDOFF_GRID = (0.0, 0.02, 0.05, 0.1, 0.2)
_REFINE = 8  # interpolation points between grid nodes


@dataclass(frozen=True, kw_only=True)
class Row:
    name: str
    kind: str
    """``kernel`` or ``pd``."""
    published: float
    unit: str
    fitted: float
    """The prediction with every point in the fit."""
    left_out: float
    """The prediction from a fit without this point (kernel level: without its GPU)."""
    error: float
    """Of the left-out prediction: points (pct) or percent (ms)."""


@dataclass(frozen=True, kw_only=True)
class Report:
    efficiencies: Efficiencies
    rows: tuple[Row, ...]

    def bands(self) -> dict[str, float]:
        """Uncertainty per estimate, from the left-out errors: improvement metrics in points (the largest error
        of that metric), step times in percent (root mean square over the kernel points)."""
        def worst(word: str) -> float:
            return max(abs(r.error) for r in self.rows if r.kind == "pd" and word in r.name)
        kernel = [r.error for r in self.rows if r.kind == "kernel"]
        return {"tpot": worst("TPOT gain"), "e2e_p50": worst("E2E"), "output_throughput": worst("throughput"),
                "time_pct": math.sqrt(sum(e * e for e in kernel) / len(kernel))}

    def worst_pd_error(self) -> float:
        return max(abs(r.error) for r in self.rows if r.kind == "pd")


def _pd_grid(kernel: Efficiencies, points: Sequence[PdPoint]) -> list[list[list[float]]]:
    """Every point's prediction at every grid node: grid[i][j][p]."""
    return [[[p.predict(replace(kernel, host_call_seconds=h, handoff_seconds=d)) for p in points]
             for d in HANDOFF_GRID] for h in HOST_CALL_GRID]


def _interpolate(grid: list[list[list[float]]], x: float, y: float) -> list[float]:
    """Bilinear, x and y in grid-index units."""
    i, j = min(int(x), len(HOST_CALL_GRID) - 2), min(int(y), len(HANDOFF_GRID) - 2)
    fx, fy = x - i, y - j
    return [(1 - fx) * (1 - fy) * a + fx * (1 - fy) * b + (1 - fx) * fy * c + fx * fy * d
            for a, b, c, d in zip(grid[i][j], grid[i + 1][j], grid[i][j + 1], grid[i + 1][j + 1], strict=True)]


def _index_value(grid: Sequence[float], x: float) -> float:
    i = min(int(x), len(grid) - 2)
    return grid[i] + (grid[i + 1] - grid[i]) * (x - i)


def _fit_pd(grid: list[list[list[float]]], points: Sequence[PdPoint], keep: Sequence[int]) -> tuple[float, float]:
    """The grid coordinates minimizing the squared errors of the points in ``keep``."""
    best, where = math.inf, (0.0, 0.0)
    nx, ny = (len(HOST_CALL_GRID) - 1) * _REFINE, (len(HANDOFF_GRID) - 1) * _REFINE
    for a in range(nx + 1):
        for b in range(ny + 1):
            x, y = a / _REFINE, b / _REFINE
            values = _interpolate(grid, x, y)
            loss = sum(points[i].error(values[i]) ** 2 for i in keep)
            if loss < best:
                best, where = loss, (x, y)
    return where


@functools.cache
def validate(points: tuple[PdPoint, ...] = PD_POINTS) -> Report:
    """Fit everything on all points, then predict each point from a fit without it (cached: ~10 s)."""
    kernel_all = fit_kernel(KERNEL_POINTS)
    rows: list[Row] = []
    for gpu in _GPU:
        held = [p for p in KERNEL_POINTS if p.gpu == gpu]
        k = fit_kernel([p for p in KERNEL_POINTS if p.gpu != gpu], kernel_all)
        for p in held:
            left_out = p.predict_ms(k)
            rows.append(Row(name=f"AIConfigurator {p.label} (ms)", kind="kernel", published=p.published_ms, unit="ms",
                            fitted=round(p.predict_ms(kernel_all), 2), left_out=round(left_out, 2),
                            error=round(100 * (left_out / p.published_ms - 1), 1)))
    grid = _pd_grid(kernel_all, points)
    x, y = _fit_pd(grid, points, range(len(points)))
    fitted = _interpolate(grid, x, y)
    for i, q in enumerate(points):
        xi, yi = _fit_pd(grid, points, [j for j in range(len(points)) if j != i])
        left_out = _interpolate(grid, xi, yi)[i]
        rows.append(Row(name=q.name, kind="pd", published=q.published, unit=q.unit, fitted=round(fitted[i], 1),
                        left_out=round(left_out, 1), error=round(q.error(left_out), 1)))
    k = replace(kernel_all, host_call_seconds=_index_value(HOST_CALL_GRID, x),
                handoff_seconds=_index_value(HANDOFF_GRID, y))
    return Report(efficiencies=k, rows=tuple(rows))
