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

Exact programs (the value check, sim_values). In every launch, `EXACT_PROGRAMS` of the programs
the sample runs first are drawn with `random.SystemRandom` (no candidate can predict which) and
run *exactly*: every loop iteration, the real `tl.dot` (the interpreter's, as a checked call
computes it: fp32 accumulation for 16-bit inputs). One that stores nothing (an idle program of
a worst-case grouped-GEMM grid) hands its turn to the next program the sample runs, and where
they are cheap (under `EXACT_CHEAP_S` each) every program of the first sample runs exactly.
They are billed exactly as a sampled program is: the counts of the loop iterations a sampled program would not have run are taken and then
discarded, so predicted times do not move. Their stores are values a GPU would have left, so
dot and loop kernels have known elements. The exact work of one counted call is capped at
`EXACT_BUDGET_S` interpreter seconds; a program still running at the cap finishes as a sampled
one (its values unknown) and the count says so (`Counting.exact_notes`).

The interpreter's hooks are in sim/hooks.py, sampled loops in sim/loops.py, what a count
records in sim/launch.py. Runs inside the candidate's worker (it executes the candidate's
kernels). Imports only numpy, torch and triton: the harness is shipped alone.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from core.harness import triton_cpu, triton_libdevice
from core.harness.sim.launch import (  # what a count is made of (and where callers find it)
    NUMERIC,
    SECTOR,
    STORED,
    Launch,
    ProgramCounts,
    TensorArg,
    _cv,
    merged_summary,
    stratified,
    unique_sectors,
)

