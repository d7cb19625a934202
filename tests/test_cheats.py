"""The cheat suite: every exploit in tests/cheats/ is caught by the defense named for it, and
honest candidates are never flagged (docs/integrity.md).

Each cheat is evaluated end to end on the CPU device through a warm harness, as `arena eval`
runs it, with a short timing budget. The catalogue (tests/cheats/catalogue.py) says what each
cheat tries, which defense must fire, and how the result must look."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.devices.device import probe
from core.evaluation import sandbox, scan
from core.evaluation.evaluator import Evaluator, check_candidate
from core.evaluation.job import Timing, build_job, task_dtypes
from core.evaluation.verdict import assemble, wall_clock_findings
from core.harness import channel, inputs
from core.model import events
from core.model.task import Limits
from core.tasks.discovery import discover
from core.tasks.spec import load_task
from tests.cheats.catalogue import (
    CHEATS,
    HERE,
    PUBLISHED_CANDIDATES,
    TASKS,
    by_name,
    outcome_problems,
)
from tests.conftest import FIXTURES, ROOT

FAST = Timing(alternations=3, budget_ms=60.0, min_calls=1, max_calls=50)
LIMITS = Limits(compile_s=30, correctness_s=30, performance_s=30)
HANG_LIMITS = Limits(compile_s=10, correctness_s=3, performance_s=10)


@pytest.fixture(scope="module")
def cheat_evaluator():
    with Evaluator("cpu", timing=FAST) as evaluator:
        yield evaluator


def _task(name: str):
    return load_task(TASKS[name])


def _running(marker: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False
    ).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def _task_dir_hidden(evaluator: Evaluator, task_dir: Path) -> bool:
    harness = getattr(evaluator.executor, "harness", None)
    return bool(
        harness is not None
        and getattr(harness, "sandboxed", False)
        and harness.policy.view(task_dir) == "hidden"
    )


def _describe(result) -> str:
    return json.dumps(
        {
            "status": result.status,
            "failed_stage": result.failed_stage,
            "points": result.points,
            "speedup": result.speedup,
            "stages": [(s.name, s.status, (s.message or "")[:300]) for s in result.stages],
            "flags": result.integrity_flags,
            "notes": [n[:160] for n in result.review_notes],
        },
        indent=1,
    )


@pytest.mark.parametrize("cheat", [c for c in CHEATS if c.special is None], ids=lambda c: c.file)
def test_cheat_is_caught_by_its_defense(cheat_evaluator, cheat):
    task = _task(cheat.task)
    if cheat.expect == "sandbox":
        notes = scan.scan_candidate(cheat.path, task_dtypes(task))
        assert not outcome_problems("gap", cheat.notes, _NotesOnly(notes)), notes
        if not sandbox.is_sandboxed(sandbox.sandbox_status()):
            why = "needs the sandbox to hide the task folder (docs/integrity.md): here the candidate can read it, and only the scan's notes fire"
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI=true: {why}; {sandbox.sandbox_status()}")
            pytest.skip(why)
    seen: list[events.Event] = []
    limits = HANG_LIMITS if cheat.file == "infinite_loop" else LIMITS
    result = cheat_evaluator.evaluate(task, cheat.path, limits=limits, on_event=seen.append)
    assert result.status != "infrastructure_error", _describe(result)
    if cheat.expect == "sandbox":
        # Sandboxed, the task folder is an empty mount: the stolen answer is not there.
        assert _task_dir_hidden(cheat_evaluator, task.path)
        assert result.status == "failed" and result.failed_stage == "correctness", _describe(result)
    else:
        problems = outcome_problems(cheat.expect, cheat.notes, result)
        assert not problems, f"{cheat.file}: {problems}\n{_describe(result)}"
    assert [type(e) for e in seen].count(events.EvaluationFinished) == 1
    if cheat.file == "forged_verdicts":
        # Its lines may show up as text in the compile log; never as an event.
        forged = [
            e
            for e in seen
            if "FORGED" in (getattr(e, "message", None) or "") + (getattr(e, "error", None) or "")
        ]
        assert forged == [], "a forged verdict reached the engine"
    if cheat.marker:
        time.sleep(0.2)
        assert _running(cheat.marker) == [], f"{cheat.file} left processes running"


class _NotesOnly:
    """A stand-in result that carries only the static scan's notes."""

    status, points, integrity_flags = "passed", 0.0, ()

    def __init__(self, notes: list[str]):
        self.review_notes = notes


