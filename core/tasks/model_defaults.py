"""What transformers fills in for the fields a config.json omits, per `model_type`: a hub config
carries only what differs from its class's defaults (Gemma-3's text_config has no vocab_size and
no hidden_activation), so reading it without them would lose layers. The values are those of
the configuration classes' `__init__` in transformers (4.5x), for the fields the arena reads.
An unknown model_type gets none: what it omits stays missing, and the tasks that need it say so.
"""

from __future__ import annotations

from typing import Any

_LLAMA = {
    "vocab_size": 32000,
    "hidden_act": "silu",
    "attention_bias": False,
    "partial_rotary_factor": 1.0,
}
_QWEN3 = {
    "vocab_size": 151936,
    "hidden_act": "silu",
    "sliding_window": 4096,
    "use_sliding_window": False,
    "attention_bias": False,
}

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "mistral": {**_LLAMA, "sliding_window": 4096},
    "qwen2": {**_QWEN3},
    "qwen3": {**_QWEN3},
    "qwen3_moe": {
        **_QWEN3,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": False,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    },
    "qwen3_next": {
        **_QWEN3,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "num_experts": 512,
        "num_experts_per_tok": 10,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "head_dim": 256,
        "partial_rotary_factor": 0.25,
        "full_attention_interval": 4,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
    },
    "deepseek_v3": {
        "vocab_size": 129280,
        "hidden_act": "silu",
        "n_shared_experts": 1,
        "n_routed_experts": 256,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "n_group": 8,
        "topk_group": 4,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "moe_layer_freq": 1,
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "rope_interleave": True,
    },
    "glm4_moe": {
        "vocab_size": 151552,
        "hidden_act": "silu",
        "partial_rotary_factor": 0.5,
        "n_shared_experts": 1,
        "n_routed_experts": 128,
        "routed_scaling_factor": 1.0,
        "n_group": 1,
        "topk_group": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "norm_topk_prob": True,
        "use_qk_norm": False,
        "attention_bias": False,
    },
    "gpt_oss": {
        "vocab_size": 201088,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "head_dim": 64,
        "sliding_window": 128,
        "swiglu_limit": 7.0,
        "attention_bias": True,
    },
    "llama4_text": {
        "vocab_size": 202048,
        "hidden_act": "silu",
        "num_experts_per_tok": 1,
        "num_local_experts": 16,
        "interleave_moe_layer_step": 1,
        "intermediate_size_mlp": 16384,
        "use_qk_norm": True,
        "attention_chunk_size": 8192,
        "no_rope_layer_interval": 4,
        "head_dim": 128,
    },
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_activation": "gelu_pytorch_tanh",
        "head_dim": 256,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "query_pre_attn_scalar": 256,
        "attn_logit_softcapping": None,
        "final_logit_softcapping": None,
        "attention_bias": False,
    },
    "mixtral": {**_LLAMA, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None},
    "minicpm3": {"hidden_act": "silu"},
}
# A multimodal wrapper's text model type, where its text_config names none.
TEXT_MODEL_TYPE = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "mistral3": "mistral",
}
# Model types that share another's fields (Kimi-K2 is DeepSeek-V3's architecture).
ALIASES = {"kimi_k2": "deepseek_v3", "deepseek_v2": "deepseek_v3", "qwen2_moe": "qwen3_moe"}


def with_defaults(cfg: dict[str, Any], model_type: str | None) -> dict[str, Any]:
    """`cfg` with transformers' defaults for `model_type` under it: a field the config gives,
    null included, wins."""
    base = DEFAULTS.get(ALIASES.get(model_type or "", model_type or ""), {})
    return {**base, **cfg}


def guess_model_type(raw: dict[str, Any]) -> str | None:
    """The architecture's model type: the text_config's, else the wrapper's text model's, else
    the config's own; MiniCPM3 (a remote-code model with model_type `minicpm`) from its
    architecture name."""
    text = raw.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("model_type"), str):
        return str(text["model_type"])
    arch = raw.get("architectures") or []
    if any(isinstance(a, str) and a.startswith("MiniCPM3") for a in arch):
        return "minicpm3"
    given = raw.get("model_type")
    if isinstance(given, str):
        return TEXT_MODEL_TYPE.get(given, given) if isinstance(text, dict) else given
    return None
