"""The calibration corpus the sim: model asks for: about 150 Triton variants across the task
families, timed on a real GPU the arena's way, in one device call of at most 10 minutes.

    PYTHONPATH=. python3 bench/sim_collect_gpu.py --device cuda:0 --out $OUT [--budget-s 480]
    PYTHONPATH=. python3 bench/sim_collect_gpu.py --device cpu --out /tmp/c --per-family 2   # dry run
    PYTHONPATH=. python3 bench/sim_collect_gpu.py --device cuda:0 --out $OUT --set validation

Variants are bundled starters with their tuning knobs rewritten (tile sizes, warps, stages),
each written as a candidate file under --out/variants. Where a starter picks its tiles by
device type (`if gpu else`), both branches get the variant's tiles: the sim counts a kernel on
CPU tensors, so the CPU branch is what bench/sim_fit.py's features count. Families: gemm (bf16_gemm, small_m_gemm,
fp8_blockscale_gemm), attention (prefill_gqa, decode_paged_gqa), moe (fused_moe), activation
(silu_mul), norm (add_rmsnorm) and elementwise (rope). Variants are visited round-robin over
the tasks, so a spent budget leaves every family represented.

`--set validation` times a second corpus instead (VALIDATION, about 75 variants): kernels the fit
never sees (bf16_grouped_gemm, fp8_blockscale_grouped_gemm, mla_decode,
prefill_sliding_window_sinks, silu_mul_fp8_quant, rmsnorm_fp8_quant, route_topk_softmax,
kv_cache_write), for an honest out-of-sample figure; fit on the calibration set, score on this.
The output JSON's `set` says which corpus it holds.

Each variant first runs once on its task's first workload and must agree with the unmodified
starter there (a rewrite that breaks the kernel would otherwise poison the fit with a fast,
wrong time); then it is timed on up to three of the task's GPU workloads with the harness's own
timer (core.harness.timing.time_calls: fresh inputs per call, device events, L2 flushed; CUDA
graphs below 50 µs, as the arena does), median kept. Writes --out/sim_collect.json and
--out/variants.tar.gz (the variant files; commit both side by side), whose
`records` bench/sim_fit.py reads with `features --extra` (candidate paths are relative to the
JSON's folder). Stops starting variants once --budget-s is spent, keeping what it measured.
On `--device cpu` it runs the kernels in Triton's interpreter at the tasks' CPU sizes: a check
that every rewrite applies and agrees, not a measurement.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import statistics
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch

from core.evaluation.job import GRAPH_BELOW_US, spec_json
from core.harness import inputs, timing
from core.model.task import Task
from core.model.workload import Workload
from core.tasks.discovery import find_task

WORKLOADS_PER_VARIANT = 3
Variants = Iterator[tuple[str, str]]


class RewriteError(ValueError):
    """A knob's text was not found in the starter: the starter changed, fix the pattern."""


def rewrite(source: str, old: str, new: str) -> str:
    if source.count(old) != 1:
        raise RewriteError(
            f"expected exactly one {old!r} in the starter, found {source.count(old)}"
        )
    return source.replace(old, new)


def bf16_gemm(source: str) -> Variants:
    tiles = [
        (32, 32, 32),
        (64, 64, 32),
        (64, 64, 64),
        (128, 64, 32),
        (64, 128, 32),
        (128, 128, 32),
        (128, 128, 64),
        (128, 256, 64),
    ]
    for (bm, bn, bk), warps, stages in itertools.product(tiles, (4, 8), (2, 3, 4)):
        if bm * bn >= 128 * 128 and warps == 4 and stages == 2:
            continue
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32",
            f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, {bk}",
        )
        src = rewrite(
            src,
            "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,",
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps}, num_stages={stages},",
        )
        yield f"bm{bm}_bn{bn}_bk{bk}_w{warps}_s{stages}", src


def small_m_gemm(source: str) -> Variants:
    for (bn, bk), warps in itertools.product(
        [(32, 64), (64, 64), (64, 128), (128, 64), (128, 128), (32, 256)], (4, 8)
    ):
        src = rewrite(source, "BLOCK_N, BLOCK_K = 64, 64", f"BLOCK_N, BLOCK_K = {bn}, {bk}")
        src = rewrite(
            src,
            "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,",
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps},",
        )
        yield f"bn{bn}_bk{bk}_w{warps}", src


