"""Concurrent batches (core/harness/concurrent.py): the untimed stages of several candidates
at once, each in its own slot (zygote, trusted worker), the timing one candidate at a time with
no other candidate process alive; every verdict the one the candidate gets alone."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CANDIDATES = FIXTURES / "candidates"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)


@pytest.fixture(scope="module")
def axpy():
    return load_task(FIXTURES / "tasks" / "elementwise" / "axpy")


@pytest.fixture(scope="module")
def concurrent_evaluator():
    """A CPU harness whose batches run two candidates' untimed stages at once (a CPU device
    runs them one at a time unless told)."""
    saved = {k: os.environ.get(k) for k in ("ARENA_BATCH_CONCURRENCY",)}
    os.environ.update(ARENA_BATCH_CONCURRENCY="2")
    try:
        with Evaluator("cpu", timing=FAST) as evaluator:
            yield evaluator
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_concurrent_verdicts_are_those_of_one_at_a_time(
    concurrent_evaluator: Evaluator, axpy
) -> None:
    paths = [
        CANDIDATES / "axpy_torch.py",
        CANDIDATES / "axpy_wrong.py",
        CANDIDATES / "axpy_crash.py",
        CANDIDATES / "axpy_torch.py",
    ]
    seen = []
    batch = asyncio.run(
        concurrent_evaluator.aevaluate_batch(
            axpy, paths, seed=11, on_event=seen.append, profile="train"
        )
    )
    alone = [
        asyncio.run(concurrent_evaluator.aevaluate(axpy, p, seed=11, profile="train"))
        for p in paths
    ]
    assert (
        [(r.status, r.failed_stage) for r in batch]
        == [(r.status, r.failed_stage) for r in alone]
        == [("passed", None), ("failed", "correctness"), ("failed", "compile"), ("passed", None)]
    )
    assert all(
        r.stage("performance").status == "passed" and r.workloads for r in (batch[0], batch[3])
    )
    # Each candidate's events arrive as one evaluation, in the batch's order.
    kinds = [type(e).__name__ for e in seen]
    assert kinds.count("EvaluationStarted") == kinds.count("EvaluationFinished") == len(paths)


# The two candidates meet on an abstract Unix socket (the sandbox's network namespace is theirs
# to share): no folder is, since each candidate's worker sees only its own (issue 37).
MEET = "\0arena-meet-{token}"

HEARTBEAT = """
import os, socket, threading, time

def _ears():  # every observer process listens on a name of its own: MEET + its pid
    with open("/proc/net/unix") as f:
        names = [line.split()[-1] for line in f.read().splitlines()[1:] if len(line.split()) > 7]
    return ["\\0" + n[1:] for n in names if n.startswith("@" + MEET[1:])]

def _beat(name):
    out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    while True:
        for ear in _ears():
            try:
                out.sendto(name.encode(), ear)
            except OSError:
                pass  # gone
        time.sleep(0.01)

# A thread of its own worker and a process that leaves the worker's process group (double fork,
# new session): both keep beating after its untimed stages are over, unless they are killed.
threading.Thread(target=_beat, args=("hb-thread",), daemon=True).start()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            _beat("hb-process")
        finally:
            os._exit(0)
    os._exit(0)
os.wait()
"""

HOSTILE = (
    HEARTBEAT
    + """
import torch

def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    time.sleep(0.05)  # slow enough to be running while its neighbour is checked
    return x * 2 + b
"""
)

OBSERVER = """
import os, pathlib, socket, time
import torch
HERE = pathlib.Path(os.getcwd())  # its own evaluation folder: the test reads it afterwards
with open(HERE / "observer-processes", "a") as fh:
    fh.write(f"{{os.getpid()}}\\n")
FIRST = len((HERE / "observer-processes").read_text().split()) == 1
_ear = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
_ear.bind(MEET + str(os.getpid()))
_ear.setblocking(False)

def _heard():
    got = set()
    while True:
        try:
            got.add(_ear.recv(64).decode())
        except BlockingIOError:
            return got

if FIRST:  # the untimed worker: wait until the neighbour beats, so the two surely overlap
    for _ in range(500):
        if "hb-process" in _heard():
            break
        time.sleep(0.01)

def _alive():  # a beat that arrives while we watch (one heard before may be the last)
    _heard()
    time.sleep(0.03)  # three beats
    return bool(_heard())

def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with open(HERE / f"observer-{{os.getpid()}}", "a") as fh:
        fh.write("1" if _alive() else "0")
    return x * 2 + b
