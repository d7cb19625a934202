"""The `sim:` devices' time model: counts in, predicted microseconds out. Pure functions.

A Triton launch takes

    t = launch + max(terms) + OVERLAP × (sum(terms) − max(terms))
    terms = t_tensor, t_alu, t_sfu, t_dram, t_l2, t_latency, t_thread

The binding term sets the time, but the others are not hidden completely: a unit's warps stall
on each resource in turn, so a share (`OVERLAP`) of every other term shows. This also breaks
the ties a hard max leaves between variants bound by the same term.

- programs run in waves over the multiprocessors: `occupancy` programs fit on one at a time
  (bounded by warps, registers and shared memory from the AOT compile), so a launch of P
  programs takes ceil(P / (units × occupancy)) waves; throughput terms are quantized per unit
  (ceil(P / units) programs' work on the busiest one);
- t_tensor: dot FLOPs at the target's matrix peak for the operand dtype × `mma_eff`, halved
  where the compiler fell back from the target's fast matrix instruction (mma.sync on Hopper);
- t_dram: each tensor's bytes once (see sim_count) at the HBM bandwidth × `dram_eff`;
- t_l2: the busiest unit's requested 32-byte sectors (and spilled registers, stored and
  reloaded) at its share of the L2 bandwidth: what feeds a tile's dots, so small tiles (more
  bytes per FLOP) are bound here rather than on the matrix units;
- t_latency: a latency-bound floor: waves × load instructions per program × `latency_us`,
  divided by the pipelining depth (num_stages - 1): what a kernel with little parallelism
  (one row per program, a long K loop at M=1) pays;
- t_thread: one program's own instruction stream: waves × the ALU operations each thread runs
  (a special-function operation counting as 1 / SFU_PER_ALU of them) × DEP_CYCLES clocks each:
  what many elements per thread (a large BLOCK on few warps) costs;
- launch: `launch_us`.

Torch work (the baseline, or torch ops a candidate runs) takes, per library call,
`lib_launch_us` × sqrt(ops) + max(FLOPs / (peak × `lib_mm_eff`), bytes / (HBM × `lib_mem_eff`)):
the vendor library's measured efficiency.

The constants are fitted on H200 timings (bench/sim_fit.py, core/data/sim_constants.json) and
travel in the job; this module is also what the fit evaluates, so the two cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

SECTOR = 32
SLOW_MMA_FACTOR = (
    0.5  # mma.sync on Hopper, or no matrix instruction: about half of wgmma's rate (estimate)
)
UNKNOWN_MMA_FACTOR = 0.75  # no AOT compile: between the two
DEFAULT_REGISTERS = 128  # per thread, when the AOT compile did not run
SFU_PER_ALU = 1 / 8  # special-function units: 16 per SM per clock against 128 FP32 lanes (Hopper)
OVERLAP = 0.3  # share of each non-binding term the binding one does not hide (not fitted: held-out figures are flat from 0.2 to 0.45)
DEP_CYCLES = 4  # clocks between dependent arithmetic instructions of one thread (Hopper FP32 pipeline latency, public microbenchmarks)
MAX_STAGES = 8  # pipelining depth beyond which nothing more overlaps (tuned kernels use 2-7)
SCHEDULERS = 4  # warp schedulers per unit (NVIDIA SM sub-partitions, AMD SIMDs): the clock is the lane rate / (4 × warp size)


@dataclass(frozen=True)
class Constants:
    """The fitted constants (at most six), plus the band a prediction is reported with."""

    launch_us: float = 3.3
    dram_eff: float = (
        1.0  # not fitted: the measured copy bandwidth is the ceiling (the fit pinned it at 1)
    )
    mma_eff: float = 0.75
    latency_us: float = 0.7
    lib_launch_us: float = 5.0
    lib_mm_eff: float = 0.75
    lib_mem_eff: float = 0.8
    glue_launch_us: float = 3.3  # a torch kernel a candidate launches around its own (fitted on the baselines run as candidates)
    # Where the GPU would replay the workload from a CUDA graph (a roofline under 50 µs: the
    # arena's timer), kernels start back to back: a launch costs less. 0: as eager.
    launch_graph_us: float = 0.0  # a Triton launch inside a graph
    glue_graph_us: float = 0.0  # a torch kernel inside a graph
    next_graph_us: float = (
        0.0  # each kernel after the first of one call inside a graph (back to back)
    )
    # The vendor library behind a candidate's torch calls (glue_time), by what the call does:
    gemm_eff: float = (
        0.75  # share of the matrix peak a cuBLAS GEMM reaches (mm, matmul, bmm, linear, ...)
    )
    gemm_mem_eff: float = (
        0.8  # share of HBM bandwidth a memory-bound GEMM (a GEMV at decode) reaches
    )
    gemm_fixed_us: float = (
        0.0  # what a GEMM costs beyond one launch (cuBLAS picks and sets up a kernel)
    )
    attn_eff: float = (
        0.5  # share of the matrix peak fused attention (scaled_dot_product_attention) reaches
    )
    sort_fixed_us: float = 0.0  # a sort, top-k or sampling call: several kernels (radix passes)
    sort_mem_eff: float = 0.8  # share of HBM bandwidth per pass of a sort
    reduce_mem_eff: float = (
        0.8  # share of HBM bandwidth a reduction (sum, amax, vector norms, softmax, cumsum) reaches
    )
    glue_mem_eff: float = (
        0.8  # share of HBM bandwidth any other torch kernel (elementwise, gathers, copies) reaches
    )
    band: float = (
        0.35  # ± of a prediction with Triton launches (80th percentile of held-out errors)
    )
    lib_band: float = 0.5  # ± of a prediction of torch work alone (the baseline)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Constants:
        return cls(**{k: float(v) for k, v in data.items() if k in cls.__dataclass_fields__})

    def with_values(self, **values: float) -> Constants:
        return Constants(**{**asdict(self), **values})


@dataclass(frozen=True)
class Target:
    """The simulated GPU: peaks, units and per-unit limits (resolved by the engine)."""

    key: str
    units: int
    bf16_tflops: float
    fp8_tflops: float | None
    fp32_tflops: float
    hbm_tbps: float
    l2_tbps: float
    warp_size: int = 32
    max_warps_per_unit: int = 64
    registers_per_unit: int = 65536
    shared_per_unit: int = 233472
    fast_mma: str = "wgmma"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def dot_tflops(self, dtype: str) -> float:
        """Matrix-engine peak for a dot's operand dtype (fp32 operands run as TF32: half of bf16)."""
        if dtype.startswith("fp8"):
            return self.fp8_tflops or self.bf16_tflops
        if dtype in ("bf16", "fp16"):
            return self.bf16_tflops
        if dtype in ("fp32", "tf32"):
            return self.bf16_tflops / 2
        return self.fp32_tflops  # integer or fp64 dots: the vector rate