def fp8_blockscale_gemm(source: str) -> Variants:
    # BLOCK_K stays 128: it is the scale block, one scale per K step
    for (bm, bn), warps, stages in itertools.product(
        [(32, 64), (64, 64), (64, 128), (128, 64), (128, 128)], (4, 8), (2, 3)
    ):
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 128",
            f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, 128",
        )
        src = rewrite(
            src,
            "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,",
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps}, num_stages={stages},",
        )
        yield f"bm{bm}_bn{bn}_w{warps}_s{stages}", src


def prefill_gqa(source: str) -> Variants:
    for (bm, bn), warps, stages in itertools.product(
        [(32, 64), (64, 32), (64, 64), (128, 64), (128, 32)], (4, 8), (1, 2)
    ):
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N = (64, 64) if gpu else (32, 32)",
            f"BLOCK_M, BLOCK_N = ({bm}, {bn}) if gpu else ({bm}, {bn})",
        )
        src = rewrite(src, "num_warps=4, num_stages=2,", f"num_warps={warps}, num_stages={stages},")
        yield f"bm{bm}_bn{bn}_w{warps}_s{stages}", src


def decode_paged_gqa(source: str) -> Variants:
    for block_n, warps in itertools.product((16, 32, 64, 128), (1, 2, 4, 8)):
        src = rewrite(
            source,
            'BLOCK_N = 64 if q.device.type != "cpu" else 32',
            f'BLOCK_N = {block_n} if q.device.type != "cpu" else {block_n}',
        )
        src = rewrite(
            src,
            "BLOCK_D=max(16, triton.next_power_of_2(D)),\n    )",
            f"BLOCK_D=max(16, triton.next_power_of_2(D)), num_warps={warps},\n    )",
        )
        yield f"bn{block_n}_w{warps}", src


def fused_moe(source: str) -> Variants:
    for (bn, bk), warps in itertools.product(
        [(32, 64), (64, 32), (64, 64), (128, 64), (128, 128)], (4, 8)
    ):
        src = rewrite(
            source,
            'BN, BK = (128, 128) if a.device.type == "cpu" else (64, 32)',
            f'BN, BK = ({bn}, {bk}) if a.device.type == "cpu" else ({bn}, {bk})',
        )
        src = rewrite(
            src,
            "MUL_WEIGHT=mul_weight, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,",
            f"MUL_WEIGHT=mul_weight, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps={warps},",
        )
        yield f"bn{bn}_bk{bk}_w{warps}", src


def silu_mul(source: str) -> Variants:
    for block, warps in itertools.product([256, 512, 1024, 2048, 4096], [1, 2, 4, 8, 16]):
        src = rewrite(source, "BLOCK = 1024", f"BLOCK = {block}")
        src = rewrite(src, "BLOCK=BLOCK)", f"BLOCK=BLOCK, num_warps={warps})")
        yield f"block{block}_w{warps}", src


def add_rmsnorm(source: str) -> Variants:
    for warps in (1, 2, 4, 8, 16, 32):
        yield (
            f"w{warps}",
            rewrite(source, "num_warps=8 if BLOCK >= 4096 else 4", f"num_warps={warps}"),
        )


def rope(source: str) -> Variants:
    for warps in (1, 2, 4, 8):
        yield (
            f"w{warps}",
            rewrite(
                source,
                "BLOCK_D=triton.next_power_of_2(half),\n    )",
                f"BLOCK_D=triton.next_power_of_2(half), num_warps={warps},\n    )",
            ),
        )


# --- the validation set: starters the fit never sees, for an honest out-of-sample figure ---


def mla_decode(source: str) -> Variants:
    # BLOCK_H ≥ 16 (tl.dot's smallest M); 64 × 64 is left out: with Triton's default pipelining its
    # 72 KB K tiles and the 64-head q would not fit an H200's 228 KB of shared memory
    for (bh, bn), warps in itertools.product(
        [(16, 16), (16, 32), (16, 64), (32, 32), (32, 64), (64, 32)], (4, 8)
    ):
        src = rewrite(
            source, "BLOCK_H = 16\n    BLOCK_N = 32", f"BLOCK_H = {bh}\n    BLOCK_N = {bn}"
        )
        src = rewrite(
            src,
            "BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, num_warps=8,",
            f"BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, num_warps={warps},",
        )
        yield f"bh{bh}_bn{bn}_w{warps}", src


