"""Step-time estimators: how long one vLLM engine step takes for a given batch.

Two engines answer the same question (:class:`StepModel`):

* :class:`RooflineEngine` (default, no extra dependency): a physical model. Per step, each kernel class at its
  roofline (the linear layers: weights streamed from HBM vs their FLOPs on the tensor cores; attention: the KV
  cache read vs its FLOPs), two ring all-reduces per layer over NVLink, a fixed time per layer, and, without CUDA
  graphs, the host's time to launch every kernel (the GPU waits when the host is slower). Hardware figures are the
  datasheets' (:mod:`~hyperpod_analysis.plan.facts`), the model's shape its config.json; the only free numbers
  are the six :class:`Efficiencies`, the same for every GPU, model and load.
* :class:`AiConfiguratorEngine` (``pip install '.[plan]'``): per-phase latencies looked up in AIConfigurator's
  silicon data (``cli_estimate`` static context/generation steps), interpolated.

Neither knows about LMCache, EFA, the router or HyperPod: :mod:`hyperpod_analysis.plan.terms` adds those.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import dataclass
from typing import Protocol

from hyperpod_analysis.plan.facts import ModelShape
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.instances import GpuFacts


class StepModel(Protocol):
    """Seconds one engine step takes."""

    name: str

    def step_seconds(self, *, decode_tokens: int, decode_context: int, prefill_tokens: int,
                     prefill_attention: float, eager: bool) -> float:
        """``decode_context``: sum of the contexts the decode tokens attend to; ``prefill_attention``: sum over
        prefill chunks of new tokens x mean attended context."""
        ...

    def connector_seconds(self) -> float:
        """Host time the KV connector's per-layer hooks add to every step of a DPD role."""
        ...


@dataclass(frozen=True, kw_only=True)
class Efficiencies:
    """The model's only free parameters: six, the same for every GPU, model, TP and load.

    Four are kernel-level and fitted to AIConfigurator's published per-GPU silicon data (vLLM backend); two are
    system-level and fitted to the published P/D measurements. ``validation.py`` refits each leaving one point out
    (``plan --calibration``); :data:`EFFICIENCIES` holds the fit on all points and a test recomputes it.
    """

    tensor_core: float
    """Share of the datasheet's dense BF16 peak that GEMMs and attention reach when compute-bound."""
    hbm: float
    """Share of the datasheet's HBM bandwidth reached streaming weights and the KV cache."""
    nvlink: float
    """Share of the per-GPU, one-direction NVLink bandwidth a ring all-reduce reaches (its bus bandwidth)."""
    layer_seconds: float
    """Fixed GPU time per layer and step: norms, rotary, activation, the two all-reduces' latency, sampling."""
    host_call_seconds: float
    """Host time per call outside a CUDA graph: one kernel launch in eager mode, one KV-connector hook."""
    handoff_seconds: float
    """Per disaggregated request: the router's second hop, the connector's lookup and the decoder's admission."""


#: Fitted on every published point (``validation.fit``; tests/cli/test_plan_validation.py recomputes it).
EFFICIENCIES = Efficiencies(tensor_core=0.686, hbm=0.986, nvlink=0.586, layer_seconds=61.1e-6,
                            host_call_seconds=13.1e-6, handoff_seconds=0.081)

#: Kernels vLLM launches per Llama-style layer without CUDA graphs: fused add+RMSNorm twice, QKV, rotary,
#: attention, O, gate-up, SiLU-and-mul, down (vllm/model_executor/models/llama.py), plus two all-reduces at TP > 1.
KERNELS_PER_LAYER = 9
#: LMCacheConnectorV1 hooks per layer and step in a DPD role: ``wait_for_layer_load`` and ``save_kv_layer``
#: (vllm/attention/layer.py calls both around every attention); each waits on the layer's stream, so the host
#: cannot run ahead of the GPU there.
CONNECTOR_HOOKS_PER_LAYER = 2


