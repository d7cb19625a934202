"""Count what Triton kernels do, program by program, in Triton's interpreter (the `sim:` devices).

While a `Counting` is active, every Triton launch in this process is recorded instead of being
run in full: a launch of P programs runs all of them when P is small, and otherwise a stratified
sample in the GPU's dispatch order (x fastest), enlarged where the sampled programs differ
(causal attention, skewed MoE), within budgets of interpreted work (sim/clock.py: the builder
operations the programs ran and the elements they handled, never the wall clock), so an
identical source on identical inputs samples the same programs on any machine, however loaded.
For each program run it counts what a GPU would have to do:

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
one (its values unknown) and the count says so (`Counting.exact_notes`). The `EXACT_*` budgets
stay on the wall clock: they decide only which programs run exactly, for the value check, and
an exact program is billed, and charged to the sample's budgets, as its twin (below), so no
prediction depends on them.

Twins (issue 37). Each exact program first runs as its twin, a sampled program like every
billed one; the two must count alike (sim/twins.py), or the kernel tells the programs it is
watched in apart (`differs`, failed by sim_judge). A twin that stubbed no dot and sampled no loop
was exact itself and stands for the exact run. The first exact program of a launch always runs to
its end (up to `EXACT_FIRST_S`), whatever the call's budget. The sample grows as if no program
ran exactly: an exact program's work is its twin's, the sampled run it stands for.

The interpreter's hooks are in sim/hooks.py, sampled loops in sim/loops.py, what a count
records in sim/launch.py, what an access counts (and strays) in sim/access.py. Runs inside the candidate's worker (it executes the candidate's
kernels). Imports only numpy, torch and triton: the harness is shipped alone.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.harness import triton_cpu, triton_libdevice
from core.harness.sim.access import Accesses
from core.harness.sim.clock import Tally, budget, seconds
from core.harness.sim.launch import (  # what a count is made of (and where callers find it)
    NUMERIC,
    SAMPLING_Z,
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
from core.harness.sim.torch_ops import unbilled
from core.harness.sim.twins import Ran, differs, keep_capped

__all__ = [
    "NUMERIC",
    "SAMPLING_Z",
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
# The sample's budgets are interpreted work (sim/clock.py), each what so many seconds of
# interpreter time bought on the calibration machine: the same source samples the same programs
# however loaded the machine is.
EMPTY_BUDGET = budget(0.25)  # work a launch may spend looking for its first busy program
SPARSE_BUDGET = budget(0.5)  # ... and growing a sample of mostly idle programs (about 350 of them)
INTERIOR_SAMPLE = (
    2  # a counted loop of more iterations runs its first, its last, and this many drawn between
)
PROGRAM_BUDGET = budget(1.0)  # work one launch may spend on its sample before it stops growing
CONFIRM_SAMPLE = 8192  # programs a launch's recount may run (every one of a smaller launch) ...
CONFIRM_BUDGET = budget(6.0)  # ... within this much work for the whole call
# A safety stop on the wall clock: a kernel's own Python (a `while` over Python integers, a
# `tl.static_range` of nothing) runs no builder operation and tallies no work, so a sample of
# such programs would grow to its cap whatever it cost. A launch's sample stops growing past
# this many interpreter seconds, far above what an honest sample takes under its budgets
# (docs/simulation.md, "The sample's clock"), so that it never decides an honest count.
RUNAWAY_S = 300.0
EXACT_PROGRAMS = 2  # programs of each launch run exactly (every iteration, the real dot)
EXACT_CHEAP_S = 0.05  # ... and all of its first sample where each takes less than this
EXACT_BUDGET_S = 10.0  # interpreter seconds one counted call may spend on exact work
EXACT_FIRST_S = 60.0  # ... except each launch's first exact program, which always runs to the end unless it takes this long


class Counting(Accesses):
    """While active (a context manager), Triton launches in this process are sampled and counted
    into `launches`. One at a time; `install()` must have run (it is idempotent)."""

    active: Counting | None = None

    def __init__(
        self,
        full_grid: int = FULL_GRID,
        first_sample: int = FIRST_SAMPLE,
        max_sample: int = MAX_SAMPLE,
        model: dict[str, Any] | None = None,
        confirm: bool = False,
    ):
        """`model` ({target, constants}, as the job's sim section has them) predicts autotune
        trials; without it a trial is judged by its interpreted work. `confirm`: a recount
        (sim_predict), whose launches grow their samples as far as `CONFIRM_SAMPLE` programs
        where those differ, within `CONFIRM_BUDGET` for the call."""
        self.full_grid, self.first_sample, self.max_sample = full_grid, first_sample, max_sample
        self.model = model
        self.confirm = confirm
        self.confirm_spent = 0  # interpreted work the recount's launches spent so far
        self.tallied = Tally()  # interpreted work of every program run so far (sim/clock.py)
        self.in_operation = False  # inside a tallied builder operation (hooks._tallied)
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
        self.atomic_stores: list[tuple[int, np.ndarray]] = []  # the current program's atomics
        self.did_atomic = False  # the current program ran an atomic
        self.differs: list[dict[str, Any]] = []  # exact programs that counted unlike their twins
        self.exact_slow: list[str] = []  # kernels whose first exact program passed EXACT_FIRST_S

    def __enter__(self) -> Counting:
        _hooks.install()
        Counting.active = self
        triton_cpu.AutotuneTrials.judge = self.judge_trial
        triton_libdevice.LibdeviceCount.hook = self.libdevice
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
        # bound at import: the candidate's worker takes the harness out of sys.modules, and an
        # import from here would then make a fresh copy that knows of no counting
        unbill = unbilled()  # its torch ops too (the autotuner's restore_value copies)
        self.in_trial = True
        try:
            kernel_call()
        finally:
            self.in_trial = False
            unbill()
        trial, self.launches[start:] = self.launches[start:], []
        self.trials += len(trial)
        if self.model is None:  # in calibration seconds (ms): the same on any machine
            return seconds(sum(t.interpreted.work for t in trial)) * 1e3
        from core.harness.sim.model import Constants, Target, launch_time

        target, constants = (
            Target.from_json(self.model["target"]),
            Constants.from_json(self.model["constants"]),
        )
        return sum(launch_time(t.summary(), None, target, constants).time_us for t in trial) / 1e3

    # --- what the builder hooks call ------------------------------------------------------

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

    def libdevice(self, elements: int, special: bool) -> None:
        """A libdevice call (computed on numpy, outside the builder): counted as arithmetic and
        tallied as one operation."""
        self.alu(elements, special)
        self.tally(elements)

    def tally(self, elements: int) -> None:
        """One operation the interpreter ran for the current program, handling `elements`: the
        clock its launch's sample grows by (sim/clock.py). Whatever the program runs counts,
        the iterations an exact program runs and forgets included; a loop's skipped iterations
        never ran and cost nothing."""
        if self.program is not None:
            self.tallied.ops += 1
            self.tallied.elements += elements

    # --- what the launch hook calls -------------------------------------------------------

    def _grow_to(self, launch: Launch, spent: SampleCost) -> int:
        """How large the sample should grow now (its size if it should stop), by what it has
        cost so far (`spent`: interpreted work, as if no program had run exactly).

        Programs that differ (work varying by more than `ENLARGE_CV`) grow it to `max_sample`.
        A worst-case grid whose programs mostly return early (a grouped GEMM over every expert's
        largest possible row count) grows it to `SPARSE_SAMPLE`: a mean over 32 programs, two of
        which worked, is a guess, and idle programs cost little to run. So does a sample in
        which no program did any work yet, for `EMPTY_BUDGET`: the busy ones may be rarer
        than one in eight."""
        works = [p.work() for p in launch.programs]
        n, top = len(works), max(works, default=0.0)
        if spent.wall_s > RUNAWAY_S:  # work the tally does not see (the kernel's own Python)
            return n
        work = spent.work.work
        if self.confirm and not self.in_trial:  # an autotune trial only picks a config
            return self._confirm_size(works, work)
        if top <= EMPTY_WORK:
            return SPARSE_SAMPLE if work < EMPTY_BUDGET else n
        if work > PROGRAM_BUDGET or _cv(works) <= ENLARGE_CV:
            return n
        idle = sum(1 for w in works if w <= IDLE_SHARE * top)
        if idle * 2 > n:
            return SPARSE_SAMPLE if work < SPARSE_BUDGET else n
        return self.max_sample

    def _confirm_size(self, works: list[float], work: int) -> int:
        """How large a recount's sample should grow now, its programs having run `work`. A
        recount follows a count whose point estimate fell short of a hold (the task's formulas,
        the outputs written) while some of its launches ran only a sample: where the sampled
        programs differ (idle and busy ones, data-dependent tiles), or none of them worked yet,
        the sample grows for as many programs as the call's `CONFIRM_BUDGET` affords at the
        launch's mean work per program (all of a launch that fits), up to `CONFIRM_SAMPLE`.
        Programs alike stand as they are: their mean is already the launch's."""
        n = len(works)
        if max(works, default=0.0) > EMPTY_WORK and _cv(works) <= ENLARGE_CV:
            return n
        left = CONFIRM_BUDGET - self.confirm_spent - work
        if left <= 0 or n == 0:
            return n
        per = max(work // n, 1)
        return min(CONFIRM_SAMPLE, n + left // per)

    def _keep(self, launch: Launch, run: Ran) -> None:
        """A program's counts and what its stores tell the value check (sim_values)."""
        launch.programs.append(run.counts)
        if run.atomic_stores:
            keep_capped(launch, launch.atomic_addrs, run.atomic_stores)
        if not run.exact:
            launch.inexact += 1
            return
        if not keep_capped(launch, launch.exact_stores, run.stores):
            return
        if run.did_atomic:  # its plain stores may hold what an atomic returned
            keep_capped(launch, launch.tainted_stores, run.stores)

    def _exact_picks(self, first: list[int]) -> set[int]:
        """The programs of a launch that run exactly: drawn among those its sample runs first,
        from the operating system's randomness (a candidate cannot know which)."""
        if self.in_trial or self.exact_budget_s <= 0 or not first:
            return set()
        return set(random.SystemRandom().sample(first, min(EXACT_PROGRAMS, len(first))))

    def _exact_affordable(self, spent: float, ran: float, first: bool) -> bool:
        """Whether one more exact program of this launch fits the call's budget, judged by
        those of the launch that ran exactly before it; one that does not is left sampled.
        The launch's first exact program (none stored anything yet) always runs: every launch
        gets known elements, however costly its programs are made (up to `EXACT_FIRST_S`)."""
        if first:
            return True
        left = self.exact_budget_s - self.exact_spent
        if left > 0 and (not ran or spent / ran <= left):
            return True
        if self.current is not None:
            name = self.current.kernel
            self.exact_cut[name] = self.exact_cut.get(name, 0) + 1
        return False

    def _run(
        self,
        run_one: Callable[[int, int, int], None],
        i: int,
        grid: tuple[int, int, int],
        deadline: float | None,
    ) -> Ran:
        """Program `i` once: exactly until `deadline` (None: as a sampled program)."""
        gx, gy, _ = grid
        self.program, self.exact, self.stores = ProgramCounts(), True, []
        self.atomic_stores, self.did_atomic = [], False
        self.exact_deadline = deadline
        tallied = self.tallied.copy()
        started = time.perf_counter()
        try:
            run_one(i % gx, (i // gx) % gy, i // (gx * gy))
        finally:
            ran = Ran(
                counts=self.program,
                exact=self.exact,
                finished_exactly=self.exact_deadline is not None and self.exact,
                stores=self.stores,
                atomic_stores=self.atomic_stores,
                did_atomic=self.did_atomic,
                took=time.perf_counter() - started,
                tally=self.tallied.since(tallied),
            )
            self.program, self.exact_deadline = None, None
            self.stores, self.atomic_stores = [], []
        return ran

    def _exact_with_twin(
        self, launch: Launch, run_one: Callable[[int, int, int], None], i: int, deadline: float
    ) -> tuple[Ran, Ran]:
        """Program `i` run exactly, after its twin: the same program run first as any sampled
        one is (a stubbed dot, sampled loops), which no kernel can tell from the programs
        that are billed. An honest program counts the same both ways (an exact program is
        billed as the sampled one it stands for), so any difference in loads, stores, FLOPs
        or loop trips is a kernel that tells its exact programs apart and does something else
        when it is not watched (`differs`). A twin that ran no dot and no sampled loop was
        exact itself and stands for the exact run. Returns the exact run and its twin (the
        same run where the twin was exact)."""
        twin = self._run(run_one, i, launch.grid, None)
        if twin.exact:
            return twin, twin
        exact = self._run(run_one, i, launch.grid, deadline)
        if twin.did_atomic or exact.did_atomic:
            launch.reran_atomics = True  # its atomics were applied twice
        found = differs(exact.counts, twin.counts)
        if found and len(self.differs) < 8:
            gx, gy, _ = launch.grid
            self.differs.append(
                {
                    "kernel": launch.kernel,
                    "program": [i % gx, (i // gx) % gy, i // (gx * gy)],
                    **found,
                }
            )
        return exact, twin

    def run_programs(self, launch: Launch, run_one: Callable[[int, int, int], None]) -> None:
        """Run all programs of a small launch, else a stratified sample, grown where programs differ."""
        self.current = launch
        gx, gy, gz = launch.grid
        total = gx * gy * gz
        done: set[int] = set()
        first = (
            list(range(total)) if total <= self.full_grid else stratified(total, self.first_sample)
        )
        exact = self._exact_picks(first)
        # The sample grows by what it costs as if no program ran exactly (an exact program is
        # charged as its twin), so it grows as it would without them, whichever were drawn.
        spent = SampleCost()
        timing = {"exact_s": 0.0, "exact_n": 0, "idle_exact": 0, "stored": 0}
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
                wanted = self.exact_budget_s > 0 and (
                    i in exact or timing["idle_exact"] > 0 or cheap(i)
                )
                leading = not timing["stored"]  # no exact program of this launch stored yet
                chosen = wanted and self._exact_affordable(
                    timing["exact_s"], timing["exact_n"], leading
                )
                if chosen and i not in exact and timing["idle_exact"] > 0:
                    timing["idle_exact"] -= 1
                if not chosen:
                    ran = self._run(run_one, i, launch.grid, None)
                    spent.charge(ran)
                else:
                    now = time.perf_counter()
                    deadline = now + (
                        EXACT_FIRST_S if leading else self.exact_budget_s - self.exact_spent
                    )
                    ran, twin = self._exact_with_twin(launch, run_one, i, deadline)
                    spent.charge(twin)
                    if not ran.stores:  # idle (returned early): the next program stands in
                        timing["idle_exact"] += 1
                    else:
                        timing["stored"] += 1
                    self.exact_ran += int(ran.finished_exactly or ran.exact)
                    self.exact_spent += ran.took  # its twin ran as a sampled program does
                    timing["exact_s"] += ran.took + (twin.took if twin is not ran else 0.0)
                    timing["exact_n"] += 1
                    if leading and not ran.exact and ran.stores:
                        self.exact_slow.append(launch.kernel)
                self._keep(launch, ran)

        try:
            if total <= self.full_grid:
                run(first)
            else:
                run(first)
                size = self.first_sample
                while size < min(total, cap := self._grow_to(launch, spent)):
                    size = min(cap, size * 2)
                    fresh = [i for i in stratified(total, size, salt=size) if i not in done]
                    need = max(0, size - len(done))  # at most `max_sample` programs in all,
                    run(
                        [fresh[int(j * len(fresh) / need)] for j in range(need)]
                        if 0 < need < len(fresh)
                        else fresh[:need]
                    )  # spread, not the first ones
        finally:
            # As if no program ran exactly: what the autotune judge and the summary see.
            launch.interpreted, launch.interpreter_s = spent.work, spent.wall_s
            if self.confirm and not self.in_trial:
                self.confirm_spent += launch.interpreted.work
            self.launches.append(launch)
            self.current = None
            self.exact_deadline = None


@dataclass
class SampleCost:
    """What a launch's sample has cost so far, as if no program had run exactly: each exact
    program is charged as its twin, the sampled run it stands for (where the twin was exact
    itself, its own run)."""

    work: Tally = field(default_factory=Tally)  # interpreted work: the budgets' clock
    wall_s: float = 0.0  # the same runs' interpreter seconds: the runaway stop's

    def charge(self, ran: Ran) -> None:
        self.work.add(ran.tally)
        self.wall_s += ran.took


# --- patches of the interpreter ------------------------------------------------------------------


# Bound at import, with everything the hooks and the count share: the candidate's worker takes
# the harness out of sys.modules after importing the candidate (worker_watch.hide_harness), and a
# module imported after that would be a fresh copy with a Counting of its own.
from core.harness.sim import hooks as _hooks  # noqa: E402
from core.harness.sim.loops import SampledRange  # noqa: E402
