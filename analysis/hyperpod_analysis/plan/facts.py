"""Facts the planner needs, each with its source: model shapes, GPU/instance hardware, price flags.

The hardware is the project's one instance table (``hyperpod_core.instances``: GPUs per node, each GPU's usable
memory as the driver reports it, its bandwidths and peak, the node's EFA bandwidth); the planner adds none of its own.
Model shapes are the core's table (``hyperpod_core.models``: the few fields of each model's published
Hugging Face ``config.json``), shared with the config's GPU-memory rules; a config.json path is read here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hyperpod_core.errors import UsageError
from hyperpod_core.instances import INSTANCE_FACTS, InstanceFacts
from hyperpod_core.models import DTYPE_BYTES, MODEL_ALIASES, MODELS, ModelShape

# The one price table is the core's (the planner, the report and the dashboards read it), re-exported here.
from hyperpod_core.prices import PINNED_PRICES as PINNED_PRICES
from hyperpod_core.prices import PriceTable as PriceTable


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


def instance_facts(instance_type: str) -> InstanceFacts:
    """The instance type's row of the project's one instance table (:mod:`hyperpod_core.instances`: the node, its
    GPU's usable memory, bandwidths and peak, the node's EFA bandwidth)."""
    if instance_type not in INSTANCE_FACTS:
        raise UsageError(f"endpoint.instance_type must be one the planner knows "
                         f"({', '.join(INSTANCE_FACTS)}), got {instance_type!r}")
    return INSTANCE_FACTS[instance_type]


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
