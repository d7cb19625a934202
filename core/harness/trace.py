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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENV = "ARENA_HARNESS_TRACE"
FILE_NAME = "harness_trace.jsonl"

_path = os.environ.get(ENV) or None
_role = "harness"
# The file, held open: a worker opens it again right after it closed what it inherited
# (`reopen`, from worker_process.bootstrap), so a candidate's worker still writes its spans after
# its own mount namespace covers the harness's folders (core/harness/isolation.py). Each write
# first checks that the descriptor is still this file's (O_APPEND keeps each line whole).
_held: tuple[int, int] | None = None  # (descriptor, the file's inode)


def reopen() -> None:
    """Hold the trace file open in this process (a no-op when tracing is off)."""
    global _held
    _held = None
    if _path is None:
        return
    try:
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _held = (fd, os.fstat(fd).st_ino)
    except OSError:
        _held = None


reopen()


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
        if _held is not None and os.fstat(_held[0]).st_ino == _held[1]:
            os.write(_held[0], (line + "\n").encode())
        else:
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


def spans(path: Path, start: float, end: float) -> Iterator[dict[str, Any]]:
    """The spans in the trace at `path` that began within [start, end] (a window on the same
    monotonic clock: one evaluation, one batch), in file order."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            row["start"], row["seconds"] = float(row["start"]), float(row["seconds"])
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by two writers, or not the harness's
        if "role" in row and "name" in row and start <= row["start"] <= end:
            yield row


def by_name(rows: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Seconds per `role: name` of these spans."""
    seconds: dict[str, float] = {}
    for row in rows:
        key = f"{row['role']}: {row['name']}"
        seconds[key] = seconds.get(key, 0.0) + row["seconds"]
    return seconds


def totals(path: Path, start: float, end: float) -> dict[str, float]:
    """Seconds per `role: name` of the spans in the trace at `path` that began within
    [start, end]."""
    return by_name(spans(path, start, end))