@pytest.mark.parametrize(
    "cheat", [c for c in CHEATS if c.expect == "sandbox"], ids=lambda c: c.file
)
def test_cheats_that_need_the_sandbox_are_noted_by_the_scan(cheat):
    notes = scan.scan_candidate(cheat.path, task_dtypes(_task(cheat.task)))
    assert not outcome_problems("gap", cheat.notes, _NotesOnly(notes)), notes


def _unsandboxed_evaluator(monkeypatch, tmp_path: Path) -> Evaluator:
    """These two defenses are those of the path without the sandbox (inside it, the task folder
    and the harness are read-only mounts, and the cheats cannot even write them)."""
    monkeypatch.setenv("ARENA_SANDBOX", "off")
    return Evaluator("cpu", workdir=tmp_path / "runs", timing=FAST)


def test_a_candidate_rewriting_the_task_files_changes_nothing_and_is_flagged(monkeypatch, tmp_path):
    task_dir = tmp_path / "tasks" / "elementwise" / "axpy"
    shutil.copytree(TASKS["axpy"], task_dir)
    for p in [
        task_dir,
        *task_dir.iterdir(),
    ]:  # open to all: unsandboxed as root, the candidate is uid 65534
        p.chmod(0o777 if p.is_dir() else 0o666)
    original = (task_dir / "reference.py").read_text()
    cheat = tmp_path / "modify_task_files.py"
    cheat.write_text(
        by_name("modify_task_files").path.read_text().replace("@TASK_DIR@", str(task_dir))
    )
    with _unsandboxed_evaluator(monkeypatch, tmp_path) as evaluator:
        result = evaluator.evaluate(load_task(task_dir), cheat, limits=LIMITS)
    assert (task_dir / "reference.py").read_text() != original, (
        "the cheat did not manage to rewrite the reference"
    )
    # The verdict used the reference as it was: the wrong answer failed, despite the new reference.
    assert (
        result.failed_stage == "correctness" and result.stage("correctness").status == "failed"
    ), _describe(result)
    assert not outcome_problems("flag:task_files_modified", (), result), _describe(result)


def test_a_candidate_rewriting_the_harness_is_flagged(tmp_path):
    """Run as a remote host runs it (`python -m core.harness run JOB --events-fd N`), from a
    copy of the harness that the cheat rewrites."""
    copy = tmp_path / "pkg"
    (copy / "core" / "harness").mkdir(parents=True)
    shutil.copy2(ROOT / "core" / "__init__.py", copy / "core" / "__init__.py")
    for path in (ROOT / "core" / "harness").glob("*.py"):
        shutil.copy2(path, copy / "core" / "harness" / path.name)
    cheat = tmp_path / "modify_harness.py"
    cheat.write_text(
        by_name("modify_harness")
        .path.read_text()
        .replace("@HARNESS_DIR@", str(copy / "core" / "harness"))
    )
    task, info = _task("axpy"), probe("cpu")
    job = build_job(task, cheat, info, "cpu", 7, tmp_path / "work", LIMITS, timing=FAST)
    job_path = tmp_path / "job.json"
    job_path.write_text(json.dumps(job))
    read_fd, write_fd = os.pipe()
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"
    }  # `core` from the copy (the working folder)
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.harness", "run", str(job_path), "--events-fd", str(write_fd)],
        cwd=copy,
        env=env,
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as stream:
        lines = stream.read().splitlines()
    assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    seen = [events.parse(line) for line in lines if line.strip()]
    result = assemble(task, job, info, check_candidate(cheat), seen)
    assert "arena-cheat" in (copy / "core" / "harness" / "timing.py").read_text(), (
        "the cheat did not reach the harness copy"
    )
    assert not outcome_problems("flag:harness_files_modified", (), result), _describe(result)
    assert not job_path.exists(), "the harness consumes its job file"


