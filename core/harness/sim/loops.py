"""Loops inside a counted kernel (core/harness/sim/count.py): `range` and `tl.range` sampled
(but those whose carried values steer their later iterations: sim/steering.py), an exact
program's loops run whole with the counts of the iterations a sampled program skips dropped.
Imports only numpy and the count: the harness is shipped alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.harness.sim.count import INTERIOR_SAMPLE, Counting, ProgramCounts, stratified
from core.harness.sim.steering import loop_at_caller


class SampledRange:
    """`range` (and `tl.range`) inside a counted kernel. A loop of many iterations runs its first
    and its last (where masked tails land) and `INTERIOR_SAMPLE` iterations drawn across the
    whole range between them, one in each equal stratum at a seeded place; the iterations not
    run are counted as the mean of the interior ones that were. Drawn across the range, not
    the first few: a loop that does its work only in its middle iterations (a masked prologue
    and epilogue) is counted as it runs. An interpreted GEMM step costs milliseconds, so this is
    what makes LLM-sized loops countable in a second. Loop-carried values (accumulators,
    advanced pointers) are wrong after a skipped iteration; only the counts matter here. A loop
    that carries a value steering its later iterations (sim/steering.py: a persistent kernel's
    tile index, a grouped GEMM's running row offset) would count other work than it does, so
    it runs whole, counted. In an exact program (Counting.running_exactly) every iteration
    runs, in order, and the counts of those a sampled program skips are dropped again."""

    def __init__(self, *args: Any, **_options: Any):
        self.range = range(*(_as_int(a) for a in args))
        # Read where the kernel makes its range: the loop's header is the caller's line.
        carry = loop_at_caller() if Counting.active is not None else None
        self.steered = bool(carry and carry.steering)

    def __iter__(self):  # type: ignore[no-untyped-def]
        r = self.range
        c = Counting.active
        p = c.program if c is not None else None
        if p is not None:
            p.loop_iterations += len(r)
        if c is None or p is None or len(r) <= INTERIOR_SAMPLE + 2 or self.steered:
            yield from r
            return
        if not c.running_exactly():
            c.exact = False  # iterations skipped: loop-carried values are wrong
        interior = len(r) - 2
        picks = stratified(interior, INTERIOR_SAMPLE, salt=c.salt, last=False)
        yield r[0]
        ran = ProgramCounts()
        at = 0  # the next interior iteration not yet run
        for i in picks:
            # An exact program also runs the iterations a sampled one skips, and forgets their
            # counts: it is billed as the sampled program it stands for.
            while at < i and c.running_exactly():
                yield from _forgotten(c, p, r[1 + at])
                at += 1
            before = p.copy()
            yield r[1 + i]
            ran.add(p.minus(before), 1.0)
            at = max(at, i + 1)
        while at < interior and c.running_exactly():
            yield from _forgotten(c, p, r[1 + at])
            at += 1
        p.add(ran, (interior - len(picks)) / len(picks))
        yield r[-1]

    def __len__(self) -> int:
        return len(self.range)


def _forgotten(c: Counting, p: ProgramCounts, i: int):  # type: ignore[no-untyped-def]
    """Yield iteration `i` of an exact program's loop with its counts dropped: counting skips
    its work (`forgetting`), and whatever was still added is undone."""
    saved = p.copy()
    c.forgetting += 1
    try:
        yield i
    finally:
        c.forgetting -= 1
        p.restore(saved)


def _as_int(value: Any) -> int:
    handle = getattr(value, "handle", None)
    if handle is not None:
        return int(np.asarray(handle.data).reshape(-1)[0])
    return int(getattr(value, "value", value))