@dataclass
class Breakdown:
    """A predicted time and why: the binding term and every term."""

    time_us: float
    bound: str
    terms_us: dict[str, float] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "time_us": self.time_us,
            "bound": self.bound,
            "terms_us": self.terms_us,
            **self.detail,
        }


def occupancy(
    target: Target, warps: int, registers: int | None, shared: int | None
) -> tuple[int, str]:
    """Programs resident on one unit at a time, and what limits it."""
    limits = {"warps": target.max_warps_per_unit // max(warps, 1)}
    regs = registers if registers else DEFAULT_REGISTERS
    limits["registers"] = target.registers_per_unit // max(regs * target.warp_size * warps, 1)
    if shared:
        limits["shared memory"] = target.shared_per_unit // shared
    by, n = min(limits.items(), key=lambda kv: kv[1])
    return max(1, n), by


def launch_time(
    summary: dict[str, Any], resources: dict[str, Any] | None, target: Target, c: Constants
) -> Breakdown:
    """Predicted time of one Triton launch from its counts (`sim_count.Launch.summary()`) and
    its compiled resources (`sim_aot.Resources.to_json()`, or None)."""
    res = resources or {}
    p = summary["per_program"]
    programs = max(int(summary["programs"]), 1)
    warps = int(res.get("num_warps") or summary.get("options", {}).get("num_warps", 4))
    stages = int(res.get("num_stages") or summary.get("options", {}).get("num_stages", 3))
    occ, limited_by = occupancy(
        target,
        warps,
        res.get("registers") if res.get("ok") else None,
        res.get("shared_bytes") if res.get("ok") else None,
    )
    per_unit = math.ceil(programs / target.units)  # programs the busiest unit runs
    waves = math.ceil(programs / (target.units * occ))
    mma = res.get("mma") if res.get("ok") else "unknown"
    factor = (
        1.0
        if mma == target.fast_mma
        else UNKNOWN_MMA_FACTOR
        if mma == "unknown"
        else SLOW_MMA_FACTOR
    )
    t_tensor = 0.0
    for dtype, flops in (p.get("dot_flops") or {}).items():
        rate = target.dot_tflops(dtype) * 1e12 * c.mma_eff * factor / target.units
        t_tensor += per_unit * flops / rate * 1e6
    alu_rate = target.fp32_tflops / 2 * 1e12 / target.units  # lane operations per second per unit
    t_alu = per_unit * p.get("alu_ops", 0.0) / alu_rate * 1e6
    t_sfu = per_unit * p.get("sfu_ops", 0.0) / (alu_rate * SFU_PER_ALU) * 1e6
    t_dram = summary.get("dram_bytes", 0.0) / (target.hbm_tbps * 1e12 * c.dram_eff) * 1e6
    threads = target.warp_size * warps
    spill = (
        (res.get("spill_bytes") or 0) * threads * 2 if res.get("ok") else 0
    )  # per program, stored and reloaded
    l2_bytes = (p.get("load_sectors", 0.0) + p.get("store_sectors", 0.0)) * SECTOR + spill
    t_l2 = per_unit * l2_bytes / (target.l2_tbps * 1e12 / target.units) * 1e6
    # Pipelining overlaps the loads of a loop's next iterations: a kernel without a loop has
    # nothing to overlap, whatever num_stages it asks for (a parameter the model must not take on trust).
    # More stages than a loop has iterations, or than any tuned Triton kernel uses (MAX_STAGES), overlap nothing more.
    depth = (
        min(stages, MAX_STAGES, max(1, int(p.get("loop_iterations", 0.0))))
        if p.get("loop_iterations", 0.0) > 1
        else 1
    )
    t_latency = waves * p.get("loads", 0.0) * c.latency_us / max(1, depth - 1)
    clock = alu_rate / (SCHEDULERS * target.warp_size)
    per_thread = (p.get("alu_ops", 0.0) + p.get("sfu_ops", 0.0) / SFU_PER_ALU) / threads
    t_thread = waves * per_thread * DEP_CYCLES / clock * 1e6
    terms = {
        "tensor": t_tensor,
        "alu": t_alu,
        "sfu": t_sfu,
        "dram": t_dram,
        "l2": t_l2,
        "latency": t_latency,
        "thread": t_thread,
    }
    bound = max(terms, key=lambda k: terms[k])
    busy = terms[bound] + OVERLAP * (sum(terms.values()) - terms[bound])
    launches = int(
        summary.get("merged", 1) or 1
    )  # several launches billed as one entry (sim_count.merged_summary)
    return Breakdown(
        time_us=c.launch_us * launches + busy,
        bound=bound,
        terms_us=terms,
        detail={
            "kernel": summary.get("kernel"),
            "grid": summary.get("grid"),
            "programs": programs,
            "sampled": summary.get("sampled"),
            "occupancy": occ,
            "occupancy_limited_by": limited_by,
            "waves": waves,
            "mma": mma,
            "num_warps": warps,
            "num_stages": stages,
        },
    )


def torch_op_time(op: dict[str, Any], target: Target, c: Constants) -> Breakdown:
    """Predicted time of one aten op ({name, flops, bytes, dtype}) run by the vendor library."""
    flops, nbytes = float(op.get("flops", 0.0)), float(op.get("bytes", 0.0))
    t_compute = (
        flops / (target.dot_tflops(op.get("dtype") or "bf16") * 1e12 * c.lib_mm_eff) * 1e6
        if flops
        else 0.0
    )
    t_memory = nbytes / (target.hbm_tbps * 1e12 * c.lib_mem_eff) * 1e6
    terms = {"compute": t_compute, "memory": t_memory}
    bound = max(terms, key=lambda k: terms[k])
    # A library call that is several kernels (`x + r` then `rms_norm`; the ops counted on the
    # CPU stand in for them) pays a launch each: the square root of the op count, since the CPU
    # decomposes what a GPU library fuses.
    launches = math.sqrt(max(1.0, float(op.get("ops", 1))))
    return Breakdown(
        time_us=c.lib_launch_us * launches + terms[bound],
        bound=bound,
        terms_us=terms,
        detail={"op": op.get("name"), "launches": launches},
    )


GLUE_MEM_EFF = 0.8  # share of HBM bandwidth one torch elementwise/copy kernel reaches (estimate: large copies reach 85-90% on the H200)
GEMM_CALLS = {
    "mm",
    "matmul",
    "__matmul__",
    "__rmatmul__",
    "bmm",
    "addmm",
    "baddbmm",
    "addbmm",
    "linear",
    "einsum",
    "mv",
    "addmv",
    "_grouped_mm",
    "_scaled_mm",
    "_scaled_grouped_mm",
}
ATTENTION_CALLS = {"scaled_dot_product_attention", "varlen_attn", "flex_attention"}
SORT_CALLS = {"sort", "argsort", "topk", "msort", "kthvalue", "unique", "multinomial"}
REDUCE_CALLS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "norm",
    "linalg_vector_norm",
    "vector_norm",
    "softmax",
    "log_softmax",
    "cumsum",
    "var",
    "std",
    "logsumexp",
    "prod",
    "any",
    "all",
}


