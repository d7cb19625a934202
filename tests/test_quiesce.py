"""Kept workers in a concurrent batch (core/harness/quiesce.py): a candidate is timed in the
worker its untimed stages ran in only while the driver vouches that every other waiting worker
is idle (CUDA locked, then stopped); any step that fails falls back to a fresh worker, and the
result says which worker timed it and why. The driver calls are faked at `Quiescer.call`'s
boundary; the batch tests use the CPU device's queue-less driver (its default; ARENA_QUIESCE_CPU=0
turns it off)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness.quiesce import LOCKED, RUNNING, Quiescer, proc_state
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CANDIDATES = FIXTURES / "candidates"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)
GPU_JOB = {"device": {"type": "cuda", "torch_device": "cuda:0"}, "timing": {"kind": "measured"}}


class FakeDriver:
    """The driver as the checkpoint API documents it, with failures to order."""

    def __init__(self, fail: str | None = None, rc: Any = 304):
        self.states: dict[int, int] = {}
        self.calls: list[str] = []
        self.fail, self.rc = fail, rc

    def __call__(self, op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        self.calls.append(op)
        if op == self.fail:
            return {"rc": self.rc}
        if op == "state":
            return {"rc": 0, "state": self.states.get(pid, RUNNING)}
        self.states[pid] = LOCKED if op == "lock" else RUNNING
        return {"rc": 0}


@pytest.fixture
def child() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_held_worker_is_locked_then_stopped_and_resumed_in_reverse(child) -> None:
    driver = FakeDriver()
    q = Quiescer(GPU_JOB, call=driver)
    assert q.hold(child.pid) is None
    assert proc_state(child.pid) == "T" and driver.states[child.pid] == LOCKED
    assert Quiescer.intact(child.pid) is None
    assert q.resume(child.pid) is None
    assert driver.calls == ["state", "lock", "state", "state", "unlock", "state"]
    assert proc_state(child.pid) != "T" and driver.states[child.pid] == RUNNING


def test_a_failed_lock_leaves_the_worker_running_and_says_why(child) -> None:
    q = Quiescer(GPU_JOB, call=FakeDriver(fail="lock", rc=304))
    why = q.hold(child.pid)
    assert why is not None and "cuCheckpointProcessLock returned 304" in why
    assert proc_state(child.pid) != "T"  # the caller kills it and times a fresh worker


def test_a_worker_that_died_or_was_woken_or_unlocked_while_held_is_not_resumed(child) -> None:
    driver = FakeDriver()
    q = Quiescer(GPU_JOB, call=driver)
    assert q.hold(child.pid) is None
    os.kill(child.pid, signal.SIGCONT)  # a neighbour of the same uid woke it
    time.sleep(0.05)
    assert "resumed while it waited" in (Quiescer.intact(child.pid) or "")
    assert "resumed while it waited" in (q.resume(child.pid) or "")

    driver.states.clear()
    os.kill(child.pid, signal.SIGSTOP)  # stopped again, but someone unlocked its CUDA
    time.sleep(0.05)
    assert "state of the worker is 0, not 1" in (q.resume(child.pid) or "")

    child.kill()
    child.wait()
    assert "died while it waited" in (q.resume(child.pid) or "")


def test_a_hung_driver_call_ends_every_later_hold(child) -> None:
    q = Quiescer(GPU_JOB, call=FakeDriver(fail="lock", rc="hung"))
    assert "hung" in (q.hold(child.pid) or "")
    assert "hung" in (q.hold(child.pid) or "")  # no second call to a driver in unknown state


def test_no_helper_and_a_reason_on_the_cpu_device() -> None:
    q = Quiescer({"device": {"type": "cpu", "torch_device": "cpu"}, "timing": {"kind": "measured"}})
    assert q.helper is None and q.reason == "the device is not a CUDA GPU"
    assert q.hold(os.getpid()) == "the device is not a CUDA GPU"


# --- through a concurrent batch on the CPU device --------------------------------------------

WAKER = """
import os, signal
import torch

