"""What a `sim:` device's count is made of: per-program counts, one launch's record and its
JSON summary (core/harness/sim/count.py counts them; the harness parent reads the summaries).
Imports only numpy: the harness is shipped alone."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.harness.sim.clock import Tally

SECTOR = 32  # bytes: the unit of a GPU memory transaction (NVIDIA sector; AMD reads 64 B lines)
# A hold (the task's formulas, the outputs written) fails a sampled count only where it falls
# short by more than this many standard errors of its sample: about 2% of honest counts that
# sit right at the hold, far fewer above it, and a call that does a fraction less at every
# program (no spread) is held exactly (judge.py, written.py).
SAMPLING_Z = 2.0


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

    def restore(self, saved: ProgramCounts) -> None:
        """Back to `saved` (a copy taken earlier), in place: callers hold this object."""
        for key in NUMERIC:
            setattr(self, key, getattr(saved, key))
        self.dot_flops, self.tensor_bytes = dict(saved.dot_flops), dict(saved.tensor_bytes)

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
    """A tensor argument of a launch: its name, the address range of its view (what its bytes
    are billed against) and of its whole storage (what an access may reach without being a
    stray: sim_count)."""

    name: str
    start: int
    end: int
    storage_start: int = -1
    storage_end: int = -1

    def __post_init__(self) -> None:
        if self.storage_start < 0 or self.storage_end < self.storage_start:
            self.storage_start, self.storage_end = self.start, self.end


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
    # What its sample cost, as if no program had run exactly (sim_count): the interpreted work
    # it grew by (sim/clock.py), and the interpreter seconds, which vary with the machine's load.
    interpreted: Tally = field(default_factory=Tally)
    interpreter_s: float = 0.0
    # For the value check (sim_values): when the launch started (one clock with the torch ops),
    # the addresses its exact programs stored (by item size), and how many programs were not
    # exact (a loop's iterations skipped, a stubbed dot, an atomic): their values are not the GPU's.
    seq: int = 0
    exact_stores: dict[int, list[np.ndarray]] = field(default_factory=dict)
    inexact: int = 0
    stores_dropped: bool = False
    # Addresses written by atomics (any program), and plain stores of exact programs that also
    # ran an atomic: unknown where the atomics' order matters (sim_values), by item size.
    atomic_addrs: dict[int, list[np.ndarray]] = field(default_factory=dict)
    tainted_stores: dict[int, list[np.ndarray]] = field(default_factory=dict)
    reran_atomics: bool = False  # a program that ran an atomic ran twice (its twin: sim_count)
    # Sectors (addresses of 32-byte sectors) accessed outside every tensor argument's storage:
    # loads and stores, kept up to STRAY_CAP each, and how many there were (sim_count).
    stray_loads: list[np.ndarray] = field(default_factory=list)
    stray_stores: list[np.ndarray] = field(default_factory=list)
    stray_load_sectors: int = 0
    stray_store_sectors: int = 0
    # What sim_values resolves the strays to: storages of tensors the call made or was given.
    resolved_reads: list[tuple[int, int]] = field(default_factory=list)
    resolved_writes: list[tuple[int, int]] = field(default_factory=list)

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
        # The footprint's sampling error: only tensors below their cap can move it upwards.
        open_names = [
            name
            for name, b in requested.items()
            if b < sizes.get(name.removesuffix(STORED), math.inf)
        ]
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
            # standard errors of the launch totals a sample extrapolates (0 when every program ran)
            "dram_se": self.sampling_se(
                lambda p: sum(p.tensor_bytes.get(n, 0.0) for n in open_names)
            ),
            "arith_se": self.sampling_se(
                lambda p: sum(p.dot_flops.values()) + p.alu_ops + p.sfu_ops
            ),
            "interpreted_work": self.interpreted.work,
            "interpreter_s": self.interpreter_s,
        }

    def sampling_se(self, per_program: Callable[[ProgramCounts], float]) -> float:
        """The standard error of `num_programs` × the sample's mean of `per_program`, as a
        simple random sample without replacement of the launch's programs estimates its total.
        0 where every program ran; where the sampled programs differ it says how far the
        extrapolated total may be from the launch's true one (judge.py holds a call to the
        task's formulas only where the shortfall exceeds it)."""
        return total_se([per_program(p) for p in self.programs], self.num_programs)


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
        # independent samples: their errors add in quadrature
        "dram_se": math.sqrt(sum(s.get("dram_se", 0.0) ** 2 for s in summaries)),
        "arith_se": math.sqrt(sum(s.get("arith_se", 0.0) ** 2 for s in summaries)),
        "merged": len(summaries),
        "interpreted_work": sum(s.get("interpreted_work", 0) for s in summaries),
        "interpreter_s": sum(s.get("interpreter_s", 0.0) for s in summaries),
    }


def total_se(values: list[float], total: int) -> float:
    """The standard error of `total` × mean(`values`), the values being a sample without
    replacement of `total` programs' (the finite-population correction makes a whole launch's
    total exact)."""
    n = len(values)
    if n < 2 or n >= total:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return total * math.sqrt(var / n * (1 - n / total))


def unique_sectors(addrs: np.ndarray) -> np.ndarray:
    """The sorted distinct 32-byte sectors of `addrs`. A tile's addresses are usually already in
    order (row-major tiles over row-major tensors): then one pass finds them, where np.unique
    hashes or sorts a million addresses for each load of a large tile."""
    sectors: np.ndarray = addrs // SECTOR
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
