"""A model's architecture, read from its config.json (`read_arch`): the layer types (dense or MoE
MLP; full, sliding-window, chunked, linear or latent attention), their widths, and the variant
of each operation (activation, RoPE style, q/k norm, router, weight format).

Every field the arena knows to change an operation is read here, with transformers' defaults
for the fields a config omits (core/tasks/model_defaults.py); where a field names a variant no
task implements, `Arch.refused` says so by name, and the tasks that would need it skip the
model with that sentence (core/tasks/model_rows.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from core.tasks.model_defaults import ALIASES, guess_model_type, with_defaults

ATTENTION_TYPES = ("full", "sliding", "chunked", "linear", "mla")
_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}
_ACTS = {
    "silu": "silu",
    "swish": "silu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
}


class ModelConfigError(ValueError):
    """A config that cannot be read; the message names the file, the key and the fix."""


@dataclass
class Arch:
    model_type: str | None
    hidden: int
    layers: int
    vocab: int | None = None
    max_pos: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None  # GQA attention only
    rotary_dim: int | None = None
    rope_style: str = "neox"  # neox | interleaved
    qk_norm: str | None = None  # rms | l2
    sinks: bool = False
    q_gate: bool = False
    attention_bias: bool = False
    softcap: bool = False
    attention: dict[str, int] = field(default_factory=dict)  # type -> layers
    nope_layers: int = 0  # attention layers without RoPE (Llama-4's global layers)
    window: int | None = None
    chunk: int | None = None
    mla: dict[str, float] = field(default_factory=dict)  # q_lora_rank, kv_lora_rank, ...
    linear_attn: dict[str, int] = field(default_factory=dict)
    dense_layers: int = 0
    dense_width: int | None = None
    moe_layers: int = 0
    experts: int | None = None
    top_k: int | None = None
    expert_width: int | None = None
    shared_width: int | None = None
    router: str | None = None  # softmax | sigmoid_grouped | sigmoid_top1
    n_group: int | None = None
    topk_group: int | None = None
    scaling: float | None = None
    expert_bias: bool = False
    act: str | None = None  # silu | gelu_tanh | swiglu_oai
    linear_format: str = "bf16"  # bf16 | fp8_block | fp16 | fp32 | <quant_method>
    expert_format: str = "bf16"  # ... | mxfp4 | int4
    refused: dict[str, str] = field(default_factory=dict)  # missing trait/key -> why
    read: list[str] = field(default_factory=list)  # how each field was taken, for --json


def _int(cfg: dict[str, Any], *names: str) -> int | None:
    for name in names:
        v = cfg.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == int(v):
            return int(v)
    return None


def _float(cfg: dict[str, Any], name: str) -> float | None:
    v = cfg.get(name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def text_config(raw: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The text model's fields with transformers' defaults under them, and its model type."""
    model_type = guess_model_type(raw)
    text = raw.get("text_config")
    cfg = {**raw, **text} if isinstance(text, dict) else dict(raw)
    family = ALIASES.get(model_type or "", model_type)
    return with_defaults(cfg, family), family


def read_arch(raw: dict[str, Any], where: str) -> Arch:
    cfg, mt = text_config(raw)
    hidden = _int(cfg, "hidden_size", "d_model", "n_embd")
    if hidden is None:
        raise ModelConfigError(
            f"{where}: `hidden_size`: missing (also under text_config): is this a transformer's config.json?"
        )
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers") or 1
    a = Arch(model_type=mt, hidden=hidden, layers=layers)
    a.vocab = _int(cfg, "vocab_size")
    a.max_pos = _int(cfg, "max_position_embeddings")
    if a.vocab is None:
        a.refused["vocab_size"] = "the config gives no vocab_size and its model type has no default"
    _read_attention(a, cfg, mt)
    _read_mlp(a, cfg, mt)
    _read_formats(a, cfg)
    return a


