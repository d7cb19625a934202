"""The operations a model runs, one `Op` per distinct operation of one forward pass (each linear
layer, each attention layer type, the routed experts, ...), with the normalized keys a task's
`model_workloads` section derives its axes from (core/tasks/vocabulary.py's MODEL_KEYS) and how
many times a forward pass runs it. core/tasks/model_rows.py turns them into task rows,
core/tasks/model_coverage.py into each operation's share of serving time."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.tasks.model_arch import Arch

Keys = dict[str, float]


@dataclass(frozen=True)
class Op:
    kind: str  # one of vocabulary.OP_KINDS
    note: str  # which one: "qkv_proj", "sliding-window attention", ...
    keys: Keys  # the model-wide keys plus the operation's own
    layers: int  # how many times one forward pass runs it
    own: Keys = field(default_factory=dict)  # the operation's own keys (shown by --json)


def _traits(a: Arch) -> Keys:
    t: Keys = {}
    if a.act:
        t[f"act_{a.act}"] = 1
    if a.qk_norm:
        t[f"qk_{a.qk_norm}norm"] = 1
    if a.sinks:
        t["attention_sinks"] = 1
    if a.softcap:
        t["attention_softcap"] = 1
    if a.q_gate:
        t["q_gate"] = 1
    if a.router:
        t[f"router_{a.router}"] = 1
    return t


def model_keys(a: Arch) -> Keys:
    """The model-wide keys: sizes every operation may use, and the traits."""
    k: Keys = {"hidden_size": a.hidden, "num_layers": a.layers}
    for name, value in (
        ("vocab_size", a.vocab),
        ("max_position_embeddings", a.max_pos),
        ("num_heads", a.heads),
        ("num_kv_heads", a.kv_heads),
        ("head_dim", a.head_dim),
        ("rotary_dim", a.rotary_dim),
        ("intermediate_size", a.dense_width),
        ("num_experts", a.experts),
        ("top_k", a.top_k),
        ("expert_intermediate_size", a.expert_width),
        ("shared_expert_intermediate_size", a.shared_width),
        ("routed_scaling_factor", a.scaling),
    ):
        if value is not None:
            k[name] = value
    if a.router == "sigmoid_grouped":
        k["n_group"], k["topk_group"] = a.n_group or 1, a.topk_group or 1
    if a.mla:
        k.update(a.mla)
        k["mla"] = 1
    k.update(a.linear_attn)
    k.update(_traits(a))
    return k


def legacy_keys(a: Arch) -> Keys:
    """The keys of a section without `op` (one row set per model): the model-wide keys, plus the
    window and chunk where some layer has one, and weights_fp8_block for an fp8 model."""
    k = model_keys(a)
    if a.linear_format == "fp8_block":
        k["weights_fp8_block"] = 1
    if a.window:
        k["sliding_window"] = a.window
    if a.chunk:
        k["attention_chunk_size"] = a.chunk
    return k


def operations(a: Arch) -> list[Op]:
    base = model_keys(a)
    ops: list[Op] = []

    def add(kind: str, note: str, layers: int, **own: float) -> None:
        if layers > 0:
            ops.append(Op(kind, note, {**base, **own}, layers, dict(own)))

    def linear(note: str, k_in: int, n_out: int, layers: int, fmt: str | None = None) -> None:
        fmt = fmt or a.linear_format
        add("linear", note, layers, in_features=k_in, out_features=n_out, **{f"weights_{fmt}": 1})

    bias = {"bias": 1} if a.attention_bias else {}
    gqa = sum(n for t, n in a.attention.items() if t in ("full", "sliding", "chunked"))
    if gqa and a.heads and a.kv_heads and a.head_dim:
        hq, hkv, d = a.heads, a.kv_heads, a.head_dim
        q_out = hq * d * (2 if a.q_gate else 1)
        add(
            "linear",
            "qkv_proj" + (" (+ the gate)" if a.q_gate else ""),
            gqa,
            in_features=a.hidden,
            out_features=q_out + 2 * hkv * d,
            **{f"weights_{a.linear_format}": 1},
            **bias,
        )
        linear("o_proj", hq * d, a.hidden, gqa)
        names = {
            "full": "full attention",
            "sliding": "sliding-window attention",
            "chunked": "chunked attention",
        }
        for t in ("full", "sliding", "chunked"):
            own: Keys = {}
            if t == "sliding" and a.window:
                own["sliding_window"] = a.window
            if t == "chunked" and a.chunk:
                own["attention_chunk_size"] = a.chunk
            add("attention", names[t], a.attention.get(t, 0), **own)
        style = {f"rope_{a.rope_style}": 1}
        if a.rotary_dim and a.rotary_dim < d:
            style["rope_partial"] = (
                1  # RoPE on rotary_dim of the head's dims, the rest passed through
            )
        add("rope", "rope" + (" + q/k norm" if a.qk_norm else ""), gqa - a.nope_layers, **style)
        add("kv_cache_write", "kv cache", gqa)
    if a.mla:
        _mla_ops(a, add, linear)
    if a.linear_attn and (n := a.attention.get("linear", 0)):
        la = a.linear_attn
        nk, nv = la.get("linear_num_key_heads", 0), la.get("linear_num_value_heads", 0)
        dk, dv = la.get("linear_key_head_dim", 0), la.get("linear_value_head_dim", 0)
        linear("linear attention in_proj_qkvz", a.hidden, 2 * nk * dk + 2 * nv * dv, n)
        linear("linear attention in_proj_ba", a.hidden, 2 * nv, n)
        linear("linear attention out_proj", nv * dv, a.hidden, n)
        add("linear_attention", "gated delta rule", n)
    fp8 = {"weights_fp8_block": 1} if a.linear_format == "fp8_block" else {}
    norms = 4 if a.model_type == "gemma3_text" else 2  # Gemma norms before and after each block
    add("rmsnorm", "residual add + RMSNorm", norms * a.layers + 1, **fp8)
    if a.dense_layers and a.dense_width:
        linear("gate_up_proj", a.hidden, 2 * a.dense_width, a.dense_layers)
        linear("down_proj", a.dense_width, a.hidden, a.dense_layers)
        add("act_mul", "MLP activation", a.dense_layers, width=a.dense_width, **fp8)
    if a.moe_layers and a.experts:
        m = a.moe_layers
        linear("router gate", a.hidden, a.experts, m, "bf16")
        add("router", "routing", m)
        own = {f"weights_{a.expert_format}": 1}
        if a.expert_bias:
            own["bias"] = 1
        add("moe", "routed experts", m, **own)
        if a.shared_width:
            linear("shared expert gate_up_proj", a.hidden, 2 * a.shared_width, m)
            linear("shared expert down_proj", a.shared_width, a.hidden, m)
            add("act_mul", "shared expert activation", m, width=a.shared_width, **fp8)
    if a.vocab:
        add("lm_head", "lm_head", 1)
        add("sampling", "sampling", 1)
    add("tp_all_reduce", "tensor-parallel all-reduce", 2 * a.layers)
    return ops


def _mla_ops(a: Arch, add, linear) -> None:  # type: ignore[no-untyped-def]
    m = a.mla
    h = a.heads or 0
    n = a.attention.get("mla", 0)
    kv, nope, rope, v = (
        int(m["kv_lora_rank"]),
        int(m["qk_nope_head_dim"]),
        int(m["qk_rope_head_dim"]),
        int(m["v_head_dim"]),
    )
    q = int(m["q_lora_rank"]) if "q_lora_rank" in m else None
    if q:  # q_a and kv_a read the same input: one fused GEMM in production (vLLM, SGLang)
        linear("MLA fused_qkv_a_proj", a.hidden, q + kv + rope, n)
        linear("MLA q_b_proj", q, h * (nope + rope), n)
    else:
        linear("MLA q_proj", a.hidden, h * (nope + rope), n)
        linear("MLA kv_a_proj", a.hidden, kv + rope, n)
    linear("MLA kv_b_proj", kv, h * (nope + v), n)
    linear("MLA o_proj", h * v, a.hidden, n)
    add("mla_attention", "latent attention", n)
    # The rope dims of q and k: H query heads and one key head of qk_rope_head_dim.
    add(
        "rope",
        "MLA rope",
        n,
        num_kv_heads=1,
        head_dim=rope,
        rotary_dim=rope,
        **{f"rope_{a.rope_style}": 1},
    )
    add("kv_cache_write", "MLA latent cache", n)