class RooflineEngine:
    name = "roofline"

    def __init__(self, model: ModelShape, gpu: GpuFacts, tp: int, k: Efficiencies | None = None) -> None:
        k = k or EFFICIENCIES
        self.k = k
        self._layers = model.num_hidden_layers
        self._weights = model.streamed_weight_bytes / tp
        self._flops_per_token = 2 * model.num_hidden_layers * model.layer_parameters / tp
        self._lm_head_flops = 2 * model.lm_head_parameters / tp
        self._attn_flops_per_ctx = 4 * model.num_hidden_layers * model.num_attention_heads * model.head_dim / tp
        self._kv_per_ctx = 2 * model.num_hidden_layers * model.num_key_value_heads * model.head_dim \
            * model.dtype_bytes / tp
        self._hbm = gpu.hbm_bytes_per_s * k.hbm
        self._flops = gpu.bf16_dense_flops * k.tensor_core
        self._tp = tp
        self._ar_bytes = 2 * (tp - 1) / tp * model.hidden_size * model.dtype_bytes  # ring: 2(n-1)/n of the data
        self._ar_bw = gpu.nvlink_bytes_per_s * k.nvlink
        self._launches = model.num_hidden_layers * (KERNELS_PER_LAYER + (2 if tp > 1 else 0))

    def step_seconds(self, *, decode_tokens: int, decode_context: int, prefill_tokens: int,
                     prefill_attention: float, eager: bool) -> float:
        tokens = decode_tokens + prefill_tokens
        if tokens == 0:
            return 0.0
        sampled = decode_tokens + (1 if prefill_tokens else 0)
        linear = max((self._flops_per_token * tokens + self._lm_head_flops * sampled) / self._flops,
                     self._weights / self._hbm)
        attention = max(self._attn_flops_per_ctx * (decode_context + prefill_attention) / self._flops,
                        self._kv_per_ctx * decode_context / self._hbm)
        comm = 2 * self._layers * tokens * self._ar_bytes / self._ar_bw if self._tp > 1 else 0.0
        gpu = linear + attention + comm + self._layers * self.k.layer_seconds
        if eager:  # launches are asynchronous: the GPU waits only when the host is the slower of the two
            return max(gpu, self._launches * self.k.host_call_seconds)
        return gpu

    def connector_seconds(self) -> float:
        """Host time the KV connector's per-layer hooks add to every step of a DPD role."""
        return self._layers * CONNECTOR_HOOKS_PER_LAYER * self.k.host_call_seconds


class AiConfiguratorEngine:
    """Per-phase latencies from AIConfigurator's silicon data (optional extra ``plan``), interpolated.

    A mixed step costs its decode part (batch, mean context) plus its prefill part (tokens), as AIConfigurator's
    own aggregated model sums context and generation work per step.
    """

    name = "aiconfigurator"
    SYSTEMS = {"H100 SXM 80GB": "h100_sxm", "H200 SXM 141GB": "h200_sxm", "B200 180GB": "b200_sxm",
               "B300 288GB": "b300_sxm"}
    _BATCHES = (1, 4, 8, 16, 32, 64, 128)
    _CONTEXTS = (1024, 4096, 16384)
    _PREFILL = (256, 1024, 4096, 8192, 16384)

    def __init__(self, model: ModelShape, gpu: GpuFacts, tp: int, k: Efficiencies | None = None) -> None:
        self.k = k or EFFICIENCIES
        try:
            from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise UsageError("--engine aiconfigurator needs the optional extra: pip install '.[plan]', "
                             "got it not installed") from None
        system = self.SYSTEMS.get(gpu.name)
        if system is None:
            raise UsageError(f"--engine aiconfigurator supports {', '.join(self.SYSTEMS)}, got {gpu.name}")
        aic_model = model.aiconfigurator_model or model.name
        self._layers = model.num_hidden_layers
        self._launches = model.num_hidden_layers * (KERNELS_PER_LAYER + (2 if tp > 1 else 0))

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
            t += _interp(self._prefill, prefill_tokens)
        if eager:  # the same host floor as the roofline: AIConfigurator's data are with CUDA graphs
            t = max(t, self._launches * self.k.host_call_seconds)
        return t

    def connector_seconds(self) -> float:
        return self._layers * CONNECTOR_HOOKS_PER_LAYER * self.k.host_call_seconds


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