def prefill_sliding_window_sinks(source: str) -> Variants:
    for (bm, bn), warps, stages in itertools.product(
        [(32, 64), (64, 64), (128, 64)], (4, 8), (1, 2)
    ):
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N = (64, 64) if gpu else (32, 32)",
            f"BLOCK_M, BLOCK_N = ({bm}, {bn}) if gpu else ({bm}, {bn})",
        )
        src = rewrite(src, "num_warps=4, num_stages=2,", f"num_warps={warps}, num_stages={stages},")
        yield f"bm{bm}_bn{bn}_w{warps}_s{stages}", src


def bf16_grouped_gemm(source: str) -> Variants:
    # BLOCK_M 16 is for decode, where most groups hold one or two rows
    for (bm, bn, bk), warps, stages in itertools.product(
        [(16, 64, 128), (32, 64, 64), (64, 128, 64), (128, 128, 64)], (4, 8), (2, 3)
    ):
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 64",
            f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, {bk}",
        )
        src = rewrite(
            src,
            "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,",
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps}, num_stages={stages},",
        )
        yield f"bm{bm}_bn{bn}_bk{bk}_w{warps}_s{stages}", src


def fp8_blockscale_grouped_gemm(source: str) -> Variants:
    # BLOCK_M divides 128 (a tile reads one expert per 128-row block); BLOCK_K stays the 128 scale block
    for (bm, bn), warps, stages in itertools.product(
        [(32, 64), (64, 128), (128, 128)], (4, 8), (2, 3)
    ):
        src = rewrite(
            source,
            "BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 128",
            f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, 128",
        )
        src = rewrite(
            src,
            "BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,",
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps}, num_stages={stages},",
        )
        yield f"bm{bm}_bn{bn}_w{warps}_s{stages}", src


def rmsnorm_fp8_quant(source: str) -> Variants:
    for warps in (1, 2, 4, 8, 16, 32):
        yield (
            f"w{warps}",
            rewrite(source, "num_warps=8 if BLOCK >= 4096 else 4", f"num_warps={warps}"),
        )


def silu_mul_fp8_quant(source: str) -> Variants:
    # BLOCK a power of two and a multiple of the 128-wide group
    for block, warps in itertools.product([256, 1024, 4096], [1, 4, 8]):
        src = rewrite(source, "BLOCK = 1024", f"BLOCK = {block}")
        src = rewrite(
            src,
            "BLOCK=BLOCK, GROUP_SIZE=GROUP, FP8_MAX=448.0,",
            f"BLOCK=BLOCK, GROUP_SIZE=GROUP, FP8_MAX=448.0, num_warps={warps},",
        )
        yield f"block{block}_w{warps}", src


def route_topk_softmax(source: str) -> Variants:
    for rows, warps in itertools.product((1, 4, 16), (1, 4)):
        src = rewrite(
            source,
            'rows = 16 if x.device.type == "cpu" else 1',
            f'rows = {rows} if x.device.type == "cpu" else {rows}',
        )
        src = rewrite(
            src,
            "BLOCK_K=triton.next_power_of_2(top_k),",
            f"BLOCK_K=triton.next_power_of_2(top_k), num_warps={warps},",
        )
        yield f"rows{rows}_w{warps}", src


def kv_cache_write(source: str) -> Variants:
    for warps in (1, 2, 4, 8):
        yield (
            f"w{warps}",
            rewrite(
                source,
                "BLOCK=triton.next_power_of_2(HD),\n    )",
                f"BLOCK=triton.next_power_of_2(HD), num_warps={warps},\n    )",
            ),
        )


FAMILIES: dict[str, Callable[[str], Variants]] = {
    "gemm/bf16_gemm": bf16_gemm,
    "attention/prefill_gqa": prefill_gqa,
    "activation/silu_mul": silu_mul,
    "gemm/fp8_blockscale_gemm": fp8_blockscale_gemm,
    "attention/decode_paged_gqa": decode_paged_gqa,
    "moe/fused_moe": fused_moe,
    "gemm/small_m_gemm": small_m_gemm,
    "norm/add_rmsnorm": add_rmsnorm,
    "elementwise/rope": rope,
}