__all__ = [
    "NUMERIC",
    "SECTOR",
    "STORED",
    "Counting",
    "Launch",
    "ProgramCounts",
    "SampledRange",
    "TensorArg",
    "merged_summary",
    "stratified",
    "unique_sectors",
]

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
EXACT_STORES_CAP = (
    1 << 21
)  # stored element addresses kept per launch for the value check (sim_values)
EXACT_PROGRAMS = 2  # programs of each launch run exactly (every iteration, the real dot)
EXACT_CHEAP_S = 0.05  # ... and all of its first sample where each takes less than this
EXACT_BUDGET_S = 10.0  # interpreter seconds one counted call may spend on exact work


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
        self.exact_budget_s = EXACT_BUDGET_S
        self.exact_spent = 0.0  # interpreter seconds spent on exact programs so far
        self.exact_deadline: float | None = None  # set while the current program runs exactly
        self.in_trial = False  # an autotune trial's launches run no exact program
        self.forgetting = 0  # inside loop iterations whose counts are dropped (SampledRange)
        self.exact_ran = 0  # exact programs that finished exactly
        self.exact_cut: dict[str, int] = {}  # kernel -> exact programs stopped at the budget

    def __enter__(self) -> Counting:
        _hooks.install()
        Counting.active = self
        triton_cpu.AutotuneTrials.judge = self.judge_trial
        triton_libdevice.LibdeviceCount.hook = lambda elements, special: self.alu(elements, special)
        return self

    def __exit__(self, *exc: object) -> None:
        Counting.active = None
        triton_cpu.AutotuneTrials.judge = None
        triton_libdevice.LibdeviceCount.hook = None
        self.current = self.program = None

    def judge_trial(self, kernel_call: Callable[[], None]) -> float:
        """An autotuner's trial of one config, as the GPU's autotuner would see it: the config's
        launches are counted, their GPU time predicted (ms), and they are not billed: only the
        launch the autotuner then makes with the config it chose is. So a candidate is billed
        the config that predicts fastest, where a GPU picks the one that measures fastest."""
        start = len(self.launches)
        self.in_trial = True
        try:
            kernel_call()
        finally:
            self.in_trial = False
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
        if p is None or launch is None or (self.forgetting and not store):
            return
        addrs = np.asarray(ptrs).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask), np.shape(ptrs)).reshape(-1)
            addrs = addrs[m]
        if self.forgetting:  # an iteration an exact program runs and forgets: only its stores
            if self.exact:
                self.stores.append((itemsize, addrs.astype(np.int64, copy=True)))
            return
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

    def running_exactly(self) -> bool:
        """Whether the current program runs exactly (the real dot, every loop iteration). Past
        the call's budget it stops: the rest of it runs as a sampled program."""
        if self.exact_deadline is None:
            return False
        if time.perf_counter() > self.exact_deadline:
            self.exact_deadline = None
            self.exact = False
            if self.current is not None:
                name = self.current.kernel
                self.exact_cut[name] = self.exact_cut.get(name, 0) + 1
            return False
        return True

    def exact_notes(self) -> list[str]:
        """What the count says about its exact programs (a result's notes)."""
        return [
            f"value check: {n} exact program(s) of kernel `{k}` did not fit this call's "
            f"{self.exact_budget_s:g} s budget for exact work and ran as sampled ones: "
            "their values are not checked"
            for k, n in self.exact_cut.items()
        ]

    def dot(self, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: str) -> bool:
        """Count a dot; True when it must be computed (the program runs exactly)."""
        if self.program is None:
            return True
        exact = self.running_exactly()
        if not exact:
            self.exact = False  # stubbed: the accumulator passes through
        if self.forgetting:
            return exact
        m, k = a_shape[-2], a_shape[-1]
        n = b_shape[-1]
        batch = math.prod(a_shape[:-2]) if len(a_shape) > 2 else 1
        self.program.dot_flops[dtype] = (
            self.program.dot_flops.get(dtype, 0.0) + 2.0 * batch * m * n * k
        )
        return exact

    def alu(self, elements: int, sfu: bool = False) -> None:
        if self.program is not None and not self.forgetting:
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

    def _exact_picks(self, first: list[int]) -> set[int]:
        """The programs of a launch that run exactly: drawn among those its sample runs first,
        from the operating system's randomness (a candidate cannot know which)."""
        if self.in_trial or self.exact_spent >= self.exact_budget_s or not first:
            return set()
        return set(random.SystemRandom().sample(first, min(EXACT_PROGRAMS, len(first))))

    def _exact_affordable(self, spent: float, ran: float) -> bool:
        """Whether one more exact program of this launch fits the call's budget, judged by
        those of the launch that ran exactly before it; one that does not is left sampled."""
        left = self.exact_budget_s - self.exact_spent
        if left > 0 and (not ran or spent / ran <= left):
            return True
        if self.current is not None and left > 0:
            name = self.current.kernel
            self.exact_cut[name] = self.exact_cut.get(name, 0) + 1
        return False

    def run_programs(self, launch: Launch, run_one: Callable[[int, int, int], None]) -> None:
        """Run all programs of a small launch, else a stratified sample, grown where programs differ."""
        self.current = launch
        gx, gy, gz = launch.grid
        total = gx * gy * gz
        done: set[int] = set()
        started = time.perf_counter()
        first = (
            list(range(total)) if total <= self.full_grid else stratified(total, self.first_sample)
        )
        exact = self._exact_picks(first)
        # The sample's growth is timed without the exact programs' extra time (an exact program
        # counts as long as the mean sampled one), so it grows as it did before they existed.
        timing = {"exact_s": 0.0, "exact_n": 0, "sampled_s": 0.0, "sampled_n": 0, "idle_exact": 0}

        def elapsed() -> float:
            mean = timing["sampled_s"] / timing["sampled_n"] if timing["sampled_n"] else 0.0
            spent = time.perf_counter() - started
            return spent - timing["exact_s"] + timing["exact_n"] * mean

        first_set = set(first)

        def cheap(i: int) -> bool:
            """More exact programs where they are cheap: every program of the first sample once
            the launch's exact programs take under `EXACT_CHEAP_S` each."""
            n = timing["exact_n"]
            return i in first_set and n > 0 and timing["exact_s"] / n < EXACT_CHEAP_S

        def run(indices: list[int]) -> None:
            for i in indices:
                if i in done:
                    continue
                done.add(i)
                self.program, self.exact, self.stores = ProgramCounts(), True, []
                wanted = i in exact or timing["idle_exact"] > 0 or cheap(i)
                chosen = wanted and self._exact_affordable(timing["exact_s"], timing["exact_n"])
                if chosen and i not in exact:
                    timing["idle_exact"] -= 1
                started_one = time.perf_counter()
                if chosen:
                    self.exact_deadline = started_one + self.exact_budget_s - self.exact_spent
                try:
                    run_one(i % gx, (i // gx) % gy, i // (gx * gy))
                finally:
                    took = time.perf_counter() - started_one
                    if chosen:
                        if not self.stores:  # idle (returned early): the next program stands in
                            timing["idle_exact"] += 1
                        self.exact_ran += int(self.exact_deadline is not None and self.exact)
                        self.exact_deadline = None
                        self.exact_spent += took
                        timing["exact_s"] += took
                        timing["exact_n"] += 1
                    else:
                        timing["sampled_s"] += took
                        timing["sampled_n"] += 1
                launch.programs.append(self.program)
                self.program = None
                self._keep_stores(launch)

        try:
            if total <= self.full_grid:
                run(first)
            else:
                run(first)
                size = self.first_sample
                while size < min(total, cap := self._grow_to(launch, elapsed())):
                    size = min(cap, size * 2)
                    fresh = [i for i in stratified(total, size, salt=size) if i not in done]
                    need = max(0, size - len(done))  # at most `max_sample` programs in all,
                    run(
                        [fresh[int(j * len(fresh) / need)] for j in range(need)]
                        if 0 < need < len(fresh)
                        else fresh[:need]
                    )  # spread, not the first ones
        finally:
            # Without the exact programs' extra time: what the autotune judge and the summary see.
            launch.interpreter_s = elapsed()
            self.launches.append(launch)
            self.current = None
            self.exact_deadline = None


# --- patches of the interpreter ------------------------------------------------------------------


# Bound at import, with everything the hooks and the count share: the candidate's worker takes
# the harness out of sys.modules after importing the candidate (worker_watch.hide_harness), and a
# module imported after that would be a fresh copy with a Counting of its own.
from core.harness.sim import hooks as _hooks  # noqa: E402
from core.harness.sim.loops import SampledRange  # noqa: E402
