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
# The normalized model-config keys a `model_workloads` section may use; core/tasks/model_config.py
# maps Hugging Face config.json names onto them (docs/task-format.md).
MODEL_KEYS = (
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "num_experts",
    "top_k",
    "expert_intermediate_size",
    "n_group",
    "topk_group",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
    "sliding_window",
    "vocab_size",
)
