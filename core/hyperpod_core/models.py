"""Models this project knows by size: the few fields of each published Hugging Face ``config.json`` that the
GPU-memory rules (:mod:`hyperpod_core.config.rules`) and the planner (``hyperpod_analysis.plan``) need.

No model file is committed; each row names the ``config.json`` it was read from. A model that is not here
can be described in the config instead (``model.parameters_billion``, ``model.kv_cache_kib_per_token``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: Bytes per element of the dtypes a checkpoint is served in.
DTYPE_BYTES: Final[dict[str, int]] = {"bfloat16": 2, "float16": 2, "float32": 4, "float8": 1, "fp8": 1}

#: vLLM's KV cache dtype ``auto`` is the model's activation dtype (bf16 or fp16 for these models, 2 bytes), also
#: for FP8 weights; ``--kv-cache-dtype fp8`` halves it, which only makes the check below conservative.
KV_CACHE_DTYPE_BYTES: Final = 2


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """The transformer dimensions of a dense decoder-only model (``config.json`` field names)."""

    name: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    source: str = ""
    aiconfigurator_model: str = ""
    """What the planner's AIConfigurator engine is asked for: a model it bundles with the same shapes, or the
    config.json folder."""
    explicit_head_dim: int = 0
    """config.json ``head_dim`` where the model sets it apart from hidden / heads (Qwen3); 0: hidden / heads."""

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.num_attention_heads

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def layer_parameters(self) -> int:
        """Weights of one Llama-style block: q and o (h x heads*head_dim), k and v (h x kv_heads*head_dim), the
        gated MLP (3 x h x intermediate) and two norms."""
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        return 2 * h * q + 2 * h * kv + 3 * h * self.intermediate_size + 2 * h

    @property
    def lm_head_parameters(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def parameters(self) -> int:
        embeddings = self.lm_head_parameters * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * self.layer_parameters + embeddings + self.hidden_size

    @property
    def weight_bytes(self) -> int:
        return self.parameters * self.dtype_bytes

    @property
    def streamed_weight_bytes(self) -> int:
        """What one forward pass reads: every block and the LM head (the embedding table is only indexed)."""
        return (self.num_hidden_layers * self.layer_parameters + self.lm_head_parameters) * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V for every layer: 2 x layers x kv_heads x head_dim x dtype bytes.

        Llama-3.3-70B (80 layers, 8 KV heads, head_dim 128, bf16): 327,680 bytes (320 KiB) per token.
        """
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * self.dtype_bytes

    def kv_bytes_per_token_per_rank(self, tensor_parallel_size: int) -> int:
        """What one tensor-parallel rank holds per token: the KV heads are split over the ranks, and replicated
        when there are fewer heads than ranks (vLLM gives every rank at least one head)."""
        heads = max(1, self.num_key_value_heads // tensor_parallel_size)
        return 2 * self.num_hidden_layers * heads * self.head_dim * self.dtype_bytes


#: Published config.json fields (layers, hidden size, heads, KV heads, intermediate size, vocab, dtype).
MODELS: Final[dict[str, ModelShape]] = {
    "meta-llama/Llama-3.3-70B-Instruct": ModelShape(
        name="meta-llama/Llama-3.3-70B-Instruct", num_hidden_layers=80, hidden_size=8192,
        num_attention_heads=64, num_key_value_heads=8, intermediate_size=28672, vocab_size=128256,
        source="https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json",
        aiconfigurator_model="meta-llama/Meta-Llama-3.1-70B"),
    "meta-llama/Llama-3.1-70B-Instruct": ModelShape(
        name="meta-llama/Llama-3.1-70B-Instruct", num_hidden_layers=80, hidden_size=8192,
        num_attention_heads=64, num_key_value_heads=8, intermediate_size=28672, vocab_size=128256,
        source="https://huggingface.co/meta-llama/Llama-3.1-70B-Instruct/blob/main/config.json",
        aiconfigurator_model="meta-llama/Meta-Llama-3.1-70B"),
    "meta-llama/Llama-3.1-8B-Instruct": ModelShape(
        name="meta-llama/Llama-3.1-8B-Instruct", num_hidden_layers=32, hidden_size=4096,
        num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json",
        aiconfigurator_model="meta-llama/Meta-Llama-3.1-8B"),
    "Qwen/Qwen3-32B": ModelShape(
        name="Qwen/Qwen3-32B", num_hidden_layers=64, hidden_size=5120, num_attention_heads=64,
        num_key_value_heads=8, intermediate_size=25600, vocab_size=151936, explicit_head_dim=128,
        source="https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json", aiconfigurator_model="Qwen/Qwen3-32B"),
}

#: Other spellings of the same models (our config's ``model.name``, the S3 folder name).
MODEL_ALIASES: Final[dict[str, str]] = {
    "llama-3-3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-3.3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-3-1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3.1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3-1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-32b": "Qwen/Qwen3-32B",
}


def s3_folder(s3_prefix: str) -> str:
    """The last folder of a model prefix (``models/Llama-3.3-70B-Instruct/`` -> ``Llama-3.3-70B-Instruct``)."""
    return s3_prefix.rstrip("/").rsplit("/", 1)[-1]


def known_model(name: str, s3_prefix: str) -> ModelShape | None:
    """The table's model named by ``model.name``, else by the S3 folder of ``model.s3_prefix``; ``None`` when
    neither names one."""
    for candidate in (name, s3_folder(s3_prefix)):
        key = MODEL_ALIASES.get(candidate.lower(), candidate)
        if key in MODELS:
            return MODELS[key]
        if f"meta-llama/{candidate}" in MODELS:
            return MODELS[f"meta-llama/{candidate}"]
    return None