def glue_kind(name: str) -> str:
    """What kind of library kernel a torch call is: `gemm`, `attention`, `sort`, `reduce` or
    `other` (elementwise, gathers, copies)."""
    base = name.rsplit(".", 1)[-1]
    if base in GEMM_CALLS:
        return "gemm"
    if base in ATTENTION_CALLS or base.startswith("_scaled_dot_product"):
        return "attention"
    if base in SORT_CALLS:
        return "sort"
    if base in REDUCE_CALLS:
        return "reduce"
    return "other"


def glue_time(op: dict[str, Any], target: Target, c: Constants, graph: bool = False) -> Breakdown:
    """A torch call a candidate makes (a pure-PyTorch candidate: every call): one launch
    (`glue_launch_us`, or `glue_graph_us` where the GPU replays the workload from a CUDA graph)
    plus what the vendor kernel behind it costs, by kind (`glue_kind`): a GEMM at the library's
    share of the matrix peak or, memory-bound, of HBM bandwidth, plus its set-up; fused attention
    at its share of the matrix peak; a sort's fixed passes plus its bytes; anything else its
    bytes near HBM bandwidth. Fitted on the H200 timings of the baselines submitted as
    candidates (bench/sim_heldout.py fit)."""
    flops, nbytes = float(op.get("flops", 0.0)), float(op.get("bytes", 0.0))
    kind = glue_kind(str(op.get("name") or ""))
    peak = target.dot_tflops(op.get("dtype") or "bf16") * 1e12
    hbm = target.hbm_tbps * 1e12
    fixed = 0.0
    if kind == "gemm":
        terms = {
            "compute": flops / (peak * c.gemm_eff) * 1e6 if flops else 0.0,
            "memory": nbytes / (hbm * c.gemm_mem_eff) * 1e6,
        }
        fixed = c.gemm_fixed_us
    elif kind == "attention":
        terms = {
            "compute": flops / (peak * c.attn_eff) * 1e6 if flops else 0.0,
            "memory": nbytes / (hbm * GLUE_MEM_EFF) * 1e6,
        }
    elif kind == "sort":
        terms = {"compute": 0.0, "memory": nbytes / (hbm * c.sort_mem_eff) * 1e6}
        fixed = c.sort_fixed_us
    else:
        eff = c.reduce_mem_eff if kind == "reduce" else c.glue_mem_eff
        terms = {
            "compute": flops / (peak * c.lib_mm_eff) * 1e6 if flops else 0.0,
            "memory": nbytes / (hbm * eff) * 1e6,
        }
    bound = max(terms, key=lambda k: terms[k])
    launch = c.glue_graph_us if graph and c.glue_graph_us > 0 else c.glue_launch_us
    return Breakdown(
        time_us=launch + fixed + terms[bound],
        bound=bound,
        terms_us=terms,
        detail={"op": op.get("name"), "launches": 1, "kind": kind},
    )