def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
        return int(fields[1]), fields[0]
    except (OSError, ValueError):
        return 0, ""

def _wake():  # SIGNAL every stopped worker of this harness (its zygote's siblings' children)
    top = _ppid(_ppid(os.getpid())[0])[0]
    for name in os.listdir("/proc"):
        if name.isdigit():
            parent, state = _ppid(int(name))
            if state == "T" and _ppid(parent)[0] == top:
                os.kill(int(name), signal.SIGNAL)

def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _wake()
    return x * 2 + b
"""


@pytest.fixture(scope="module")
def axpy():
    return load_task(FIXTURES / "tasks" / "elementwise" / "axpy")


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator("cpu", timing=FAST) as ev:
        yield ev


def _timing_notes(results: list[Any]) -> list[str | None]:
    return [r.stage("performance").message for r in results]


def test_the_cpu_device_times_in_fresh_workers_and_keeps_its_verdicts(
    evaluator: Evaluator, axpy, monkeypatch
) -> None:
    monkeypatch.setenv("ARENA_BATCH_CONCURRENCY", "2")
    monkeypatch.setenv("ARENA_QUIESCE_CPU", "0")  # kept by default: asked not to here
    paths = [CANDIDATES / "axpy_torch.py", CANDIDATES / "axpy_wrong.py"]
    batch = asyncio.run(evaluator.aevaluate_batch(axpy, paths, seed=5, profile="train"))
    assert [(r.status, r.failed_stage) for r in batch] == [
        ("passed", None),
        ("failed", "correctness"),
    ]
    assert _timing_notes(batch)[0] == "fresh worker: the device is not a CUDA GPU"


def test_kept_workers_time_without_a_recompile_and_keep_their_verdicts(
    evaluator: Evaluator, axpy, monkeypatch
) -> None:
    monkeypatch.setenv("ARENA_BATCH_CONCURRENCY", "2")
    monkeypatch.setenv("ARENA_QUIESCE_CPU", "1")
    paths = [
        CANDIDATES / "axpy_torch.py",
        CANDIDATES / "axpy_wrong.py",
        CANDIDATES / "axpy_torch.py",
    ]
    kept = asyncio.run(evaluator.aevaluate_batch(axpy, paths, seed=5, profile="train"))
    assert [(r.status, r.failed_stage) for r in kept] == [
        ("passed", None),
        ("failed", "correctness"),
        ("passed", None),
    ]
    notes = _timing_notes(kept)
    assert notes[0] == notes[2] and (notes[0] or "").startswith("its own worker"), notes


@pytest.mark.parametrize("sig, seen", [("SIGCONT", "resumed"), ("SIGKILL", "died")])
def test_a_waiting_worker_that_was_resumed_or_killed_is_timed_fresh(
    evaluator: Evaluator, axpy, monkeypatch, tmp_path: Path, sig: str, seen: str
) -> None:
    monkeypatch.setenv("ARENA_BATCH_CONCURRENCY", "2")
    monkeypatch.setenv("ARENA_QUIESCE_CPU", "1")
    (tmp_path / "waker.py").write_text(WAKER.replace("SIGNAL", sig))
    # The waker resumes (or kills) every stopped worker it can find, at each of its calls:
    # whoever it reached passes on a fresh worker's timing, never on the one that ran (or
    # died) while it should have waited.
    paths = [CANDIDATES / "axpy_torch.py", tmp_path / "waker.py", CANDIDATES / "axpy_torch.py"]
    woken = asyncio.run(evaluator.aevaluate_batch(axpy, paths, seed=5, profile="train"))
    assert [r.status for r in woken] == ["passed"] * 3
    notes = _timing_notes(woken)
    # The third is waiting while the waker runs (its untimed calls or its timing, whichever
    # comes after the third's untimed stages end); the first may have been timed before.
    assert (notes[2] or "").startswith("fresh worker"), notes
    assert seen in (notes[2] or "") or "another candidate resumed" in (notes[2] or ""), notes
    assert (notes[1] or "").startswith(("its own worker", "fresh worker: a waiting worker")), notes
