"""Step-time estimators: how long one vLLM engine step takes for a given batch.

Two engines answer the same question (:class:`StepModel`):

* :class:`RooflineEngine` (default, no extra dependency): per step, max(compute, HBM traffic) for the weights,
  the KV cache read by decode tokens and the attention FLOPs of prefill chunks, plus the tensor-parallel
  all-reduces over NVLink and a per-layer launch cost. Its constants are fitted to AIConfigurator's measured
  vLLM kernel data for H100 SXM (see :data:`ROOFLINE_H100_ANCHORS`) and reused for other GPUs through their
  datasheet bandwidth and FLOPs.
* :class:`AiConfiguratorEngine` (``pip install '.[plan]'``): the same per-phase latencies looked up in
  AIConfigurator's silicon data (``cli_estimate`` static context/generation steps), interpolated.

Neither knows about LMCache, EFA, the router or HyperPod: :mod:`hyperpod_analysis.plan.terms` adds those.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass
from typing import Protocol

from hyperpod_analysis.plan.facts import GpuFacts, ModelShape
from hyperpod_analysis.plan.terms import EAGER_PREFILL_SLOWDOWN
from hyperpod_core.errors import CommandFailed, UsageError

#: AIConfigurator 0.12.0, system h100_sxm, backend vllm 0.24.0, Llama-3.1-70B (same shapes as 3.3-70B), TP 8,
#: ``cli_estimate(mode="static_ctx"|"static_gen")``: prefill latency by prompt tokens, and decode TPOT by batch
#: at a 4096-token prompt with 256 output tokens. The roofline's constants are fitted to these.
ROOFLINE_H100_ANCHORS: dict[str, dict[int, float]] = {
    "prefill_ms_by_tokens": {1024: 46.24, 4096: 169.60, 8192: 344.26},
    "decode_tpot_ms_by_batch": {1: 10.34, 8: 10.38, 16: 11.42, 32: 12.72},
}


class StepModel(Protocol):
    """Seconds one engine step takes."""

    name: str

    def step_seconds(self, *, decode_tokens: int, decode_context: int, prefill_tokens: int,
                     prefill_attention: float, eager: bool) -> float:
        """``decode_context``: sum of the contexts the decode tokens attend to; ``prefill_attention``: sum over
        prefill chunks of new tokens x mean attended context."""
        ...


@dataclass(frozen=True, kw_only=True)
class RooflineConstants:
    """Fitted once against :data:`ROOFLINE_H100_ANCHORS` (test_plan_engine checks the fit)."""

    hbm_efficiency: float = 0.8
    """Share of datasheet HBM bandwidth a decode step reaches (AIConfigurator's h100_sxm.yaml uses 0.8)."""
    compute_efficiency: float = 0.69
    """Share of dense bf16 tensor-core peak reached by large prefill GEMMs."""
    nvlink_efficiency: float = 0.7
    """Share of per-GPU NVLink bandwidth reached by ring all-reduce."""
    allreduce_latency_s: float = 8e-6
    """Latency of one small all-reduce (two per layer)."""
    layer_overhead_s: float = 22e-6
    """Norms, rotary, activation and launch cost per layer with CUDA graphs."""
    eager_layer_overhead_s: float = 60e-6
    """Per-layer launch cost without CUDA graphs (``--enforce-eager``), paid when the GPU would otherwise wait."""
    step_overhead_s: float = 0.6e-3
    """Scheduler and sampling per step."""


class RooflineEngine:
    name = "roofline"

    def __init__(self, model: ModelShape, gpu: GpuFacts, tp: int,
                 constants: RooflineConstants | None = None) -> None:
        k = constants or RooflineConstants()
        self._k = k
        self._layers = model.num_hidden_layers
        self._weights_per_gpu = model.weight_bytes / tp
        self._flops_per_token = 2 * model.parameters / tp
        self._attn_flops_per_ctx = 4 * model.num_hidden_layers * model.hidden_size / tp
        self._kv_per_ctx_per_gpu = 2 * model.num_hidden_layers * model.num_key_value_heads * model.head_dim \
            * model.dtype_bytes / tp
        self._hbm = gpu.hbm_bytes_per_s * k.hbm_efficiency
        self._flops = gpu.bf16_dense_flops * k.compute_efficiency
        self._tp = tp
        self._ar_bytes_per_token = model.hidden_size * model.dtype_bytes
        self._ar_bw = gpu.nvlink_bytes_per_s * k.nvlink_efficiency

    def step_seconds(self, *, decode_tokens: int, decode_context: int, prefill_tokens: int,
                     prefill_attention: float, eager: bool) -> float:
        k = self._k
        tokens = decode_tokens + prefill_tokens
        if tokens == 0:
            return 0.0
        flops = self._flops_per_token * tokens + self._attn_flops_per_ctx * (decode_context + prefill_attention)
        memory = self._weights_per_gpu + self._kv_per_ctx_per_gpu * decode_context
        gpu = max(flops / self._flops, memory / self._hbm)
        comm = 0.0
        if self._tp > 1:
            ring = 2 * (self._tp - 1) / self._tp * tokens * self._ar_bytes_per_token / self._ar_bw
            comm = 2 * self._layers * (k.allreduce_latency_s + ring)
        overhead = self._layers * k.layer_overhead_s
        t = gpu + comm + overhead
        if eager:
            # No CUDA graphs: launches are paid unless the GPU work hides them; no torch.compile fusions.
            t = max(t, self._layers * k.eager_layer_overhead_s + gpu)
            if prefill_tokens:
                t *= EAGER_PREFILL_SLOWDOWN
        return t + k.step_overhead_s


class AiConfiguratorEngine:
    """Per-phase latencies from AIConfigurator's silicon data (optional extra ``plan``), interpolated.

    A mixed step costs its decode part (batch, mean context) plus its prefill part (tokens), as AIConfigurator's
    own aggregated model sums context and generation work per step.
    """

    name = "aiconfigurator"
    SYSTEMS = {"H100 SXM 80GB": "h100_sxm", "H200 SXM 141GB": "h200_sxm", "B200 180GB": "b200_sxm"}
    _BATCHES = (1, 4, 8, 16, 32, 64, 128)
    _CONTEXTS = (1024, 4096, 16384)
    _PREFILL = (256, 1024, 4096, 8192, 16384)

    def __init__(self, model: ModelShape, gpu: GpuFacts, tp: int) -> None:
        try:
            from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise UsageError("--engine aiconfigurator needs the optional extra: pip install '.[plan]', "
                             "got it not installed") from None
        system = self.SYSTEMS.get(gpu.name)
        if system is None:
            raise UsageError(f"--engine aiconfigurator supports {', '.join(self.SYSTEMS)}, got {gpu.name}")
        aic_model = model.aiconfigurator_model or model.name

        for name in ("aiconfigurator", "aiconfigurator_core"):
            logging.getLogger(name).setLevel(logging.ERROR)

        def est(mode: str, isl: int, batch: int) -> dict[str, float]:
            try:
                result: dict[str, float] = cli_estimate(aic_model, system, mode=mode, backend_name="vllm", isl=isl,
                                                        osl=2, batch_size=batch, tp_size=tp).get()
            except Exception as exc:  # the optional engine's own errors, reported as one line
                raise CommandFailed(f"--engine aiconfigurator could not estimate {aic_model} on {system} "
                                    f"(vllm, TP {tp}): {str(exc).splitlines()[0] if str(exc) else exc!r}") from None
            return result

        self._prefill = [(n, est("static_ctx", n, 1)["ttft"] / 1e3) for n in self._PREFILL]
        self._decode = {c: [(b, est("static_gen", c, b)["tpot"] / 1e3) for b in self._BATCHES]
                        for c in self._CONTEXTS}

    def step_seconds(self, *, decode_tokens: int, decode_context: int, prefill_tokens: int,
                     prefill_attention: float, eager: bool) -> float:
        t = 0.0
        if decode_tokens:
            mean_ctx = decode_context / decode_tokens
            t += _interp2(self._decode, mean_ctx, decode_tokens)
        if prefill_tokens:
            p = _interp(self._prefill, prefill_tokens)
            t += p * (EAGER_PREFILL_SLOWDOWN if eager else 1.0)
        return t


def _interp(points: list[tuple[int, float]], x: float) -> float:
    xs = [p[0] for p in points]
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def _interp2(table: dict[int, list[tuple[int, float]]], ctx: float, batch: float) -> float:
    ctxs = sorted(table)
    j = min(max(bisect.bisect_left(ctxs, ctx), 1), len(ctxs) - 1)
    c0, c1 = ctxs[j - 1], ctxs[j]
    y0, y1 = _interp(table[c0], batch), _interp(table[c1], batch)
    return y0 + (y1 - y0) * (math.log(ctx) - math.log(c0)) / (math.log(c1) - math.log(c0))
