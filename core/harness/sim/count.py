"""Count what Triton kernels do, program by program, in Triton's interpreter (the `sim:` devices).

While a `Counting` is active, every Triton launch in this process is recorded instead of being
run in full: a launch of P programs runs all of them when P is small, and otherwise a stratified
sample in the GPU's dispatch order (x fastest), enlarged where the sampled programs differ
(causal attention, skewed MoE). For each program run it counts what a GPU would have to do:

- bytes loaded and stored (active lanes only: masked-out lanes move nothing),
- the 32-byte sectors each access touches (uncoalesced or strided access touches more),
- the sectors each tensor argument gives up (its footprint, for the DRAM term),
- dot FLOPs by operand dtype, elementwise ALU operations and special-function (exp, log,
  sqrt, ...) operations, atomics, and the number of load instructions (a latency proxy).

Counts are taken at the interpreter's builder layer, so they see exactly the operations the
kernel executes on the sampled programs. `tl.dot` is stubbed out while counting (its values are
not needed for a prediction, and it is the interpreter's most expensive operation): a kernel
whose control flow depends on a dot's result is counted on zeros there.

Runs inside the candidate's worker (it executes the candidate's kernels). Imports only numpy,
torch and triton: the harness is shipped alone.
"""

from __future__ import annotations

import functools
import inspect
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SECTOR = 32  # bytes: the unit of a GPU memory transaction (NVIDIA sector; AMD reads 64 B lines)
FULL_GRID = 16  # a launch of at most this many programs is run whole (a larger one is sampled, and grown where its programs differ)
FIRST_SAMPLE = 8  # programs sampled first from a larger launch
MAX_SAMPLE = 32  # ... and at most this many when they differ
ENLARGE_CV = 0.1  # coefficient of variation of the per-program work above which the sample grows
SPARSE_SAMPLE = (
    1024  # ... and at most this many where most of them are idle (returned early), time allowing
)
IDLE_SHARE = 0.01  # a program with less work than this share of the busiest one's is idle
EMPTY_WORK = (
    8 * 32
)  # work (ProgramCounts.work) of a program that only read a few indices and returned
EMPTY_BUDGET_S = 0.25  # interpreter seconds a launch may spend looking for its first busy program
SPARSE_BUDGET_S = 0.5  # ... and growing a sample of mostly idle programs (about 350 of them)
INTERIOR_SAMPLE = (
    2  # a counted loop of more iterations runs its first, its last, and this many drawn between
)
PROGRAM_BUDGET_S = (
    1.0  # interpreter seconds one launch may spend on its sample before it stops growing
)
SFU_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "sin", "cos"}
_MARK = "_sim_count_patched"
EXACT_STORES_CAP = (
    1 << 21
)  # stored element addresses kept per launch for the value check (sim_values)


@dataclass
class ProgramCounts:
    """What one program did."""

    load_bytes: float = 0.0
    store_bytes: float = 0.0
    load_sectors: float = 0.0
    store_sectors: float = 0.0
    loads: int = 0
    stores: int = 0
    dot_flops: dict[str, float] = field(default_factory=dict)
    alu_ops: float = 0.0
    sfu_ops: float = 0.0
    atomics: float = 0.0
    loop_iterations: float = (
        0.0  # `range`/`tl.range` iterations (pipelining needs a loop to overlap)
    )
    tensor_bytes: dict[str, float] = field(
        default_factory=dict
    )  # sector bytes requested, by tensor argument (+ STORED for writes)

    def work(self) -> float:
        """One number for 'how much this program does', to see whether programs differ."""
        return (
            self.load_sectors * SECTOR
            + self.store_sectors * SECTOR
            + sum(self.dot_flops.values()) / 64
            + self.alu_ops / 8
        )

    def add(self, other: ProgramCounts, factor: float) -> None:
        """Add `factor` times `other` (the counts of loop iterations that were not run)."""
        for key in NUMERIC:
            setattr(self, key, getattr(self, key) + factor * getattr(other, key))
        for attr in ("dot_flops", "tensor_bytes"):
            mine = getattr(self, attr)
            for k, v in getattr(other, attr).items():
                mine[k] = mine.get(k, 0.0) + factor * v

    def minus(self, other: ProgramCounts) -> ProgramCounts:
        out = ProgramCounts(**{k: getattr(self, k) - getattr(other, k) for k in NUMERIC})
        for attr in ("dot_flops", "tensor_bytes"):
            mine, theirs = getattr(self, attr), getattr(other, attr)
            setattr(out, attr, {k: v - theirs.get(k, 0.0) for k, v in mine.items()})
        return out

    def copy(self) -> ProgramCounts:
        out = ProgramCounts(**{k: getattr(self, k) for k in NUMERIC})
        out.dot_flops, out.tensor_bytes = dict(self.dot_flops), dict(self.tensor_bytes)
        return out


