"""The clock a counted launch's sample grows by (core/harness/sim/count.py): interpreted work.

A launch's sample of programs grows (8 to 32 where programs differ, to 1,024 where most are
idle, to 8,192 in a recount) while what it cost stays within a budget. That cost was once the
interpreter's seconds, so a loaded machine stopped a sample smaller and the same source was
predicted differently run to run (1.2% for the Triton tutorial's grouped GEMM). It is now the
work the interpreter actually ran, tallied by the active `Counting` from its builder hooks
(sim/hooks.py): every builder operation a program runs costs `OP_WORK` plus the elements it
makes (and, for loads, stores, atomics and dots, the elements of its array arguments); a
reduction, and a libdevice function (computed on numpy, outside the builder), costs `OP_WORK`
plus its input's or its result's elements. Loop iterations a program skips cost
nothing (their counts are extrapolated, not run); those an exact program runs and forgets cost
what they ran. The same source on the same inputs tallies the same work on any machine, loaded
or not.

`OP_WORK` and `WORK_PER_S` were fitted on an idle machine (bench/sim_work_clock.py;
docs/simulation.md, "The sample's clock"), seconds ≈ (OP_WORK · operations + elements) /
WORK_PER_S over real kernels' launches, so that `budget(1.0)` buys what one second of
interpreter time bought there. Imports nothing: the harness is shipped alone.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fitted on an idle 2-core Intel Xeon (2.8 GHz), 2026-12-05, over 235 launches of 52 kernels
# (bench/sim_work_clock.py): 26.9 µs per operation (the semantic layer, its handles and types)
# and 2.9 ns per element, within 11% at the median launch, 49% at the 90th percentile.
OP_WORK = 9_130  # an operation's fixed cost, in elements
WORK_PER_S = 340_000_000  # work the interpreter ran per second


def budget(seconds: float) -> int:
    """The work the calibration machine's interpreter ran in `seconds`: a budget that keeps the
    meaning it had in seconds, and no longer depends on the machine's load."""
    return int(seconds * WORK_PER_S)


def seconds(work: float) -> float:
    """`work` in the calibration machine's interpreter seconds (a trial's cost, for reading)."""
    return work / WORK_PER_S


@dataclass
class Tally:
    """Interpreted work: builder operations run and the elements they handled."""

    ops: int = 0
    elements: int = 0

    @property
    def work(self) -> int:
        return OP_WORK * self.ops + self.elements

    def add(self, other: Tally) -> None:
        self.ops += other.ops
        self.elements += other.elements

    def since(self, earlier: Tally) -> Tally:
        """What was tallied after `earlier` (a copy of this tally taken before)."""
        return Tally(self.ops - earlier.ops, self.elements - earlier.elements)

    def copy(self) -> Tally:
        return Tally(self.ops, self.elements)