def test_a_queued_job_never_lies_on_disk_while_another_candidate_runs(tmp_path):
    """Two evaluations at once on one warm harness: the second waits while the first's
    candidate runs and looks for job files beside its folder (docs/integrity.md, class 5)."""
    import asyncio

    task = _task("axpy")
    with Evaluator("cpu", workdir=tmp_path / "runs", timing=FAST) as evaluator:

        async def both():
            reader = asyncio.ensure_future(
                evaluator.aevaluate(
                    task, by_name("queued_job_reader").path, limits=LIMITS, performance=False
                )
            )
            await asyncio.sleep(
                1.0
            )  # the reader's evaluation holds the harness; the next one queues behind it
            other = await evaluator.aevaluate(
                task, FIXTURES / "candidates" / "axpy_torch.py", limits=LIMITS, performance=False
            )
            return await reader, other

        reader, other = asyncio.run(both())
    assert reader.status == "passed", (
        f"the candidate found another evaluation's job: {_describe(reader)}"
    )
    assert other.status == "passed"
    assert not list((tmp_path / "runs").glob("*/job.json"))


def test_a_later_candidate_finds_nothing_an_earlier_one_left(tmp_path):
    """One warm harness, as `arena serve` and the reward API's slots keep one: a candidate that
    fills /tmp, then one that looks for every earlier candidate's files (and rewrites them),
    then one that checks /tmp: each sees only its own evaluation (core/harness/isolation.py),
    and no candidate's staged files outlive its evaluation."""
    task = _task("axpy")
    with Evaluator("cpu", workdir=tmp_path / "runs", timing=FAST) as evaluator:
        honest = evaluator.evaluate(
            task, FIXTURES / "candidates" / "axpy_torch.py", limits=LIMITS, performance=False
        )
        hog = evaluator.evaluate(task, by_name("tmp_hog").path, limits=LIMITS, performance=False)
        snoop = evaluator.evaluate(
            task, by_name("earlier_candidates").path, limits=LIMITS, performance=False
        )
        check = evaluator.evaluate(
            task, by_name("tmp_check").path, limits=LIMITS, performance=False
        )
    for result in (honest, hog, snoop, check):
        assert result.status == "passed", _describe(result)
        assert not any("not isolated" in (s.note or "") for s in result.stages), _describe(result)
    if sandbox.is_sandboxed(sandbox.sandbox_status()):
        leftovers = [p for p in (tmp_path / "runs").rglob("*.py")]
        assert leftovers == [], f"candidate files outlived their evaluation: {leftovers}"


def test_batch_members_cannot_see_each_other(tmp_path):
    """A batch runs its members in one job folder: a member that looks for the others' files
    (and the harness's own copies) finds nothing."""
    import asyncio

    from core.evaluation.batch import evaluate_batch

    task = _task("axpy")
    paths = [
        FIXTURES / "candidates" / "axpy_torch.py",
        by_name("earlier_candidates").path,
        TASKS["axpy"] / "starter.py",
        by_name("earlier_candidates").path,
    ]
    with Evaluator("cpu", workdir=tmp_path / "runs", timing=FAST) as evaluator:
        results = asyncio.run(
            evaluate_batch(evaluator, task, paths, None, None, LIMITS, False, False, None)
        )
    assert [r.status for r in results] == ["passed"] * 4, [_describe(r) for r in results]


HONEST = [
    ("axpy", FIXTURES / "candidates" / "axpy_torch.py"),
    ("axpy", TASKS["axpy"] / "starter.py"),
    ("axpy", TASKS["axpy"] / "baseline.py"),
    ("axpy_loose", FIXTURES / "candidates" / "axpy_torch.py"),
    *PUBLISHED_CANDIDATES,  # Liger-Kernel's SwiGLU and fused add + RMSNorm, as candidates for our tasks
]


