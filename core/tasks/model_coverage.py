"""The coverage table: per model, which of its operations have task rows and what share of its
decode and prefill time the catalogue covers, at the zoo's serving point (core/tasks/model_zoo.py).

Each operation's time is its roofline on the serving GPU, max(FLOPs / peak, bytes / bandwidth),
at that operation's size in one GPU's share of the serving point (the formulas below count what
the tasks' formulas count: each weight read once, activations in and out), times the layers that
run it. An operation is covered in a phase when a task whose section names that phase holds a
row of it (visible, hidden or a model row). The tensor-parallel collectives are listed but not
timed: a GPU's compute is what the shares divide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.model.task import Task
from core.tasks.model_config import ModelConfig
from core.tasks.model_ops import Op
from core.tasks.model_rows import _label, _ops, section_keys
from core.tasks.model_zoo import Serving
from core.tasks.vocabulary import PHASES

BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
# Weight bytes per element by format (MXFP4 and INT4: 4 bits plus a scale per 32).
_WEIGHT_BYTES = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,
    "fp8_block": 1.0,
    "mxfp4": 0.53,
    "int4": 0.53,
}


@dataclass
class OpShare:
    op: Op
    seconds: dict[str, float]  # phase -> seconds per forward pass (all its layers)
    tasks: dict[str, list[str]] = field(default_factory=dict)  # phase -> task ids with a row

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.op.kind,
            "note": self.op.note,
            "layers": self.op.layers,
            "us": {p: s * 1e6 for p, s in self.seconds.items()},
            "tasks": self.tasks,
        }


@dataclass
class Coverage:
    model: str
    ops: list[OpShare]

    def share(self, phase: str) -> float:
        total = sum(o.seconds[phase] for o in self.ops)
        covered = sum(o.seconds[phase] for o in self.ops if o.tasks.get(phase))
        return covered / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "covered": {p: self.share(p) for p in PHASES},
            "operations": [o.to_json() for o in self.ops],
        }


def _weights(op: Op) -> str:
    fmt = next((k[len("weights_") :] for k in op.keys if k.startswith("weights_")), "bf16")
    return fmt


def op_seconds(op: Op, s: Serving, peaks: Any, phase: str) -> float:
    """One layer's time for `op` at the serving point: its roofline."""
    flops, nbytes, peak = op_cost(op, s, phase)
    if op.kind == "tp_all_reduce":
        return 0.0
    compute = (peaks.compute_tflops(peak) or peaks.bf16_tflops) * 1e12
    return max(flops / compute, nbytes / (peaks.hbm_tbps * 1e12))