"""


def test_no_neighbour_is_alive_while_a_candidate_is_timed(
    concurrent_evaluator: Evaluator, axpy, tmp_path: Path, monkeypatch
) -> None:
    # Timed in a fresh worker, so the observer's timing runs in a process of its own (kept
    # workers, the CPU device's default, have their own test: tests/test_quiesce.py).
    monkeypatch.setenv("ARENA_QUIESCE_CPU", "0")
    paths = []
    meet = f"MEET = {MEET.format(token=os.getpid())!r}\n"
    for name, source in (("observer", OBSERVER), ("hostile", HOSTILE)):
        (tmp_path / name).mkdir()
        text = meet + source.replace("{{", "{").replace("}}", "}")
        (tmp_path / name / "candidate.py").write_text(text)
        paths.append(tmp_path / name / "candidate.py")
    observer, hostile = asyncio.run(
        concurrent_evaluator.aevaluate_batch(axpy, paths, seed=3, profile="train")
    )
    assert observer.status == "passed" and observer.workloads, [s.message for s in observer.stages]
    batch = max(concurrent_evaluator.root.glob("eval-*"), key=lambda p: p.stat().st_mtime)
    (shared,) = [p.parent for p in batch.glob("member-*/observer-processes")]
    pids = (shared / "observer-processes").read_text().split()
    # Its last process is the timing worker (started once every untimed stage had ended).
    untimed, timed = (
        "".join((shared / f"observer-{p}").read_text() for p in pids[:-1]),
        (shared / f"observer-{pids[-1]}").read_text(),
    )
    assert "1" in untimed, "the neighbour was running beside the observer's correctness runs"
    assert timed and "1" not in timed, (
        "a neighbour's thread or escaped process was alive while the observer was timed"
    )
    # The escaped process is the hostile candidate's finding, found by its own slot; not its neighbour's.
    assert any(f.startswith("leftover_processes") for f in hostile.integrity_flags), (
        hostile.integrity_flags
    )
    assert not observer.integrity_flags


def test_a_candidate_out_of_memory_is_rerun_alone_without_the_kept_workers(
    concurrent_evaluator: Evaluator, axpy
) -> None:
    """Workers kept for their timing hold the device memory their candidates keep alive. A
    candidate that ran out of memory beside them is evaluated again alone only after they are
    given up (its verdict is the one it gets alone); they are timed in fresh workers, and say so."""
    paths = [
        CANDIDATES / "axpy_out_of_memory.py",
        CANDIDATES / "axpy_torch.py",
        CANDIDATES / "axpy_torch.py",
    ]
    batch = asyncio.run(concurrent_evaluator.aevaluate_batch(axpy, paths, seed=12, profile="train"))
    assert [r.status for r in batch] == ["failed", "passed", "passed"]
    assert "out of memory" in (batch[0].stage(batch[0].failed_stage).message or "")
    for result in batch[1:]:
        assert "a neighbour ran out of memory" in (result.stage("performance").message or "")


def test_the_slots_trusted_workers_give_back_what_they_keep_for_speed_before_timing_and_reruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, axpy
) -> None:
    """The slots' trusted workers keep their references and their allocator's free blocks (on
    an H200 their peaks, 29-38 GiB each, left a rerun alone no room): once the untimed stages
    are over, and again before a candidate that ran out of memory is evaluated alone, each
    gives them back (the `trim` op); what is needed later is computed afresh."""
    from core.harness import trace

    monkeypatch.setenv("ARENA_BATCH_CONCURRENCY", "2")
    monkeypatch.setenv(trace.ENV, "1")
    paths = [CANDIDATES / "axpy_out_of_memory.py", CANDIDATES / "axpy_torch.py"]
    with Evaluator("cpu", workdir=tmp_path / "ev", timing=FAST) as evaluator:
        batch = asyncio.run(evaluator.aevaluate_batch(axpy, paths, seed=12, profile="train"))
        rows = (evaluator.root / trace.FILE_NAME).read_text().splitlines()
    assert [r.status for r in batch] == ["failed", "passed"]
    trims = [row["pid"] for row in map(json.loads, rows) if row["name"] == "trim"]
    # each slot's trusted worker: once before the timing, once before the rerun
    assert sorted(trims.count(pid) for pid in set(trims)) == [2, 2], trims


def test_a_gpu_batch_runs_as_many_candidates_at_once_as_its_memory_holds() -> None:
    """The slots of a GPU batch are bounded by the device's memory and the job's largest
    workload (inputs and outputs, about four times over, plus two contexts), never by the
    cores alone; a CPU batch is not bounded so."""
    from core.harness.concurrent import memory_slots, slot_count

    def job(device_type: str, memory_gb: float, n: int) -> dict:
        return {
            "device": {"type": device_type, "memory_bytes": int(memory_gb * 1e9)},
            "inputs": [{"name": "x", "dtype": "bfloat16"}],
            "outputs": [{"name": "out", "dtype": "float32"}],
            "stages": {
                "correctness": [{"shapes": {"x": [1024, 1024], "out": [1024, 1024]}}],
                "generalization": [{"shapes": {"x": [n, 1 << 20], "out": [n, 1 << 20]}}],
                "performance": [],
            },
            "batch": [{}] * 16,
            "concurrency": 8,
        }

    # 4096 x 2^20 elements: 8 GiB of bf16 in, 16 GiB of fp32 out; 4 x 24 GiB + 2 GiB a slot
    assert memory_slots(job("cuda", 141, 4096)) == 1
    assert slot_count(job("cuda", 141, 4096)) == 1
    assert memory_slots(job("cuda", 141, 256)) == int(
        0.75 * 141e9 // (4 * 256 * 6 * (1 << 20) + (2 << 30))
    )
    assert slot_count(job("cuda", 141, 16)) == 8  # small workloads: the asked-for count
    assert memory_slots(job("cpu", 141, 4096)) is None