# kernels the fit never sees (no starter in common with FAMILIES): an honest out-of-sample figure
VALIDATION: dict[str, Callable[[str], Variants]] = {
    "gemm/bf16_grouped_gemm": bf16_grouped_gemm,
    "attention/prefill_sliding_window_sinks": prefill_sliding_window_sinks,
    "activation/silu_mul_fp8_quant": silu_mul_fp8_quant,
    "gemm/fp8_blockscale_grouped_gemm": fp8_blockscale_grouped_gemm,
    "attention/mla_decode": mla_decode,
    "moe/route_topk_softmax": route_topk_softmax,
    "norm/rmsnorm_fp8_quant": rmsnorm_fp8_quant,
    "elementwise/kv_cache_write": kv_cache_write,
}
# --- the held-out set (issue 22): the shipped starters beside rewrites that put work in torch
# glue around the kernel (unfused, copies, gathers) and the baselines submitted as candidates:
# what the simulated speedup of a candidate is validated on (bench/sim_validate.py).


def _starter_and_baseline(task_id: str) -> Variants:
    task = find_task(task_id)
    yield "starter", task.file("starter.py").read_text()
    yield "baseline", task.file("baseline.py").read_text()


def silu_mul_heldout(source: str) -> Variants:
    yield from _starter_and_baseline("activation/silu_mul")
    # copies around the kernel: gate and up made contiguous apart, then joined again
    yield (
        "glue_split",
        rewrite(
            source,
            "    x = x.contiguous()  # x is [T, 2I]: gate = x[:, :I], up = x[:, I:]\n",
            "    gate, up = x.chunk(2, dim=-1)\n    x = torch.cat([gate.contiguous(), up.contiguous()], dim=-1)\n",
        ),
    )
    # unfused: torch's silu, then a Triton multiply
    yield (
        "unfused_torch_silu",
        """import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _mul_kernel(g_ptr, x_ptr, out_ptr, I, stride_xt, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    g = tl.load(g_ptr + row * I + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_xt + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * I + cols, (g * up).to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    g = F.silu(x[:, :inter].float()).contiguous()
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    _mul_kernel[(T, triton.cdiv(inter, 1024))](g, x, out, inter, x.stride(0), BLOCK=1024)
    return out
""",
    )


def add_rmsnorm_heldout(source: str) -> Variants:
    yield from _starter_and_baseline("norm/add_rmsnorm")
    # unfused: the residual add in torch, the kernel normalises it (adding zeros)
    yield (
        "unfused_add",
        rewrite(
            source,
            "    x, residual, weight = x.contiguous(), residual.contiguous(), weight.contiguous()\n",
            "    x, weight = (x + residual).contiguous(), weight.contiguous()\n    residual = torch.zeros_like(x)\n",
        ),
    )


def rope_heldout(source: str) -> Variants:
    yield from _starter_and_baseline("elementwise/rope")
    # a torch gather of the cos/sin rows, then the kernel reads row t for token t
    yield (
        "glue_gather",
        rewrite(
            source,
            "    cache = cos_sin_cache.contiguous()\n",
            "    cache = cos_sin_cache[positions].contiguous()\n    positions = torch.arange(T, device=q.device)\n",
        ),
    )


def _baseline_only(task_id: str) -> Callable[[str], Variants]:
    def make(_source: str) -> Variants:
        yield "baseline", find_task(task_id).file("baseline.py").read_text()

    return make


HELDOUT: dict[str, Callable[[str], Variants]] = {
    "activation/silu_mul": silu_mul_heldout,
    "norm/add_rmsnorm": add_rmsnorm_heldout,
    "elementwise/rope": rope_heldout,
    **{
        t: _baseline_only(t)
        for t in (
            "gemm/bf16_gemm",
            "gemm/small_m_gemm",
            "attention/prefill_gqa",
            "moe/route_topk_softmax",
            "elementwise/kv_cache_write",
        )
    },
}


