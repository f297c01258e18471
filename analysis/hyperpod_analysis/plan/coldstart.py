"""Cold start: how long one scale-out event takes before a new replica serves, per model source.

Published figures only, each with its source; what is not published is said so rather than guessed:

* **S3 mount** (the operator's S3 model source, Mountpoint for S3 CSI driver): AWS's HyperPod inference
  troubleshooting page says a 70B model takes 5-10 minutes to load from cold S3 (lifecycle-facts.md, "Operator
  versions"). Scaled by the weights' size: Llama-3.3-70B's 141 GB in 5-10 minutes is 0.24-0.47 GB/s end to end
  (download, safetensors load, CUDA-graph capture included).
* **NVMe weights cache** (operator v3.3 ``modelCacheConfig.weightsCache``, instance NVMe at ``/opt/dlami/nvme``):
  AWS publishes no load time or read rate for a cache hit; the first load on a node still pays the S3 time.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_analysis.plan.facts import ModelShape

#: AWS HyperPod inference troubleshooting: "a 70B model takes 5-10 min to load from cold S3".
S3_REFERENCE_BYTES = 141_106_127_872  # Llama-3.3-70B-Instruct bf16 safetensors (70.55e9 parameters x 2 bytes)
S3_REFERENCE_SECONDS = (300.0, 600.0)
S3_SOURCE = "AWS SageMaker HyperPod inference troubleshooting (70B: 5-10 min from cold S3)"


@dataclass(frozen=True, kw_only=True)
class ColdStart:
    source: str
    seconds: tuple[float, float] | None
    """Fastest and slowest published time to ready for one replica, or None where nothing is published."""
    note: str


def cold_start(model: ModelShape) -> list[ColdStart]:
    """Time to ready of one new replica per model source, scaled from the published figures by weight bytes."""
    scale = model.weight_bytes / S3_REFERENCE_BYTES
    fast, slow = (s * scale for s in S3_REFERENCE_SECONDS)
    rate = (S3_REFERENCE_BYTES / S3_REFERENCE_SECONDS[1] / 1e9, S3_REFERENCE_BYTES / S3_REFERENCE_SECONDS[0] / 1e9)
    return [
        ColdStart(source="s3", seconds=(fast, slow),
                  note=f"{model.weight_bytes / 1e9:.0f} GB at {rate[0]:.2f}-{rate[1]:.2f} GB/s ({S3_SOURCE})"),
        ColdStart(source="nvme-cache", seconds=None,
                  note="operator v3.3 weights cache on instance NVMe: no published load time; the first start on a "
                       "node pays the S3 time, later ones read local NVMe (measure with hyperpod-dpd status)"),
    ]


def cold_start_line(model: ModelShape) -> str:
    parts = []
    for c in cold_start(model):
        when = f"{c.seconds[0] / 60:.1f}-{c.seconds[1] / 60:.1f} min" if c.seconds else "not published"
        parts.append(f"{c.source} {when} ({c.note})")
    return "cold start per scale-out event (one new replica, node already joined): " + "; ".join(parts)