def _read_attention(a: Arch, cfg: dict[str, Any], mt: str | None) -> None:
    heads = _int(cfg, "num_attention_heads", "n_head")
    a.heads = heads
    if _int(cfg, "kv_lora_rank") is not None:  # MLA: the heads are the latent's, not head_dim's
        _read_mla(a, cfg)
        return
    a.kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads") or heads
    a.head_dim = _int(cfg, "head_dim") or (
        a.hidden // heads if heads and a.hidden % heads == 0 else None
    )
    if a.head_dim and "head_dim" not in cfg:
        a.read.append(f"head_dim: hidden_size // num_attention_heads = {a.head_dim}")
    factor = _float(cfg, "partial_rotary_factor") or 1.0
    if a.head_dim:
        a.rotary_dim = int(a.head_dim * factor)
        if factor != 1.0:
            a.read.append(
                f"partial_rotary_factor {factor:g}: RoPE on {a.rotary_dim} of {a.head_dim} dims"
            )
    if mt == "llama4_text":
        a.rope_style = "interleaved"  # Llama-4 rotates adjacent pairs (complex multiplication)
    a.qk_norm = {
        "qwen3": "rms",
        "qwen3_moe": "rms",
        "qwen3_next": "rms",
        "gemma3_text": "rms",
    }.get(mt or "")
    if cfg.get("use_qk_norm"):
        a.qk_norm = "l2" if mt == "llama4_text" else "rms"
    a.sinks = mt == "gpt_oss"
    a.q_gate = mt == "qwen3_next"  # its q_proj also gives the attention output's gate
    a.attention_bias = bool(cfg.get("attention_bias"))
    if cfg.get("attn_logit_softcapping"):
        a.softcap = True
        a.refused["attention_softcap"] = f"attn_logit_softcapping {cfg['attn_logit_softcapping']}"
    window = _int(cfg, "sliding_window")
    if cfg.get("use_sliding_window") is False:
        window = None  # Qwen configs carry a window they do not use
    types = _layer_types(a, cfg, mt, window)
    if window and a.max_pos and window >= a.max_pos and "sliding" in types:
        a.read.append(
            f"sliding_window {window} >= max_position_embeddings {a.max_pos}: full attention"
        )
        types = ["full" if t == "sliding" else t for t in types]
    for t in types:
        a.attention[t] = a.attention.get(t, 0) + 1
    a.window = window if "sliding" in a.attention else None
    a.chunk = _int(cfg, "attention_chunk_size") if "chunked" in a.attention else None
    if "linear" in a.attention:
        a.linear_attn = {
            k: v
            for k in (
                "linear_num_key_heads",
                "linear_num_value_heads",
                "linear_key_head_dim",
                "linear_value_head_dim",
                "linear_conv_kernel_dim",
            )
            if (v := _int(cfg, k)) is not None
        }


def _layer_types(a: Arch, cfg: dict[str, Any], mt: str | None, window: int | None) -> list[str]:
    n = a.layers
    given = cfg.get("layer_types")
    if isinstance(given, list) and given:
        unknown = sorted({str(t) for t in given} - set(_LAYER_TYPES))
        if unknown:
            a.refused["layer_types"] = f"layer_types {', '.join(unknown)} has no task"
        a.read.append("layer_types: as listed")
        return [_LAYER_TYPES.get(str(t), str(t)) for t in given]
    if mt == "qwen3_next":
        k = _int(cfg, "full_attention_interval") or 4
        a.read.append(
            f"full_attention_interval {k}: one full-attention layer in {k}, the rest linear"
        )
        return ["linear" if (i + 1) % k else "full" for i in range(n)]
    if mt == "gemma3_text":
        k = _int(cfg, "sliding_window_pattern") or 6
        a.read.append(f"sliding_window_pattern {k}: one global layer in {k}, the rest sliding")
        return ["sliding" if (i + 1) % k else "full" for i in range(n)]
    if mt == "gpt_oss":
        return ["sliding" if (i + 1) % 2 else "full" for i in range(n)]
    if mt == "llama4_text":
        nope = cfg.get("no_rope_layers") or [
            int((i + 1) % (_int(cfg, "no_rope_layer_interval") or 4) != 0) for i in range(n)
        ]
        a.nope_layers = sum(1 for x in nope if not x)
        chunked = "chunked" if _int(cfg, "attention_chunk_size") else "full"
        a.read.append(
            f"no_rope_layers: {a.nope_layers} global layers without RoPE, the rest {chunked} attention"
        )
        return [chunked if x else "full" for x in nope]
    return ["sliding" if window else "full"] * n


