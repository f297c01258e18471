"""What the per-phase estimators do not model for this deployment, one function per term.

Each term is small, documented with its source, and unit-tested against hand-computed values:

* KV bytes per token (from the model's config.json) and the KV transfer over EFA through LMCache/NIXL;
* the router's threshold: prompts shorter than ``routing_threshold_tokens`` are prefilled on the decoder;
* HyperPod's node granularity: replicas come in whole TP-sized engines on whole 8-GPU nodes.
"""

from __future__ import annotations

import math

from hyperpod_analysis.plan.facts import ModelShape
from hyperpod_core.errors import UsageError
from hyperpod_core.instances import InstanceFacts

GIB = 1 << 30

#: Measured NIXL + libfabric KV-transfer rate over EFA on p5.48xlarge: ~9.6 GB/s
#: (ai-dynamo/dynamo PR #7764, Llama-3.1-8B, agg vs disagg on AWS; dpd-anchors.md 4.1 #9). Override with
#: ``--kv-transfer-gbps`` once you have measured yours (LMCache's ``lmcache:p2p_time_to_transfer``, NIXL telemetry).
MEASURED_KV_TRANSFER_BYTES_PER_S = 9.6e9


def kv_bytes_per_token(model: ModelShape) -> int:
    """K and V for every layer (:attr:`hyperpod_core.models.ModelShape.kv_bytes_per_token`).

    Llama-3.3-70B (80 layers, 8 KV heads, head_dim 128, bf16) = 327,680 bytes per token.
    """
    return model.kv_bytes_per_token


def kv_transfer_bytes_per_s(instance: InstanceFacts, measured_bytes_per_s: float) -> float:
    """The rate one prefill->decode KV transfer runs at: the measured effective rate, capped by the node's EFA."""
    return min(measured_bytes_per_s, instance.efa_bytes_per_s)


def kv_transfer_seconds(tokens: int, model: ModelShape, rate_bytes_per_s: float) -> float:
    """Time to move one request's prompt KV from the prefill node to the decode node."""
    return tokens * kv_bytes_per_token(model) / rate_bytes_per_s


def routed_to_prefill(prompt_tokens: int, threshold_tokens: int) -> bool:
    """The operator's router: prompts at or above the threshold go prefill -> decode (pdSpec.routingThreshold:
    "Requests with estimated input tokens >= threshold go through DPD"); shorter ones go straight to decode."""
    return prompt_tokens >= threshold_tokens


def replicas_per_node(tp: int, gpus_per_node: int) -> int:
    """Engines of ``tp`` GPUs that fit one node; TP must divide the node's GPUs (one engine never spans nodes)."""
    if tp < 1 or gpus_per_node % tp:
        raise UsageError(f"endpoint.tensor_parallel_size must divide the {gpus_per_node} GPUs of one node "
                         f"(1, 2, 4 or 8), got {tp}")
    return gpus_per_node // tp


def nodes_for(replicas: int, tp: int, gpus_per_node: int) -> int:
    """Whole nodes ``replicas`` engines need: HyperPod bills and schedules instances, not GPUs. A role's engines
    take nodes of their own unless both roles may land on one instance group (then pass both roles' replicas)."""
    return math.ceil(replicas / replicas_per_node(tp, gpus_per_node)) if replicas else 0


def pd_buffer_bytes(peak_tokens_in_flight: int, model: ModelShape, tp: int) -> int:
    """Decoder KV receive buffer per rank (PD_BUFFER_SIZE) for a peak number of prompt tokens held between
    arrival and admission, plus 25 % headroom, rounded up to whole GiB within the config's 1-64 GiB."""
    per_rank = peak_tokens_in_flight * kv_bytes_per_token(model) / tp
    return int(min(64, max(1, math.ceil(per_rank * 1.25 / GIB)))) * GIB