def op_cost(op: Op, s: Serving, phase: str) -> tuple[float, float, str]:
    """(FLOPs, bytes, peak) of one layer of `op` in one GPU's share of the serving point."""
    k = op.keys
    decode = phase == "decode"
    t = float(s.batch if decode else s.prompt)  # tokens this step

    def g(name: str) -> float:
        return float(k.get(name, 0))

    fmt = _weights(op)
    wb, peak = _WEIGHT_BYTES.get(fmt, 2.0), ("fp8" if fmt == "fp8_block" else "bf16")
    h = g("hidden_size")
    kind = op.kind
    if kind == "linear":
        n, kk = g("out_features"), g("in_features")
        return 2 * t * n * kk, wb * n * kk + 2 * t * (n + kk), peak
    if kind == "lm_head":
        rows = s.batch if decode else 1  # a prompt's logits: its last token only
        return 2 * rows * g("vocab_size") * h, 2 * g("vocab_size") * h + 2 * rows * h, "bf16"
    if kind == "sampling":
        rows = s.batch if decode else 1
        return 5 * rows * g("vocab_size"), 4 * rows * g("vocab_size"), "fp32"
    if kind == "attention":
        hq, hkv, d = g("num_heads"), g("num_kv_heads"), g("head_dim")
        w = g("sliding_window") or g("attention_chunk_size") or math.inf
        if decode:
            ctx = min(s.context, w)
            return (
                4 * s.batch * hq * d * ctx,
                4 * s.batch * ctx * hkv * d + 4 * s.batch * hq * d,
                "bf16",
            )
        return (
            4 * hq * d * _pairs(s.prompt, w, chunked="attention_chunk_size" in k),
            4 * s.prompt * (hq + hkv) * d,
            "bf16",
        )
    if kind == "mla_attention":
        hq, lat = g("num_heads"), g("kv_lora_rank") + g("qk_rope_head_dim")
        if decode:
            flops = 2 * s.batch * hq * s.context * (lat + g("kv_lora_rank"))
            return flops, 2 * s.batch * s.context * lat + 2 * s.batch * hq * 2 * lat, "bf16"
        qk, v = g("qk_nope_head_dim") + g("qk_rope_head_dim"), g("v_head_dim")
        pairs = _pairs(s.prompt, math.inf)
        return 2 * hq * pairs * (qk + v), 2 * s.prompt * hq * (2 * qk + 2 * v), "bf16"
    if kind == "linear_attention":
        nk, nv = g("linear_num_key_heads"), g("linear_num_value_heads")
        dk, dv = g("linear_key_head_dim"), g("linear_value_head_dim")
        if decode:  # the recurrent state, float32, read and written once per token
            return (
                6 * s.batch * nv * dk * dv,
                8 * s.batch * nv * dk * dv + 4 * s.batch * (nk * dk + nv * dv),
                "bf16",
            )
        return t * nv * (4 * dk * dv + 128 * (dk + dv)), 2 * t * (2 * nk * dk + 2 * nv * dv), "bf16"
    if kind == "rope":
        heads = g("num_heads") + g("num_kv_heads")
        rot = g("rotary_dim") or g("head_dim")
        return 3 * t * heads * rot, 4 * t * heads * g("head_dim"), "fp32"
    if kind == "kv_cache_write":
        width = (
            2 * g("num_kv_heads") * g("head_dim")
            if "head_dim" in k
            else g("kv_lora_rank") + g("qk_rope_head_dim")
        )
        return 0.0, 4 * t * width, "fp32"
    if kind == "rmsnorm":
        return 5 * t * h, 8 * t * h, "fp32"
    if kind == "act_mul":
        return 4 * t * g("width"), 6 * t * g("width"), "fp32"
    if kind == "router":
        return 8 * t * g("num_experts"), 8 * t * g("num_experts"), "fp32"
    if kind == "moe":
        e, kk, i = g("num_experts"), g("top_k"), g("expert_intermediate_size")
        local = e / s.expert_parallel
        routed = t * kk  # T tokens per GPU over all E: T·K rows on each GPU's E/8 experts
        touched = local * (1 - (1 - kk / e) ** (t * s.expert_parallel))
        return 6 * routed * h * i, wb * 3 * h * i * touched + 4 * routed * h, peak
    return 0.0, 0.0, "bf16"