def _read_mla(a: Arch, cfg: dict[str, Any]) -> None:
    nope, rope = _int(cfg, "qk_nope_head_dim"), _int(cfg, "qk_rope_head_dim")
    # MiniCPM3 has no v_head_dim: its value heads are hidden_size // num_attention_heads.
    v = _int(cfg, "v_head_dim") or (a.hidden // a.heads if a.heads else None)
    if nope is None or rope is None or v is None or a.heads is None:
        a.refused["mla"] = "an MLA config without qk_nope_head_dim, qk_rope_head_dim or heads"
        return
    scale = (nope + rope) ** -0.5
    rs = cfg.get("rope_scaling") or {}
    if (rs.get("type") or rs.get("rope_type")) == "yarn" and rs.get("mscale_all_dim"):
        m = 0.1 * float(rs["mscale_all_dim"]) * math.log(float(rs["factor"])) + 1.0
        scale *= m * m  # YaRN's attention scale, as DeepSeek's and vLLM's MLA compute it
    a.mla = {
        "kv_lora_rank": _int(cfg, "kv_lora_rank") or 0,
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": v,
        "mla_softmax_scale": scale,
    }
    if (q := _int(cfg, "q_lora_rank")) is not None:
        a.mla["q_lora_rank"] = q
    a.attention["mla"] = a.layers
    # DeepSeek's rope dims rotate adjacent pairs (rope_interleave); vLLM runs MiniCPM3's neox.
    a.rope_style = "interleaved" if cfg.get("rope_interleave") else "neox"


def _read_mlp(a: Arch, cfg: dict[str, Any], mt: str | None) -> None:
    experts = _int(cfg, "num_experts", "n_routed_experts", "num_local_experts")
    act = cfg.get("hidden_activation") or cfg.get("hidden_act")
    if mt == "gpt_oss":
        a.act = "swiglu_oai"  # clamp(swiglu_limit), gate·sigmoid(1.702·gate)·(up + 1), biases
        a.read.append(
            f"gpt-oss's clamped SwiGLU (swiglu_limit {cfg.get('swiglu_limit')}) with biases"
        )
        a.refused["act_silu"] = "gpt-oss's clamped SwiGLU with biases is not silu(gate)·up"
    elif isinstance(act, str) and act in _ACTS:
        a.act = _ACTS[act]
        if a.act != "silu":
            a.refused["act_silu"] = f"hidden_act {act} (a GeGLU MLP)"
    else:
        a.refused["act_silu"] = f"hidden_act {act!r} has no task"
    width = _int(cfg, "intermediate_size")
    n = a.layers
    if not experts:
        a.dense_layers, a.dense_width = n, width
        return
    a.experts = experts
    a.top_k = _int(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk")
    a.expert_width = _int(cfg, "moe_intermediate_size", "expert_intermediate_size") or width
    is_moe = [True] * n
    if mt in ("deepseek_v3", "glm4_moe"):
        k, freq = _int(cfg, "first_k_dense_replace") or 0, _int(cfg, "moe_layer_freq") or 1
        is_moe = [i >= k and i % freq == 0 for i in range(n)]
        a.read.append(f"first_k_dense_replace {k}: {n - sum(is_moe)} dense layers")
    elif mt in ("qwen3_moe", "qwen3_next"):
        step = _int(cfg, "decoder_sparse_step") or 1
        only = set(cfg.get("mlp_only_layers") or [])
        is_moe = [i not in only and (i + 1) % step == 0 for i in range(n)]
    elif mt == "llama4_text":
        step = _int(cfg, "interleave_moe_layer_step") or 1
        is_moe = [i % step == step - 1 for i in range(n)]
        width = _int(cfg, "intermediate_size_mlp")  # the dense layers' width
        a.shared_width = a.expert_width  # one shared expert as wide as a routed one
        a.read.append(f"interleave_moe_layer_step {step}: {sum(is_moe)} MoE layers")
    elif mt not in ("gpt_oss", "mixtral"):
        a.read.append(f"model type {mt}: every layer taken as MoE")
    a.moe_layers = sum(is_moe)
    a.dense_layers = n - a.moe_layers
    a.dense_width = width if a.dense_layers else None
    if (ns := _int(cfg, "n_shared_experts")) and a.expert_width:
        a.shared_width = ns * a.expert_width
    elif s := _int(cfg, "shared_expert_intermediate_size"):
        a.shared_width = s
    _read_router(a, cfg, mt)
    a.expert_bias = mt == "gpt_oss"


def _read_router(a: Arch, cfg: dict[str, Any], mt: str | None) -> None:
    if mt in ("deepseek_v3", "glm4_moe") and cfg.get("scoring_func", "sigmoid") == "sigmoid":
        a.router = "sigmoid_grouped"
        a.n_group, a.topk_group = _int(cfg, "n_group") or 1, _int(cfg, "topk_group") or 1
        a.scaling = _float(cfg, "routed_scaling_factor") or 1.0
    elif mt == "llama4_text":
        a.router = "sigmoid_top1"  # sigmoid of the chosen logits, no renormalisation
        a.refused["router_softmax"] = "Llama-4 routes by the sigmoid of the top-k logits"
    elif cfg.get("norm_topk_prob") is False and mt in ("qwen3_moe", "qwen2_moe"):
        a.refused["router_softmax"] = "norm_topk_prob false: the top-k weights are not renormalised"
    else:
        a.router = "softmax"  # softmax, top-k, renormalised (gpt-oss: softmax of the top-k)


def _read_formats(a: Arch, cfg: dict[str, Any]) -> None:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        a.linear_format = a.expert_format = {"float16": "fp16", "float32": "fp32"}.get(
            dtype, "bf16"
        )
        return
    method = str(q.get("quant_method"))
    if method == "fp8" and list(q.get("weight_block_size") or []) == [128, 128]:
        a.linear_format = a.expert_format = "fp8_block"
    elif method == "mxfp4":
        a.expert_format = "mxfp4"  # attention, router, embeddings and lm_head stay bf16
    elif method == "compressed-tensors" and _int4_weights(q):
        a.expert_format = "int4"  # W4A16 experts (Kimi-K2-Thinking); the rest bf16
    else:
        a.linear_format = a.expert_format = method
    a.read.append(
        f"quantization_config {method}: linear layers {a.linear_format}, experts {a.expert_format}"
    )


def _int4_weights(q: dict[str, Any]) -> bool:
    groups = q.get("config_groups") or {}
    return any(
        isinstance(g, dict)
        and (g.get("weights") or {}).get("num_bits") == 4
        and (g.get("weights") or {}).get("type") == "int"
        for g in groups.values()
    )
