"""The vocabulary of task.yaml: the families a task may belong to, the files a task folder holds,
and the values its fields may take (dtypes, peaks, languages, baseline kinds, collectives, init
distributions, model-config keys). core/tasks/spec.py and core/tasks/sections.py check against them."""

FAMILIES = ("gemm", "attention", "moe", "norm", "activation", "elementwise", "sampling", "comm")
# Families of tasks that `arena import` writes from other benchmarks' sets (core/importers/):
# never bundled, and `arena tasks new` does not scaffold them.
IMPORTED_FAMILIES = ("kernelbench", "agentkernelarena")
TASK_FILES = ("task.yaml", "reference.py", "baseline.py", "starter.py")
BASELINE_KINDS = ("vendor_library", "vendor_kernel_library", "torch_composition")
LANGUAGES = ("triton", "pytorch", "cuda", "hip")
PEAKS = (
    "bf16",
    "fp8",
    "fp32",
    "link",
)  # `link`: a collective's bus bandwidth against the scale-up link
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DTYPES = (
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
)
INIT_DISTS = {"normal": ("mean", "std"), "uniform": ("low", "high"), "randint": ("low", "high")}
WORKLOAD_META = ("model", "note")
# The normalized model keys a `model_workloads` section may use; core/tasks/model_config.py
# maps Hugging Face config.json names onto them and core/tasks/model_ops.py gives each of a
# model's operations its own (docs/task-format.md lists what each means). A trait (a key that
# is there or not, value 1) says which variant of an operation the model runs.
MODEL_KEYS = (
    # sizes, model-wide
    "hidden_size",
    "vocab_size",
    "num_layers",
    "max_position_embeddings",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "rotary_dim",
    "intermediate_size",
    "num_experts",
    "top_k",
    "expert_intermediate_size",
    "shared_expert_intermediate_size",
    "n_group",
    "topk_group",
    "routed_scaling_factor",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "mla_softmax_scale",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    # sizes of one operation
    "sliding_window",
    "attention_chunk_size",
    "in_features",
    "out_features",
    "local_experts",
    "width",
    # traits
    "act_silu",
    "act_gelu_tanh",
    "act_swiglu_oai",
    "rope_neox",
    "rope_interleaved",
    "rope_partial",
    "qk_rmsnorm",
    "qk_l2norm",
    "attention_sinks",
    "attention_softcap",
    "bias",
    "q_gate",
    "router_softmax",
    "router_sigmoid_grouped",
    "router_sigmoid_top1",
    "weights_bf16",
    "weights_fp8_block",
    "weights_mxfp4",
    "weights_int4",
    "mla",
)
# The kinds of operation a model runs (core/tasks/model_ops.py), which a section's `op` names;
# `model` gives one row set per model from the model-wide keys.
OP_KINDS = (
    "model",
    "linear",
    "lm_head",
    "attention",
    "mla_attention",
    "linear_attention",
    "rope",
    "kv_cache_write",
    "rmsnorm",
    "act_mul",
    "router",
    "moe",
    "sampling",
    "tp_all_reduce",
)
PHASES = ("decode", "prefill")
