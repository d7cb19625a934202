"""Where a harness's seconds go: an opt-in trace of its spans, for profiling (bench/turn_profile.py).

With `ARENA_HARNESS_TRACE` naming a file, each span (an op a worker answers, a request the parent
waits for, a step of an evaluation's start and end) is appended to it as one JSON line:
`{"pid", "role", "name", "start", "seconds"}`, `start` on the machine-wide monotonic clock, so the
spans of all of a job's processes line up. The engine sets the variable for its harness when its
own environment has `ARENA_HARNESS_TRACE=1` (core/evaluation/executors.py): the file is then
`harness_trace.jsonl` in the evaluator's log folder.

Off (the default), a span costs one attribute lookup. The trace is a diagnostic, never evidence:
a candidate's process may write to the file too, so nothing the arena scores reads it. A write
that fails is dropped: tracing never changes what an evaluation does.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "ARENA_HARNESS_TRACE"
FILE_NAME = "harness_trace.jsonl"

_path = os.environ.get(ENV) or None
_role = "harness"


def enabled() -> bool:
    return _path is not None


def set_role(role: str) -> None:
    """Name the spans of this process from here on (a worker, after its fork)."""
    global _role
    _role = role


def record(name: str, start: float, seconds: float) -> None:
    if _path is None:
        return
    line = json.dumps(
        {"pid": os.getpid(), "role": _role, "name": name, "start": start, "seconds": seconds}
    )
    try:
        with open(_path, "a") as out:
            out.write(line + "\n")
    except OSError:
        pass


@contextmanager
def span(name: str) -> Iterator[None]:
    if _path is None:
        yield
        return
    start = time.monotonic()
    try:
        yield
    finally:
        record(name, start, time.monotonic() - start)


def totals(path: Path, start: float, end: float) -> dict[str, float]:
    """Seconds per `role: name` of the spans in the trace at `path` that began within
    [start, end] (a window on the same monotonic clock: one evaluation, one batch)."""
    seconds: dict[str, float] = {}
    if not path.exists():
        return seconds
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            key, began, took = f"{row['role']}: {row['name']}", float(row["start"]), row["seconds"]
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by two writers, or not the harness's
        if start <= began <= end:
            seconds[key] = seconds.get(key, 0.0) + float(took)
    return seconds