@pytest.mark.parametrize("task_name,candidate", HONEST, ids=[f"{t}-{c.stem}" for t, c in HONEST])
def test_honest_candidates_are_never_flagged(cheat_evaluator, task_name, candidate):
    """Under the same timing as the cheats; tests/test_bundled.py asserts the same for every
    bundled task's starter and baseline."""
    result = cheat_evaluator.evaluate(_task(task_name), candidate, limits=LIMITS)
    assert result.status == "passed", _describe(result)
    assert result.integrity_flags == [] and result.review_notes == [], _describe(result)
    # Two sampled calls a round (one when a slow candidate makes a single call a round).
    assert all(
        FAST.alternations <= w.candidate["checked_calls"] <= 2 * FAST.alternations
        for w in result.workloads
    )


def test_every_cheat_in_the_folder_is_in_the_catalogue():
    files = {p.stem for p in HERE.glob("*.py")} - {"__init__", "catalogue"}
    assert files == {c.file for c in CHEATS}


# --- the pieces, directly ---------------------------------------------------------------------


def test_the_scan_is_silent_on_every_bundled_task_and_the_honest_fixtures():
    for task in discover():
        for name in ("starter.py", "baseline.py", "reference.py"):
            assert scan.scan_candidate(task.file(name), task_dtypes(task)) == [], (task.id, name)
    assert scan.scan_candidate(FIXTURES / "candidates" / "axpy_torch.py", ["float32"]) == []


def test_the_scan_sees_through_comments_but_not_strings():
    source = '# import threading here would be fine\n"""docstring: threading"""\nimport sys\nf = getattr(sys, "_getframe")\n'
    notes = scan.scan_source(source)
    assert [n.split(":")[1] for n in notes] == ["introspection"]
    assert "line 4" in notes[0]


def test_the_channel_refuses_garbage_and_half_frames():
    a, b = socket.socketpair()
    try:
        b.sendall(b'{"v": 1, "type": "evaluation_finished", "status": "passed"}\n')
        with pytest.raises(channel.ChannelClosed, match="malformed"):
            channel.recv(a, timeout=1)
    finally:
        a.close(), b.close()
    a, b = socket.socketpair()
    try:
        channel.send(b, {"ok": True}, b"x" * 100)
        with pytest.raises(channel.ChannelClosed, match="at most 10"):
            channel.recv(a, timeout=1, max_payload=10)
    finally:
        a.close(), b.close()
    a, b = socket.socketpair()
    try:
        b.sendall(b"\0\0\0\0\0\0\0\x10")  # half a frame, then silence: a deadline, not a hang
        start = time.monotonic()
        with pytest.raises(channel.ChannelTimeout):
            channel.recv(a, timeout=0.3)
        assert time.monotonic() - start < 2
    finally:
        a.close(), b.close()


def test_outputs_are_accepted_only_as_described():
    import torch

    meta, data = inputs.pack([torch.ones(2, 3)])
    want = [{"dtype": "float32", "shape": [2, 3]}]
    assert inputs.unpack(meta, data, want)[0].sum() == 6
    with pytest.raises(inputs.OutputError, match="described"):
        inputs.unpack([{"dtype": "float64", "shape": [2, 3]}], data, want)
    with pytest.raises(inputs.OutputError, match="bytes"):
        inputs.unpack(meta, data + b"\0", want)


def _side(median_us: float, rounds: list[tuple[float, float, int]]) -> dict:
    return {
        "median_us": median_us,
        "rounds": [{"wall_s": w, "reported_s": r, "calls": n} for w, r, n in rounds],
    }


