"""Bounding the work of another benchmark's code at import by counting it, not by a clock.

`counted(limit)` counts the Python lines the code inside runs (sys.settrace) and stops it with
`TooMuchWork` past `limit`: the same code stops at the same line on every machine under any
load, so whether a workload is written never depends on how busy the machine was. A reference
written as Python loops over elements (`for v in range(vocab_size): ... .item()`) is what this
bounds; tensor operations are one line each, and their size is bounded by the workload's own.
`cpu_limited(seconds)` bounds what lines cannot count (Triton's interpreter spends its time in
numpy) by CPU time, which load does not change either.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any


class TooMuchWork(BaseException):
    """Raised inside the counted code (a BaseException, so its own `except Exception` lets it through)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


@contextlib.contextmanager
def counted(limit: int) -> Iterator[None]:
    """Run the block with at most `limit` Python lines executed, else TooMuchWork."""
    seen = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            seen[0] += 1
            if seen[0] > limit:
                raise TooMuchWork(f"more than {limit:,} Python lines")
        return local

    def call(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    sys.settrace(call)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def cpu_limited(seconds: float) -> Iterator[None]:
    """Run the block with at most `seconds` of this process's CPU time, else TooMuchWork."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TooMuchWork(f"more than {seconds:g} CPU seconds")

    previous = signal.signal(signal.SIGPROF, expired)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
