"""Facts the planner needs, each with its source: model shapes, GPU/instance hardware, price flags.

GPUs per node come from the project's instance table (``hyperpod_core.sizing``); the planner adds
only what that table does not hold and the estimate needs (the GPU model and the node's EFA bandwidth).
Model shapes are the core's table (``hyperpod_core.models``: the few fields of each model's published
Hugging Face ``config.json``), shared with the config's GPU-memory rules; a config.json path is read here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_core.errors import UsageError
from hyperpod_core.models import DTYPE_BYTES, MODEL_ALIASES, MODELS, ModelShape

# The one price table is the core's (the planner, the report and the dashboards read it), re-exported here.
from hyperpod_core.prices import PINNED_PRICES as PINNED_PRICES
from hyperpod_core.prices import PriceTable as PriceTable
from hyperpod_core.sizing import INSTANCE_FACTS


def resolve_model(spec: str) -> ModelShape:
    """A known model name (Hugging Face id, our ``model.name``, or its S3 folder), or a config.json path."""
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.is_file():
        return _model_from_config_json(path)
    key = MODEL_ALIASES.get(spec.strip().lower().rstrip("/").rsplit("/", 1)[-1], spec)
    if key in MODELS:
        return MODELS[key]
    known = ", ".join(MODELS)
    raise UsageError(f"--model must be one of {known}, or a path to a Hugging Face config.json, got {spec!r}")


_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")


def _model_from_config_json(path: Path) -> ModelShape:
    try:
        raw: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--model {str(path)!r} must be a readable Hugging Face config.json ({exc})") from None
    missing = [k for k in _REQUIRED if not isinstance(raw.get(k), int) or raw[k] <= 0]
    if missing:
        raise UsageError(f"--model {str(path)!r} needs positive integers {', '.join(missing)} "
                         "(a dense decoder-only config.json), got none")
    if raw.get("num_local_experts") or raw.get("n_routed_experts"):
        raise UsageError(f"--model {str(path)!r} must be a dense model; mixture-of-experts is not modelled, "
                         "got experts in config.json")
    dtype = str(raw.get("torch_dtype") or raw.get("dtype") or "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise UsageError(f"--model {str(path)!r} torch_dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    heads = raw["num_attention_heads"]
    kv_heads = raw.get("num_key_value_heads") or heads
    head_dim = int(raw["head_dim"]) if isinstance(raw.get("head_dim"), int) and raw["head_dim"] > 0 else 0
    if (not head_dim and raw["hidden_size"] % heads) or heads % kv_heads:
        raise UsageError(f"--model {str(path)!r} hidden_size must divide by num_attention_heads and heads by "
                         f"num_key_value_heads, got {raw['hidden_size']}/{heads}/{kv_heads}")
    return ModelShape(
        name=str(raw.get("_name_or_path") or path.parent.name or path.name), num_hidden_layers=raw["num_hidden_layers"],
        hidden_size=raw["hidden_size"], num_attention_heads=heads, num_key_value_heads=kv_heads,
        intermediate_size=raw["intermediate_size"], vocab_size=raw["vocab_size"], dtype=dtype,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)), source=str(path), explicit_head_dim=head_dim,
        aiconfigurator_model=str(path.parent))


# --- hardware -------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GpuFacts:
    """Datasheet figures of one GPU (per GPU, not per board); every number is the vendor's, none is fitted."""

    name: str
    hbm_bytes: int
    hbm_bytes_per_s: float
    bf16_dense_flops: float
    """Dense BF16 tensor-core peak (the datasheets print the 2:4-sparse figure, twice this)."""
    nvlink_bytes_per_s: float
    """Per GPU, one direction (half the datasheet's bidirectional figure)."""
    source: str


_H100 = "NVIDIA H100 datasheet, SXM column (nvidia.com/en-us/data-center/h100/): 80 GB HBM3, 3.35 TB/s, BF16 " \
        "1,979 TFLOPS with sparsity, NVLink 900 GB/s"
_H200 = "NVIDIA H200 datasheet, SXM column (nvidia.com/en-us/data-center/h200/): 141 GB HBM3e, 4.8 TB/s, BF16 " \
        "1,979 TFLOPS with sparsity, NVLink 900 GB/s"
_B200 = "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx/): 8 GPUs, 1.4 TB HBM3e (AWS p6-b200: " \
        "1,440 GB), 8 TB/s per GPU, FP16/BF16 36 PFLOPS with sparsity per board, NVLink 5 1.8 TB/s per GPU"