def predict_side(
    launches: list[tuple[dict[str, Any], dict[str, Any] | None]],
    torch_ops: list[dict[str, Any]],
    target: Target,
    c: Constants,
    graph: bool = False,
) -> dict[str, Any]:
    """One side of a workload (the candidate's launches and torch ops, or the baseline's ops),
    run one after the other on one stream: the sum. JSON-ready, with the ± band. `graph`: the
    GPU would time this workload as a CUDA graph replay (its roofline is under 50 µs), where
    launches cost `launch_graph_us` and `glue_graph_us` (where fitted)."""
    if graph and c.launch_graph_us > 0:
        c = c.with_values(launch_us=c.launch_graph_us)
    # In a graph the kernels after the first start back to back: a call of eight small kernels
    # replays in far less than eight times one kernel's replay (`next_graph_us`, where fitted).
    later = (
        c.with_values(launch_us=c.next_graph_us, glue_launch_us=c.next_graph_us, glue_graph_us=0.0)
        if graph and c.next_graph_us > 0
        else c
    )
    parts = [launch_time(s, r, target, c if i == 0 else later) for i, (s, r) in enumerate(launches)]
    parts += [
        (
            glue_time(op, target, c if not parts and i == 0 else later, graph)
            if op.get("glue")
            else torch_op_time(op, target, c)
        )
        for i, op in enumerate(torch_ops)
    ]
    total = sum(b.time_us for b in parts)
    slowest = max(parts, key=lambda b: b.time_us) if parts else None
    band = (
        c.band if launches or all(op.get("glue") for op in torch_ops) else c.lib_band
    )  # the library formula's band is the baseline's
    return {
        "median_us": total,
        "low_us": total / (1 + band),
        "high_us": total * (1 + band),
        "band": band,
        "timing": "predicted",
        "bound": slowest.bound if slowest else None,
        "kernels": [b.to_json() for b in parts[:32]],
        "launches": len(parts),
    }