def _pairs(n: int, window: float, chunked: bool = False) -> float:
    """Query-key pairs of a causal prefill of n tokens: a window caps each query's keys; a
    chunk restarts them every `window` tokens."""
    if window >= n:
        return n * (n + 1) / 2
    if chunked:
        return (n // window) * window * (window + 1) / 2 + ((n % window) * (n % window + 1)) / 2
    return window * n - window * (window - 1) / 2


def covered_by(task: Task, config: ModelConfig) -> dict[int, list[str]]:
    """Which of `config`'s operations (by index in config.ops) have a row in `task`, and for
    which phases."""
    rows = {w.label for w in (*task.gpu.visible, *task.gpu.hidden.fixed, *task.model_rows)}
    found: dict[int, list[str]] = {}
    for section in task.model_workloads:
        for op in _ops(section, config):
            if op is None:
                continue
            keys, _ = section_keys(section, config, op)
            if keys is None:
                continue
            try:
                mine = {_label(r) for r in section.workloads(keys)}
            except (KeyError, ValueError):
                continue
            if mine & rows:
                found.setdefault(config.ops.index(op), []).extend(section.phases)
    return found


def coverage(config: ModelConfig, tasks: list[Task], serving: Serving, peaks: Any) -> Coverage:
    shares = [
        OpShare(op, {p: op.layers * op_seconds(op, serving, peaks, p) for p in PHASES})
        for op in config.ops
    ]
    for task in tasks:
        for index, phases in covered_by(task, config).items():
            for p in phases:
                shares[index].tasks.setdefault(p, []).append(task.id)
    return Coverage(config.name, shares)


def h200_peaks(gpu: str = "h200") -> Any:
    """The serving GPU's speed-of-light peaks (measured where recorded, else spec)."""
    from core.devices.device import info_from_probe

    names = {"h200": "NVIDIA H200", "h100": "NVIDIA H100 80GB HBM3"}
    info = info_from_probe(gpu, {"type": "cuda", "vendor": "nvidia", "model": names.get(gpu, gpu)})
    if info.sol_peaks is None:
        raise LookupError(f"core/data/peaks.yaml has no `{gpu}` entry")
    return info.sol_peaks


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def table(covs: list[Coverage], serving: Serving) -> str:
    """The markdown coverage table for docs/tasks.md."""
    lines = [
        f"Serving point: one {serving.gpu.upper()}, decode of {serving.batch} sequences at "
        f"{serving.context} tokens of context, prefill of one {serving.prompt}-token prompt, "
        f"experts at expert_parallel {serving.expert_parallel}; each operation timed at its "
        "roofline (core/tasks/model_coverage.py). *uncovered* lists the largest operations "
        "without a task row, with their share of decode / prefill time.",
        "",
        "| model | decode covered | prefill covered | largest uncovered operations (decode / prefill) |",
        "| --- | ---: | ---: | --- |",
    ]
    for c in covs:
        total = {p: sum(o.seconds[p] for o in c.ops) or 1.0 for p in PHASES}
        gaps = [  # uncovered somewhere, and at least half a percent of that phase's time
            o
            for o in c.ops
            if o.op.kind != "tp_all_reduce"
            and any(not o.tasks.get(p) and o.seconds[p] >= 0.005 * total[p] for p in PHASES)
        ]
        gaps.sort(key=lambda o: -max(o.seconds[p] / total[p] for p in PHASES if not o.tasks.get(p)))
        text = ", ".join(
            f"{o.op.note} ({'/'.join('–' if o.tasks.get(p) else _pct(o.seconds[p] / total[p]) for p in PHASES)})"
            for o in gaps[:4]
        )
        lines.append(
            f"| {c.model} | {_pct(c.share('decode'))} | {_pct(c.share('prefill'))} | {text or 'none'} |"
        )
    return "\n".join(lines) + "\n"


ZOO_INTRO = """## The model zoo and its coverage

`tasks/models.yaml` lists the models the catalogue follows, each with its config.json as its
authors publish it. `arena tasks add-model --zoo` reads every one, lists the operations each
runs (every linear layer, each attention layer type, the routed experts, the norms, ...),
writes each operation's shapes as rows of the tasks that implement it (task.yaml
`workloads.models`, each row first run at a small size by the task's own reference and
baseline, and never one they reject), and rewrites the table below. A model row is public and
not timed by evaluations (`--visible` puts rows in the visible set instead);
docs/task-format.md ("model_workloads") says how a task maps operations to its axes, and
`arena tasks add-model CONFIG.json` does the same for a model of your own.
"""


def zoo_section(tasks: list[Task], zoo_file: Path | None = None) -> str:
    """docs/tasks.md's zoo section: the intro, and the coverage table between its markers."""
    from core.tasks.model_zoo import read_zoo

    zoo = read_zoo(zoo_file)
    peaks = h200_peaks(zoo.serving.gpu)
    covs = [coverage(m, tasks, zoo.serving, peaks) for m in zoo.models]
    return f"{ZOO_INTRO}\n{BEGIN}\n{table(covs, zoo.serving)}{END}\n"


def write_table(doc: Path, text: str) -> bool:
    """Replace the text between the coverage markers of `doc`; False where it has none."""
    content = doc.read_text()
    if BEGIN not in content or END not in content:
        return False
    head, rest = content.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + "\n" + text + END + tail)
    return True