_B300 = "NVIDIA HGX B300 specifications (nvidia.com/en-us/data-center/hgx/): 8 GPUs, 288 GB HBM3e each (2.3 TB), " \
        "8 TB/s per GPU, FP16/BF16 36 PFLOPS with sparsity per board, NVLink 5 1.8 TB/s per GPU"

#: The four GPUs of the DPD instance types, from their datasheets (the source says which figure is which). Memory
#: is what the driver reports (80 / 141 / 180 GiB; B300 275,040 MiB by nvidia-smi), as AIConfigurator 0.12.0's
#: ``systems/<gpu>_sxm.yaml`` records it, since vLLM sizes its KV cache from that.
GPUS: dict[str, GpuFacts] = {g.name: g for g in (
    GpuFacts(name="H100 SXM 80GB", hbm_bytes=80 << 30, hbm_bytes_per_s=3.35e12, bf16_dense_flops=989.5e12,
             nvlink_bytes_per_s=450e9, source=_H100),
    GpuFacts(name="H200 SXM 141GB", hbm_bytes=141 << 30, hbm_bytes_per_s=4.8e12, bf16_dense_flops=989.5e12,
             nvlink_bytes_per_s=450e9, source=_H200),
    GpuFacts(name="B200 180GB", hbm_bytes=180 << 30, hbm_bytes_per_s=8.0e12, bf16_dense_flops=36e15 / 8 / 2,
             nvlink_bytes_per_s=900e9, source=_B200),
    GpuFacts(name="B300 288GB", hbm_bytes=275040 << 20, hbm_bytes_per_s=8.0e12, bf16_dense_flops=36e15 / 8 / 2,
             nvlink_bytes_per_s=900e9, source=_B300),
)}
H100_SXM, H200_SXM, B200_SXM, B300_SXM = (GPUS[n] for n in GPUS)


@dataclass(frozen=True, kw_only=True)
class InstanceFacts:
    instance_type: str
    gpus: int
    gpu: GpuFacts
    efa_bytes_per_s: float
    """Aggregate EFA network bandwidth of the node (vendor figure, bits/8)."""
    source: str


_EC2 = "aws.amazon.com/ec2/instance-types/p5/ and /p6/: network bandwidth"
#: GPUs from the project's instance table (hyperpod_core.sizing), the GPU model and the node's EFA bandwidth
#: (p5/p5e/p5en/p6-b200: 3,200 Gbps; p6-b300: 6,400 Gbps).
PLANNER_INSTANCE_FACTS: dict[str, InstanceFacts] = {
    name: InstanceFacts(instance_type=name, gpus=INSTANCE_FACTS[name].gpus, gpu=gpu, efa_bytes_per_s=gbps * 1e9 / 8,
                        source=f"{INSTANCE_FACTS[name].source}; EFA {gbps:,} Gbps: {_EC2}")
    for name, gpu, gbps in (("ml.p5.48xlarge", H100_SXM, 3200), ("ml.p5e.48xlarge", H200_SXM, 3200),
                            ("ml.p5en.48xlarge", H200_SXM, 3200), ("ml.p6-b200.48xlarge", B200_SXM, 3200),
                            ("ml.p6-b300.48xlarge", B300_SXM, 6400))
}


def instance_facts(instance_type: str) -> InstanceFacts:
    if instance_type not in PLANNER_INSTANCE_FACTS:
        raise UsageError(f"endpoint.instance_type must be one the planner knows "
                         f"({', '.join(PLANNER_INSTANCE_FACTS)}), got {instance_type!r}")
    return PLANNER_INSTANCE_FACTS[instance_type]


# --- prices ---------------------------------------------------------------------------------------------


def load_price_file(path: Path) -> dict[str, float]:
    """A YAML or JSON mapping ``instance_type: usd_per_hour``."""
    import yaml

    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"--prices {str(path)!r} must be a readable YAML/JSON file ({exc})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"--prices {str(path)!r} must map instance types to USD per hour, got {type(raw).__name__}")
    return {str(k): _positive_price(str(k), v) for k, v in raw.items()}


def parse_price_flag(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise UsageError(f"--price must be INSTANCE_TYPE=USD_PER_HOUR, got {text!r}")
    return name.strip(), _positive_price(name.strip(), value)


def _positive_price(name: str, value: object) -> float:
    try:
        price = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        price = -1.0
    if price <= 0:
        raise UsageError(f"--price {name} must be a positive USD amount per instance-hour, got {value!r}")
    return price