def rope_qknorm_heldout(source: str) -> Variants:
    for warps in (1, 2, 8):
        yield (
            f"w{warps}",
            rewrite(
                source,
                "        BLOCK_D=triton.next_power_of_2(half),\n    )",
                f"        BLOCK_D=triton.next_power_of_2(half), num_warps={warps},\n    )",
            ),
        )


def route_grouped_topk_heldout(source: str) -> Variants:
    for rows, warps in ((1, 1), (4, 4), (16, 4)):
        src = rewrite(source, 'rows = 16 if x.device.type == "cpu" else 1', f"rows = {rows}")
        yield (
            f"rows{rows}_w{warps}",
            rewrite(
                src,
                "            BLOCK_K=triton.next_power_of_2(top_k),\n        )",
                f"            BLOCK_K=triton.next_power_of_2(top_k), num_warps={warps},\n        )",
            ),
        )


def align_permute_heldout(source: str) -> Variants:
    for block in (128, 1024, 4096):
        yield (
            f"block{block}",
            rewrite(
                source,
                "BLOCK, BLOCK_E = 256, triton.next_power_of_2(E)",
                f"BLOCK, BLOCK_E = {block}, triton.next_power_of_2(E)",
            ),
        )


# tile and warp variants of starters with no variant in either corpus (a second held-out call)
HELDOUT_TILES: dict[str, Callable[[str], Variants]] = {
    "elementwise/rope_qknorm": rope_qknorm_heldout,
    "moe/route_grouped_topk": route_grouped_topk_heldout,
    "moe/align_permute": align_permute_heldout,
}
SETS: dict[str, dict[str, Callable[[str], Variants]]] = {
    "calibration": FAMILIES,
    "validation": VALIDATION,
    "heldout": HELDOUT,
    "heldout_tiles": HELDOUT_TILES,
}


@dataclass
class Variant:
    task: Task
    name: str
    source: str


def round_robin(
    per_family: int | None, families: dict[str, Callable[[str], Variants]] = FAMILIES
) -> Iterator[Variant]:
    """Every task's variants, interleaved: the first of each task, then the second, ..."""
    queues = []
    for task_id, make in families.items():
        task = find_task(task_id)
        made = [Variant(task, name, src) for name, src in make(task.file("starter.py").read_text())]
        queues.append(made[:per_family] if per_family else made)
    for row in itertools.zip_longest(*queues):
        yield from (v for v in row if v is not None)


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def fresh_inputs(task: Task, w: Workload, device: torch.device) -> inputs.FreshInputs:
    specs = [spec_json(s) for s in task.inputs]
    shapes = task.tensor_shapes(w.axes)
    custom = (
        load(task.file("inputs.py"), f"inputs_{task.id.replace('/', '_')}").make_inputs
        if task.file("inputs.py").is_file()
        else None
    )
    return inputs.FreshInputs(specs, {"axes": w.axes, "shapes": shapes}, 1234, device, custom)


def outputs_of(run: Any, fresh: inputs.FreshInputs) -> list[torch.Tensor]:
    # the same inputs for both sides (index 0); copies, since some tasks write in place
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in fresh(0)]
    out = run(*args)
    return [
        t.float() if t.is_floating_point() else t
        for t in (out if isinstance(out, (tuple, list)) else (out,))
    ]


def disagreement(variant: list[torch.Tensor], starter: list[torch.Tensor]) -> str | None:
    """None when the variant computes what the starter computes (up to accumulation order)."""
    for i, (v, s) in enumerate(zip(variant, starter)):
        if v.shape != s.shape:
            return f"output {i}: shape {tuple(v.shape)} != {tuple(s.shape)}"
        if s.is_floating_point():
            scale = s.abs().max().item() or 1.0
            err = (v - s).abs().max().item() / scale
            if not err <= 2e-2:
                return f"output {i}: max error {err:.3g} of the largest value"
        elif not torch.equal(v, s):
            return f"output {i}: integer outputs differ"
    return None