def test_the_wall_clock_proves_a_forged_timer_and_notes_hidden_work():
    base = _side(10.0, [(0.010, 0.0005, 50)] * 3)
    flags, notes = wall_clock_findings(
        "w",
        "queued",
        _side(10.0, [(0.010, 0.0005, 50), (0.010, 0.020, 50), (0.010, 0.0005, 50)]),
        base,
    )
    assert [f.split(":")[0] for f in flags] == ["timer_exceeds_wall_clock"] and notes == []
    # 2 ms per call that the timer did not see, 0.1 ms for the baseline: hidden work (a note).
    flags, notes = wall_clock_findings("w", "queued", _side(2.0, [(0.110, 0.0001, 50)] * 3), base)
    assert flags == [] and [n.split(":")[0] for n in notes] == ["untimed_work"]
    # A slow honest candidate, one timed call a round: its two warm-up calls are not hidden work.
    flags, notes = wall_clock_findings("w", "queued", _side(30000.0, [(0.096, 0.030, 1)] * 3), base)
    assert flags == [] and notes == []


def test_a_worker_never_holds_the_engines_events_descriptor():
    """The harness's workers close every descriptor they inherit but their own socket."""
    from core.harness.workers import Worker

    read_fd, write_fd = os.pipe()
    try:
        listed: dict[str, list[int]] = {}

        def report(conn, job):
            channel.send(conn, {"fds": sorted(int(n) for n in os.listdir("/proc/self/fd"))})

        worker = Worker.fork("probe", report, {})
        reply, _ = worker.recv(10)
        listed["fds"] = reply["fds"]
        worker.kill()
    finally:
        os.close(read_fd), os.close(write_fd)
    assert write_fd not in listed["fds"] and read_fd not in listed["fds"]
    assert (
        len([fd for fd in listed["fds"] if fd > 2]) <= 2
    )  # its socket (and the listing's own descriptor)


def test_at_least_half_of_every_hidden_set_is_drawn_at_evaluation_time():
    """The fixed hidden workloads are public (task.yaml); a candidate that memorises them and
    fails elsewhere must meet as many secret, drawn shapes (docs/integrity.md, class 5)."""
    import random

    for task in discover():
        for cpu in (False, True):
            hidden = task.workloads(cpu=cpu).hidden
            if hidden.draw is None:
                continue
            resolved = hidden.resolve(random.Random(5))
            drawn = resolved[len(hidden.fixed) :]
            assert len(drawn) >= len(hidden.fixed) >= 1, (task.id, cpu)
            assert not {w.label for w in drawn} & {w.label for w in hidden.fixed}


def test_the_harness_tensor_work_is_invisible_to_a_mode_and_a_mode_left_pushed_is_proof():
    """guard.trusted turns Python dispatch off (function and dispatch modes); guard.Watch finds
    a mode on the stack, and an inherited C method shadowed on torch.Tensor, but not torch's
    own default-device mode."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from core.harness import guard

    seen: list[str] = []

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append("function")
            return func(*args, **(kwargs or {}))

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append("dispatch")
            return func(*args, **(kwargs or {}))

    watch = guard.Watch(between_calls=guard.INPUTS_REACH)
    t = torch.zeros(4)
    with torch.device("cpu"):  # torch's own mode: not a finding
        assert watch.findings(quick=True) == []
    with Functions(), Dispatch():
        with guard.trusted():
            torch._C.TensorBase.normal_(t)
        assert seen == []
        torch._C.TensorBase.normal_(t)
        assert seen == ["function", "dispatch"]
        assert [f["check"] for f in watch.findings(quick=True)] == [
            "harness_hooked",
            "harness_hooked",
        ]
    original = torch.Tensor.__dict__.get("copy_")
    torch.Tensor.copy_ = lambda self, *a, **k: self  # shadows TensorBase.copy_
    try:
        assert watch.findings(quick=True) == [
            {"check": "torch_patched", "message": "the candidate replaced `torch.Tensor.copy_`"}
        ]
    finally:
        if original is None:
            del torch.Tensor.copy_
        else:
            torch.Tensor.copy_ = original
    assert watch.findings() == []  # each finding once