NUMERIC = (
    "load_bytes",
    "store_bytes",
    "load_sectors",
    "store_sectors",
    "loads",
    "stores",
    "alu_ops",
    "sfu_ops",
    "atomics",
    "loop_iterations",
)
STORED = "\x00stored"  # suffix of a tensor's written sectors in ProgramCounts.tensor_bytes


@dataclass
class TensorArg:
    """A tensor argument of a launch: its name and address range."""

    name: str
    start: int
    end: int


@dataclass
class Launch:
    """One kernel launch: what it is (for the AOT compile) and what its sampled programs did."""

    kernel: str
    fn: Callable[..., Any]
    grid: tuple[int, int, int]
    bound: dict[str, Any]
    options: dict[str, Any]
    tensors: list[TensorArg]
    programs: list[ProgramCounts] = field(default_factory=list)
    interpreter_s: float = 0.0
    # For the value check (sim_values): when the launch started (one clock with the torch ops),
    # the addresses its exact programs stored (by item size), and how many programs were not
    # exact (a loop's iterations skipped, a stubbed dot, an atomic): their values are not the GPU's.
    seq: int = 0
    exact_stores: dict[int, list[np.ndarray]] = field(default_factory=dict)
    inexact: int = 0
    stores_dropped: bool = False

    @property
    def whole(self) -> bool:
        """Every program ran, exactly, and every address it stored is known."""
        return (
            len(self.programs) == self.num_programs and not self.inexact and not self.stores_dropped
        )

    @property
    def num_programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def summary(self) -> dict[str, Any]:
        """Per-program means, launch totals (means × programs), and DRAM footprint: JSON-ready."""
        n = max(len(self.programs), 1)
        scale = self.num_programs / n
        mean = lambda key: sum(getattr(p, key) for p in self.programs) / n
        dots: dict[str, float] = {}
        for p in self.programs:
            for dtype, flops in p.dot_flops.items():
                dots[dtype] = dots.get(dtype, 0.0) + flops / n
        works = [p.work() for p in self.programs]
        avg = sum(works) / n if works else 0.0
        cv = (math.sqrt(sum((w - avg) ** 2 for w in works) / n) / avg) if avg > 0 else 0.0
        # DRAM: each tensor's requested sectors over all programs, but never more than the
        # tensor itself (a tile that several programs, or one program twice, read again is
        # taken to hit in L2: the perfect-reuse assumption; docs/simulation.md), once for what
        # is read and once for what is written: a tensor updated in place crosses HBM twice.
        sizes = {t.name: float(t.end - t.start) for t in self.tensors}
        requested: dict[str, float] = {}
        for p in self.programs:
            for name, b in p.tensor_bytes.items():
                requested[name] = requested.get(name, 0.0) + b * scale
        footprint = sum(
            min(b, sizes.get(name.removesuffix(STORED), math.inf)) for name, b in requested.items()
        )
        return {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "programs": self.num_programs,
            "sampled": len(self.programs),
            "work_cv": cv,
            "options": dict(self.options),
            "per_program": {
                "load_bytes": mean("load_bytes"),
                "store_bytes": mean("store_bytes"),
                "load_sectors": mean("load_sectors"),
                "store_sectors": mean("store_sectors"),
                "loads": mean("loads"),
                "stores": mean("stores"),
                "dot_flops": dots,
                "alu_ops": mean("alu_ops"),
                "sfu_ops": mean("sfu_ops"),
                "atomics": mean("atomics"),
                "loop_iterations": mean("loop_iterations"),
            },
            "dram_bytes": footprint,
            "interpreter_s": self.interpreter_s,
        }