def time_variant(run: Any, fresh: inputs.FreshInputs, device: torch.device) -> dict[str, Any]:
    first = timing.time_calls(run, fresh, device, 20.0, 3, 1000, 0, graph=False)
    graph = statistics.median(first["times_us"]) < GRAPH_BELOW_US
    times: list[float] = []
    mode = first["mode"]
    for r in range(3):  # three rounds of about 20 ms, as the arena's alternations
        out = timing.time_calls(run, fresh, device, 20.0, 3, 1000, (r + 1) * 100_000, graph=graph)
        times += out["times_us"]
        mode = out["mode"]
    return {**timing.summarize(times), "mode": mode}


def collect(
    v: Variant, path: Path, device: torch.device, starters: dict[str, Any]
) -> list[dict[str, Any]]:
    sets = v.task.workloads(cpu=device.type == "cpu")
    visible = list(sets.visible)
    workloads = visible[:: max(1, len(visible) // WORKLOADS_PER_VARIANT)][:WORKLOADS_PER_VARIANT]
    base = {"task": v.task.id, "variant": v.name, "candidate": str(path)}
    try:
        run = load(path, f"variant_{v.task.id.replace('/', '_')}_{v.name}").run
        fresh = fresh_inputs(v.task, workloads[0], device)
        if v.task.id not in starters:
            starters[v.task.id] = load(
                v.task.file("starter.py"), f"starter_{v.task.id.replace('/', '_')}"
            ).run
        wrong = disagreement(outputs_of(run, fresh), outputs_of(starters[v.task.id], fresh))
        if wrong:
            return [
                {**base, "error": f"disagrees with the starter on {workloads[0].label}: {wrong}"}
            ]
        records = []
        for w in workloads:
            fig = time_variant(run, fresh_inputs(v.task, w, device), device)
            records.append(
                {
                    **base,
                    "label": w.label,
                    "axes": w.axes,
                    "median_us": fig["median_us"],
                    "spread": fig["spread"],
                    "mode": fig["mode"],
                }
            )
        return records
    except Exception as exc:  # noqa: BLE001 - a variant that does not compile or run is recorded and skipped
        return [{**base, "error": f"{type(exc).__name__}: {exc}"[:300]}]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--budget-s", type=float, default=480.0, help="start no variant after this many seconds"
    )
    parser.add_argument(
        "--per-family",
        type=int,
        default=None,
        help="at most this many variants per task (a dry run)",
    )
    parser.add_argument(
        "--set",
        choices=sorted(SETS),
        default="calibration",
        help="which variants: the fit's own, or the out-of-sample check",
    )
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        name = torch.cuda.get_device_name(device)
    else:
        from core.harness.triton_cpu import enable_interpreter

        enable_interpreter()  # before any variant is imported
        name = "cpu (Triton interpreter, CPU sizes: a dry run)"
    started = time.monotonic()
    (args.out / "variants").mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    starters: dict[str, Any] = {}
    out_json = args.out / "sim_collect.json"
    variants = list(round_robin(args.per_family, SETS[args.set]))
    for n, v in enumerate(variants, 1):
        if time.monotonic() - started > args.budget_s:
            print(
                f"budget of {args.budget_s:.0f} s spent: {n - 1} of {len(variants)} variants timed",
                flush=True,
            )
            break
        rel = Path("variants") / f"{v.task.id.replace('/', '__')}__{v.name}.py"
        (args.out / rel).write_text(v.source)
        t0 = time.monotonic()
        got = collect(v, args.out / rel, device, starters)
        records += [{**r, "candidate": str(rel)} for r in got]
        out_json.write_text(
            json.dumps(
                {
                    "device": name,
                    "torch": torch.__version__,
                    "set": args.set,
                    "budget_s": args.budget_s,
                    "records": records,
                },
                indent=1,
            )
        )
        status = got[0].get("error") or " ".join(f"{r['median_us']:.1f}" for r in got) + " µs"
        print(
            f"[{n}/{len(variants)}] {time.monotonic() - started:6.1f} s (+{time.monotonic() - t0:4.1f}) {v.task.id} {v.name}: {status}",
            flush=True,
        )
    with tarfile.open(
        args.out / "variants.tar.gz", "w:gz"
    ) as tar:  # the form bench/sim_fit.py reads, one file to carry
        tar.add(args.out / "variants", arcname="variants")
    errors = sum(1 for r in records if "error" in r)
    print(
        f"{len(records) - errors} timings, {errors} variants failed; wrote {out_json}", flush=True
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
