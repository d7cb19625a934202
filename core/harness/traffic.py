"""How many bytes the ranks of a multi-rank candidate move while every rank is inside a timed
call (docs/integrity.md, class 2).

A candidate's ranks can skip the collective: regenerate each other's inputs, or pass them
through a channel of their own outside the timed calls. Inputs from the checker close the
first; this closes what is left where it can be seen. On CPU ranks the process group (gloo)
talks over loopback TCP in the sandbox's own network namespace, so the loopback interface's
byte counter, read by the parent, sees every byte the collective moves. Each timed call's
window runs from the parent's `go` (every rank enters the call) to the first rank that is out
of it (at the next barrier, or with its reply): traffic before the inputs exist, or while a
rank waits at a barrier, is not counted. The candidate's ranks must move at least `SHARE` of
what the baseline's collective moves per call; a timed call that moves nothing is a collective
that did not run in it. Unsandboxed, other processes on the loopback add to the counter, which
can hide a cheat but never fail an honest candidate.
"""

from __future__ import annotations

import statistics
from pathlib import Path

SHARE = 0.25  # of the baseline's bytes per call that the candidate's calls must move
NET_DEV = Path("/proc/net/dev")


def loopback_bytes() -> int | None:
    """Bytes sent on the loopback interface so far (None where it cannot be read)."""
    try:
        for line in NET_DEV.read_text().splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])  # transmit bytes
    except (OSError, ValueError, IndexError):
        return None
    return None


class Meter:
    """Per-call loopback bytes of one side's timed round, fed by the parent's barrier loop."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self._start: int | None = None

    def go(self) -> None:
        self._start = loopback_bytes()

    def arrive(self) -> None:
        if self._start is None:
            return
        now = loopback_bytes()
        if now is not None:
            self.calls.append(max(0, now - self._start))
        self._start = None

    def median(self) -> float | None:
        return statistics.median(self.calls) if self.calls else None


def problem(candidate: Meter, baseline: Meter, label: str) -> str | None:
    """The performance stage's failure where the candidate's timed calls moved clearly less
    than the baseline's collective does, else None."""
    mine, theirs = candidate.median(), baseline.median()
    if mine is None or not theirs:
        return None
    if mine < SHARE * theirs:
        return (
            f"{label}: collective_outside_timed_calls: the candidate's ranks moved {mine:.0f} bytes between them per timed "
            f"call (median over {len(candidate.calls)}), the baseline's collective {theirs:.0f}: at least "
            f"{100 * SHARE:.0f}% must move inside the call, through the process group (a rank that rebuilds its peers' "
            "inputs, or gets them outside the timed call, is timed for a collective it did not run)"
        )
    return None