def merged_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary standing for several launches run one after another: their programs added
    up (as one grid), per-program counts the program-weighted mean (so totals are the sum),
    DRAM bytes summed, and `merged` the number of launches (each pays a launch)."""
    programs = sum(s["programs"] for s in summaries)
    weight = [s["programs"] / max(programs, 1) for s in summaries]
    per: dict[str, Any] = {}
    for key in summaries[0]["per_program"]:
        if key == "dot_flops":
            dots: dict[str, float] = {}
            for w, s in zip(weight, summaries):
                for dtype, v in s["per_program"].get("dot_flops", {}).items():
                    dots[dtype] = dots.get(dtype, 0.0) + w * v
            per[key] = dots
        else:
            per[key] = sum(w * s["per_program"].get(key, 0.0) for w, s in zip(weight, summaries))
    first = summaries[0]
    return {
        **first,
        "kernel": f"{first['kernel']} (+{len(summaries) - 1} more launches)"
        if len(summaries) > 1
        else first["kernel"],
        "grid": [programs, 1, 1],
        "programs": programs,
        "sampled": sum(s["sampled"] for s in summaries),
        "per_program": per,
        "dram_bytes": sum(s["dram_bytes"] for s in summaries),
        "merged": len(summaries),
        "interpreter_s": sum(s.get("interpreter_s", 0.0) for s in summaries),
    }


class Counting:
    """While active (a context manager), Triton launches in this process are sampled and counted
    into `launches`. One at a time; `install()` must have run (it is idempotent)."""

    active: Counting | None = None

    def __init__(
        self,
        full_grid: int = FULL_GRID,
        first_sample: int = FIRST_SAMPLE,
        max_sample: int = MAX_SAMPLE,
        model: dict[str, Any] | None = None,
    ):
        """`model` ({target, constants}, as the job's sim section has them) predicts autotune
        trials; without it a trial is judged by its interpreter time."""
        self.full_grid, self.first_sample, self.max_sample = full_grid, first_sample, max_sample
        self.model = model
        self.salt = 0  # seeds where loop iterations are drawn (the workload's seed: the same evaluation counts the same)
        self.launches: list[Launch] = []
        self.current: Launch | None = None
        self.program: ProgramCounts | None = None
        self.exact = True  # the current program computes what a GPU would (sim_values)
        self.stores: list[tuple[int, np.ndarray]] = []  # its stored (item size, addresses)
        self.trials = 0  # autotune trial launches counted, predicted and not billed
        self.tuned: list[str] = []  # "kernel: N configs" per autotuned choice

    def __enter__(self) -> Counting:
        from core.harness import triton_cpu

        install()
        Counting.active = self
        triton_cpu.AutotuneTrials.judge = self.judge_trial
        triton_cpu.LibdeviceCount.hook = lambda elements, special: self.alu(elements, special)
        return self

    def __exit__(self, *exc: object) -> None:
        from core.harness import triton_cpu

        Counting.active = None
        triton_cpu.AutotuneTrials.judge = None
        triton_cpu.LibdeviceCount.hook = None
        self.current = self.program = None

    def judge_trial(self, kernel_call: Callable[[], None]) -> float:
        """An autotuner's trial of one config, as the GPU's autotuner would see it: the config's
        launches are counted, their GPU time predicted (ms), and they are not billed: only the
        launch the autotuner then makes with the config it chose is. So a candidate is billed
        the config that predicts fastest, where a GPU picks the one that measures fastest."""
        start = len(self.launches)
        kernel_call()
        trial, self.launches[start:] = self.launches[start:], []
        self.trials += len(trial)
        if self.model is None:
            return sum(t.interpreter_s for t in trial) * 1e3
        from core.harness.sim.model import Constants, Target, launch_time

        target, constants = (
            Target.from_json(self.model["target"]),
            Constants.from_json(self.model["constants"]),
        )
        return sum(launch_time(t.summary(), None, target, constants).time_us for t in trial) / 1e3

    # --- what the builder hooks call ------------------------------------------------------

    def access(self, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int, store: bool) -> None:
        p, launch = self.program, self.current
        if p is None or launch is None:
            return
        addrs = np.asarray(ptrs).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask), np.shape(ptrs)).reshape(-1)
            addrs = addrs[m]
        n = addrs.size
        sectors = unique_sectors(addrs)
        if store:
            if self.exact:
                self.stores.append((itemsize, addrs.astype(np.int64, copy=True)))
            p.store_bytes += n * itemsize
            p.store_sectors += sectors.size
            p.stores += 1
        else:
            p.load_bytes += n * itemsize
            p.load_sectors += sectors.size
            p.loads += 1
        if sectors.size:
            self._attribute(launch, p, sectors, STORED if store else "")

    def _attribute(
        self, launch: Launch, p: ProgramCounts, sectors: np.ndarray, suffix: str = ""
    ) -> None:
        """Each sector to the tensor argument it lies in (`sectors` sorted: two binary searches
        per tensor, not a pass over the sectors)."""
        addrs = sectors * SECTOR
        left = sectors.size
        for t in launch.tensors:
            inside = int(
                np.searchsorted(addrs, t.end, "left")
                - np.searchsorted(addrs, t.start - SECTOR, "left")
            )
            if inside:
                p.tensor_bytes[t.name + suffix] = (
                    p.tensor_bytes.get(t.name + suffix, 0.0) + inside * SECTOR
                )
                left -= inside
                if left <= 0:
                    return
        if left > 0:
            p.tensor_bytes["(other)" + suffix] = (
                p.tensor_bytes.get("(other)" + suffix, 0.0) + left * SECTOR
            )

    def dot(self, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str) -> None:
        if self.program is None:
            return
        self.exact = False  # stubbed: the accumulator passes through
        m, k = a_shape[-2], a_shape[-1]
        n = b_shape[-1]
        batch = math.prod(a_shape[:-2]) if len(a_shape) > 2 else 1
        self.program.dot_flops[dtype] = (
            self.program.dot_flops.get(dtype, 0.0) + 2.0 * batch * m * n * k
        )

    def alu(self, elements: int, sfu: bool = False) -> None:
        if self.program is not None:
            if sfu:
                self.program.sfu_ops += elements
            else:
                self.program.alu_ops += elements

    def atomic(self, elements: int) -> None:
        if self.program is not None:
            self.exact = False  # its result depends on programs that may not run
            self.program.atomics += elements

    # --- what the launch hook calls -------------------------------------------------------

    def _grow_to(self, launch: Launch, elapsed: float) -> int:
        """How large the sample should grow now (its size if it should stop).

        Programs that differ (work varying by more than `ENLARGE_CV`) grow it to `max_sample`.
        A worst-case grid whose programs mostly return early (a grouped GEMM over every expert's
        largest possible row count) grows it to `SPARSE_SAMPLE`: a mean over 32 programs, two of
        which worked, is a guess, and idle programs cost little to run. So does a sample in
        which no program did any work yet, for `EMPTY_BUDGET_S`: the busy ones may be rarer
        than one in eight."""
        works = [p.work() for p in launch.programs]
        n, top = len(works), max(works, default=0.0)
        if top <= EMPTY_WORK:
            return SPARSE_SAMPLE if elapsed < EMPTY_BUDGET_S else n
        if elapsed > PROGRAM_BUDGET_S or _cv(works) <= ENLARGE_CV:
            return n
        idle = sum(1 for w in works if w <= IDLE_SHARE * top)
        if idle * 2 > n:
            return SPARSE_SAMPLE if elapsed < SPARSE_BUDGET_S else n
        return self.max_sample

    def _keep_stores(self, launch: Launch) -> None:
        if not self.exact:
            launch.inexact += 1
        elif not launch.stores_dropped:
            kept = sum(a.size for arrays in launch.exact_stores.values() for a in arrays)
            if kept + sum(a.size for _, a in self.stores) > EXACT_STORES_CAP:
                launch.stores_dropped = True
            else:
                for itemsize, addrs in self.stores:
                    launch.exact_stores.setdefault(itemsize, []).append(addrs)
        self.stores = []

    def run_programs(self, launch: Launch, run_one: Callable[[int, int, int], None]) -> None:
        """Run all programs of a small launch, else a stratified sample, grown where programs differ."""
        self.current = launch
        gx, gy, gz = launch.grid
        total = gx * gy * gz
        done: set[int] = set()
        started = time.perf_counter()

        def run(indices: list[int]) -> None:
            for i in indices:
                if i in done:
                    continue
                done.add(i)
                self.program, self.exact, self.stores = ProgramCounts(), True, []
                run_one(i % gx, (i // gx) % gy, i // (gx * gy))
                launch.programs.append(self.program)
                self.program = None
                self._keep_stores(launch)

        try:
            if total <= self.full_grid:
                run(list(range(total)))
            else:
                run(stratified(total, self.first_sample))
                size = self.first_sample
                while size < min(
                    total, cap := self._grow_to(launch, time.perf_counter() - started)
                ):
                    size = min(cap, size * 2)
                    fresh = [i for i in stratified(total, size, salt=size) if i not in done]
                    need = max(0, size - len(done))  # at most `max_sample` programs in all,
                    run(
                        [fresh[int(j * len(fresh) / need)] for j in range(need)]
                        if 0 < need < len(fresh)
                        else fresh[:need]
                    )  # spread, not the first ones
        finally:
            launch.interpreter_s = time.perf_counter() - started
            self.launches.append(launch)
            self.current = None


class SampledRange:
    """`range` (and `tl.range`) inside a counted kernel. A loop of many iterations runs its first
    and its last (where masked tails land) and `INTERIOR_SAMPLE` iterations drawn across the
    whole range between them, one in each equal stratum at a seeded place; the iterations not
    run are counted as the mean of the interior ones that were. Drawn across the range, not
    the first few: a loop that does its work only in its middle iterations (a masked prologue
    and epilogue) is counted as it runs. An interpreted GEMM step costs milliseconds, so this is
    what makes LLM-sized loops countable in a second. Loop-carried values (accumulators,
    advanced pointers) are wrong after a skipped iteration; only the counts matter here."""

    def __init__(self, *args: Any, **_options: Any):
        self.range = range(*(_as_int(a) for a in args))

    def __iter__(self):  # type: ignore[no-untyped-def]
        r = self.range
        c = Counting.active
        p = c.program if c is not None else None
        if p is not None:
            p.loop_iterations += len(r)
        if p is None or len(r) <= INTERIOR_SAMPLE + 2:
            yield from r
            return
        if c is not None:
            c.exact = False  # iterations skipped: loop-carried values are wrong
        interior = len(r) - 2
        picks = stratified(
            interior, INTERIOR_SAMPLE, salt=c.salt if c is not None else 0, last=False
        )
        yield r[0]
        ran = ProgramCounts()
        for i in picks:
            before = p.copy()
            yield r[1 + i]
            ran.add(p.minus(before), 1.0)
        p.add(ran, (interior - len(picks)) / len(picks))
        yield r[-1]

    def __len__(self) -> int:
        return len(self.range)


def _as_int(value: Any) -> int:
    handle = getattr(value, "handle", None)
    if handle is not None:
        return int(np.asarray(handle.data).reshape(-1)[0])
    return int(getattr(value, "value", value))


def unique_sectors(addrs: np.ndarray) -> np.ndarray:
    """The sorted distinct 32-byte sectors of `addrs`. A tile's addresses are usually already in
    order (row-major tiles over row-major tensors): then one pass finds them, where np.unique
    hashes or sorts a million addresses for each load of a large tile."""
    sectors = addrs // SECTOR
    if sectors.size < 2:
        return sectors
    head, tail = sectors[:-1], sectors[1:]  # compared, not subtracted: the addresses are unsigned
    if (tail >= head).all():
        return sectors[np.concatenate(([True], tail != head))]
    return np.unique(sectors)


def stratified(total: int, count: int, salt: int = 0, last: bool = True) -> list[int]:
    """`count` program indices of [0, total): one in each of `count` equal strata, at a seeded
    pseudo-random place in it (the same every run for the same launch size and `salt`), and the
    last program (where partial tiles and tails land). A fixed place in each stratum aliases
    with the grid: a stride that is a multiple of the grid's x size (or x·y) puts every pick on
    one x (or y), such as a causal attention kernel's first query block, or the first row tile of
    a worst-case MoE grid (the one row tile of each expert that has work), counted for all."""
    rng = random.Random(total * 1_000_003 + count * 101 + salt)
    stride = total / count
    picks = {min(total - 1, int((k + rng.random()) * stride)) for k in range(count)}
    if last:
        picks.add(total - 1)
    return sorted(picks)


def _cv(values: list[float]) -> float:
    if not values:
        return 0.0
    avg = sum(values) / len(values)
    if avg <= 0:
        return 0.0
    return math.sqrt(sum((v - avg) ** 2 for v in values) / len(values)) / avg


# --- patches of the interpreter ------------------------------------------------------------------


def _elements(handle: Any) -> int:
    data = getattr(handle, "data", None)
    return int(np.size(data)) if data is not None else 1


def install() -> None:
    """Hook the interpreter's builder and launcher once per process. The hooks do nothing while
    no `Counting` is active, so correctness runs are unaffected."""
    from triton.runtime import interpreter as itp

    builder = itp.InterpreterBuilder
    if getattr(builder.create_masked_load, _MARK, False):
        return

    def hook(name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = getattr(builder, name)
        wrapped = functools.wraps(original)(make(original))
        setattr(wrapped, _MARK, True)
        setattr(builder, name, wrapped)

    def itemsize(ptrs: Any) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    def masked_load(original):
        def wrapper(self, ptrs, mask, other, *args, **kwargs):
            c = Counting.active
            if c is not None:
                c.access(
                    ptrs.data, mask.data if mask is not None else None, itemsize(ptrs), store=False
                )
            return original(self, ptrs, mask, other, *args, **kwargs)

        return wrapper

    def masked_store(original):
        def wrapper(self, ptrs, value, mask, *args, **kwargs):
            c = Counting.active
            if c is not None:
                c.access(
                    ptrs.data, mask.data if mask is not None else None, itemsize(ptrs), store=True
                )
            return original(self, ptrs, value, mask, *args, **kwargs)

        return wrapper

    def dot(original):
        def wrapper(self, a, b, d, *args, **kwargs):
            c = Counting.active
            if c is None:
                return original(self, a, b, d, *args, **kwargs)
            c.dot(np.shape(a.data), np.shape(b.data), str(a.dtype.scalar))
            # The values are not needed for a prediction: the accumulator passes through.
            return itp.TensorHandle(np.array(d.data, copy=True), d.dtype.scalar)

        return wrapper

    def counted(sfu: Callable[..., bool]):
        def make(original):
            def wrapper(self, *args, **kwargs):
                out = original(self, *args, **kwargs)
                c = Counting.active
                if c is not None:
                    c.alu(_elements(out), sfu(*args))
                return out

            return wrapper

        return make

    def atomic(original):
        def wrapper(self, *args, **kwargs):
            out = original(self, *args, **kwargs)
            c = Counting.active
            if c is not None:
                ptr = args[1] if args and not hasattr(args[0], "data") else args[0]
                c.atomic(_elements(ptr))
                c.access(ptr.data, None, itemsize(ptr), store=True)
            return out

        return wrapper

    hook("create_masked_load", masked_load)
    hook("create_masked_store", masked_store)
    hook("create_dot", dot)
    hook(
        "binary_op",
        counted(
            lambda lhs, rhs, op: (
                getattr(op, "__name__", "") == "divide"
                and np.issubdtype(np.asarray(lhs.data).dtype, np.floating)
            )
        ),
    )
    hook("unary_op", counted(lambda arg, op: getattr(op, "__name__", "") in SFU_UNARY))
    hook("ternary_op", counted(lambda *a: False))
    hook("create_fma", counted(lambda *a: False))
    hook("create_rsqrt", counted(lambda *a: True))
    hook("create_erf", counted(lambda *a: True))
    hook("create_atomic_rmw", atomic)
    hook("create_atomic_cas", atomic)
    _hook_reductions(itp)
    _hook_launch(itp)


def _hook_reductions(itp: Any) -> None:
    cls = itp.ReduceScanOpInterface
    original = cls.apply
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def apply(self, input):
        c = Counting.active
        if c is not None:
            for t in input if isinstance(input, tuple) else (input,):
                c.alu(_elements(getattr(t, "handle", None)))
        return original(self, input)

    setattr(apply, _MARK, True)
    cls.apply = apply


def _hook_launch(itp: Any) -> None:
    cls = itp.InterpretedFunction
    original = cls.run
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def run(self, *args, grid, warmup, **kwargs):
        c = Counting.active
        if c is None or warmup or c.current is not None:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        return _SampledGrid(self.rewrite(), self.arg_names, grid, self.pre_run_hooks, self.fn, c)(
            *args, **kwargs
        )

    setattr(run, _MARK, True)
    cls.run = run


def _launch_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "num_warps",
        "num_stages",
        "num_ctas",
        "maxnreg",
        "waves_per_eu",
        "matrix_instr_nonkdim",
    )
    return {k: kwargs[k] for k in keep if k in kwargs and kwargs[k] is not None}


def _make_sampled_grid() -> type:
    from triton.runtime import interpreter as itp

    from core.harness.sim import written as sim_written

    class SampledGrid(itp.GridExecutor):
        """The interpreter's grid executor, running only the programs `Counting` asks for."""

        def __init__(self, fn, arg_names, grid, pre_run_hooks, source_fn, counting):
            super().__init__(fn, arg_names, grid, pre_run_hooks)
            self.source_fn, self.counting = source_fn, counting

        def __call__(self, *args_dev, **kwargs):
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():  # the interpreter's own tensor work is not the kernel's
                self._launch(*args_dev, **kwargs)

        def _launch(self, *args_dev, **kwargs):
            options = _launch_options(kwargs)
            names = inspect.getfullargspec(self.fn).args
            kwargs = {k: v for k, v in kwargs.items() if k in names}
            args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
            for hook in self.pre_run_hooks:
                hook(*args_hst, **kwargs_hst)
            scope = itp._patch_lang(self.fn)
            loops = _sample_loops(self.fn.__globals__)
            try:
                call = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
                bound = dict(call)
                call = {
                    n: a if n in self.constexprs else itp._implicit_cvt(a) for n, a in call.items()
                }
                grid = self.grid(call) if callable(self.grid) else self.grid
                grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
                itp.interpreter_builder.set_grid_dim(*grid)
                launch = Launch(
                    seq=sim_written.tick(),
                    kernel=getattr(self.source_fn, "__name__", "kernel"),
                    fn=self.source_fn,
                    grid=grid,  # type: ignore[arg-type]
                    bound=bound,
                    options=options,
                    tensors=_tensor_args(bound),
                )

                def run_one(x: int, y: int, z: int) -> None:
                    itp.interpreter_builder.set_grid_idx(x, y, z)
                    self.fn(**call)

                try:
                    self.counting.run_programs(launch, run_one)
                except Exception as exc:
                    raise itp.InterpreterError(repr(exc)) from exc
            finally:
                loops()
                scope.restore()
            # On the CPU the interpreter ran on the arguments' own storage: nothing to copy back
            # (the stock executor copies every argument onto itself, hundreds of MB at GPU sizes).
            if any(
                getattr(a, "device", None) is not None and a.device.type != "cpu" for a in args_dev
            ):
                self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    return SampledGrid


def _sample_loops(module_globals: dict[str, Any]) -> Callable[[], None]:
    """Make `range` and `tl.range` in the kernel's module sampled for one launch; returns the undo."""
    import triton.language as tl

    had, old, old_tl = "range" in module_globals, module_globals.get("range"), tl.range
    module_globals["range"] = SampledRange
    tl.range = SampledRange  # type: ignore[assignment]

    def undo() -> None:
        tl.range = old_tl  # type: ignore[assignment]
        if had:
            module_globals["range"] = old
        else:
            module_globals.pop("range", None)

    return undo


_SAMPLED_GRID: type | None = None


def _SampledGrid(*args: Any) -> Any:
    global _SAMPLED_GRID
    if _SAMPLED_GRID is None:
        _SAMPLED_GRID = _make_sampled_grid()
    return _SAMPLED_GRID(*args)


def _tensor_args(bound: dict[str, Any]) -> list[TensorArg]:
    found = []
    for name, value in bound.items():
        base = getattr(value, "base", value)  # a TensorWrapper / descriptor carries its tensor
        if hasattr(base, "data_ptr") and hasattr(base, "untyped_storage"):
            start = int(base.data_ptr())
            span = (
                base.numel() and (sum((s - 1) * st for s, st in zip(base.shape, base.stride())) + 1)
            ) * base.element_size()
            found.append(TensorArg(name, start, start + int(span)))
    return found
