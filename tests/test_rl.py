"""The reward API (core/rl/arena.py) on the CPU device: one evaluation from source text, a batch spread
over every device through the scheduler, infrastructure faults as "retry" (reward None),
policy mistakes as compile failures, and the public view that never names a hidden workload."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from core.devices.device import DeviceError
from core.evaluation.executors import LocalExecutor
from core.evaluation.job import Timing
from core.model.result import STAGES, Result, StageResult, WorkloadFigures
from core.rl.arena import Arena, EvalRequest, evaluate, evaluate_many, public_result
from core.tasks.discovery import find_task
from core.tasks.fields import UnknownTaskError
from tests.candidates import AXPY, WRONG

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
FAST = Timing(alternations=1, budget_ms=20.0, min_calls=1, max_calls=5)
HIDDEN_FIXED = "N=33,D=100"  # the fixture's fixed hidden workload


def test_evaluate_one_source_text() -> None:
    rr = evaluate(
        "elementwise/axpy", AXPY, device="cpu", seed=5, tasks_dir=FIXTURE_TASKS, timing=FAST
    )
    assert rr.outcome == "correct" and rr.reward is not None and 0 < rr.reward <= 1 and not rr.retry
    assert rr.stages == {
        "compile": "passed",
        "correctness": "passed",
        "generalization": "passed",
        "performance": "passed",
    }
    assert rr.speedup > 0 and rr.sol_fraction is None  # the CPU device has no speed of light
    assert rr.integrity_flags == [] and isinstance(rr.review_notes, list)
    full, public = json.dumps(rr.to_json(public=False)), json.dumps(rr.to_json())
    assert HIDDEN_FIXED in full, "the trainer's full result names the hidden workloads"
    assert HIDDEN_FIXED not in public and "hidden#1" in public
    assert rr.to_json()["result"]["speedup"] == rr.speedup  # the numbers are not touched


@pytest.fixture(scope="module")
def loop():
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture(scope="module")
def arena(loop):
    a = Arena(["cpu"], tasks_dir=FIXTURE_TASKS, timing=FAST)
    yield a
    loop.run(a.aclose())


def test_policy_mistakes_are_compile_failures(loop, arena: Arena) -> None:
    no_run = loop.run(arena.aevaluate("elementwise/axpy", "import torch\nx = 1\n"))
    assert no_run.outcome == "compile_failed" and no_run.reward == -0.5
    assert (
        "defines no `run`" in no_run.result.stage("compile").message
        and "/tmp/" not in no_run.result.stage("compile").message
    )
    nul = loop.run(arena.aevaluate("elementwise/axpy", "def run(x, b):\n    return x\x00\n"))
    assert nul.outcome == "compile_failed" and nul.reward == -0.5
    for nothing in ("", "# I would fuse the loads\n"):  # no code at all: the lowest honest rung
        empty = loop.run(arena.aevaluate("elementwise/axpy", nothing))
        assert empty.outcome == "no_code" and empty.reward == -0.75 < no_run.reward
        assert empty.result.status == "failed" and empty.result.profile == "full"


def test_visible_only_leaves_hidden_workloads_out_of_the_job(loop, arena: Arena) -> None:
    rr = loop.run(arena.aevaluate("elementwise/axpy", AXPY, seed=3, visible_only=True))
    assert rr.outcome == "correct" and rr.visible_only
    assert rr.stages["generalization"] == "skipped"
    assert HIDDEN_FIXED not in json.dumps(
        rr.to_json(public=False)
    )  # not even in the trainer's copy
    assert all(not w.hidden for w in rr.result.workloads)
    wrong = loop.run(arena.aevaluate("elementwise/axpy", WRONG, visible_only=True, reward="fast_p"))
    assert wrong.outcome == "incorrect" and wrong.reward == 0.0 and wrong.reward_name == "fast_p"


def test_bad_requests_name_the_field(loop, arena: Arena) -> None:
    with pytest.raises(TypeError, match="source: give the candidate's Python source as a string"):
        EvalRequest("elementwise/axpy", b"def run(): pass")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="request field `code` is unknown"):
        EvalRequest.coerce({"task_id": "elementwise/axpy", "code": AXPY})
    with pytest.raises(ValueError, match="seed: give a non-negative integer"):
        EvalRequest("elementwise/axpy", AXPY, seed=-1)
    with pytest.raises(ValueError, match=r"source: .* bytes, more than"):
        EvalRequest("elementwise/axpy", "#" * (2 << 20))
    with pytest.raises(UnknownTaskError, match="unknown task `elementwise/axpi`"):
        loop.run(arena.aevaluate("elementwise/axpi", AXPY))
    with pytest.raises(DeviceError, match="not one of this arena's devices"):
        loop.run(arena.aevaluate("elementwise/axpy", AXPY, device="cuda:0"))
    with pytest.raises(DeviceError, match="pass an executor_factory that reaches it"):
        Arena(["box1/cuda:0"])
    with pytest.raises(DeviceError, match="unknown device"):
        Arena(["gpu0"])


class _Renamed:
    """The local CPU's harness under another device id: a stand-in for `box1/cpu`, so the
    batch test covers the scheduler's spread over a remote-style id without SSH."""

    def __init__(self, device_id: str, folder: Path):
        self.inner = LocalExecutor("cpu", folder)
        self.device_id = device_id
        self.info = dataclasses.replace(self.inner.info, id=device_id)

    def torch_device(self) -> str:
        return self.inner.torch_device()

    async def run(self, *args):
        return await self.inner.run(*args)

    def close(self) -> None:
        self.inner.close()


def test_evaluate_many_spreads_over_every_device_in_order() -> None:
    made: list[str] = []

    def factory(device_id: str, folder: Path):
        made.append(device_id)
        return _Renamed(device_id, folder)

    batch = [
        ("elementwise/axpy", AXPY),
        {"task_id": "elementwise/axpy", "source": WRONG},
        EvalRequest("elementwise/axpy", "x = ("),
    ]
    batch += [EvalRequest("elementwise/axpy", AXPY, seed=9, device="box1/cpu")]
    results = evaluate_many(
        batch,
        devices=["cpu", "box1/cpu"],
        tasks_dir=FIXTURE_TASKS,
        executor_factory=factory,
        cpu_slots=1,
        timing=FAST,
    )
    assert [r.outcome for r in results] == ["correct", "incorrect", "compile_failed", "correct"]
    assert [r.reward for r in results][1:3] == [-0.25, -0.5]
    assert sorted(made) == ["box1/cpu", "cpu"], "both devices' slots took jobs"
    assert results[3].result.device["id"] == "box1/cpu"


def test_infrastructure_faults_mean_retry_not_a_score() -> None:
    attempts: list[str] = []

    def broken(device_id: str, folder: Path):
        attempts.append(device_id)
        raise RuntimeError("host unreachable")

    [rr] = evaluate_many(
        [("elementwise/axpy", AXPY)],
        devices=["cpu"],
        tasks_dir=FIXTURE_TASKS,
        executor_factory=broken,
    )
    assert rr.reward is None and rr.retry and rr.outcome == "infrastructure_error"
    assert "host unreachable" in rr.result.stage("compile").message
    assert len(attempts) == 3  # the first try and the scheduler's two retries


def test_public_result_scrubs_hidden_names_from_free_text() -> None:
    task = find_task("elementwise/axpy", FIXTURE_TASKS)
    gen = StageResult(
        "generalization",
        "failed",
        message=f"1 of 2 workload(s) wrong; first: {HIDDEN_FIXED}: shape (33, 100) wrong",
        workloads=[
            {
                "label": HIDDEN_FIXED,
                "axes": {"N": 33, "D": 100},
                "passed": False,
                "message": "bad",
                "worst": {"index": [1, 2]},
            },
            {
                "label": "N=7,D=100",
                "axes": {"N": 7, "D": 100},
                "passed": True,
                "message": None,
                "worst": None,
            },
        ],
    )
    stages = [
        StageResult("compile", "passed"),
        StageResult("correctness", "passed"),
        gen,
        StageResult("performance"),
    ]
    assert [s.name for s in stages] == list(STAGES)
    timed = WorkloadFigures(
        HIDDEN_FIXED,
        {"N": 33, "D": 100},
        True,
        "wall",
        {"median_us": 5.0},
        {"median_us": 5.0},
        1.0,
        None,
        None,
    )
    result = Result(
        "elementwise/axpy",
        "0" * 64,
        {"id": "cpu"},
        "cpu",
        "failed",
        "generalization",
        stages,
        [timed],
        0.0,
        None,
        None,
        20.0,
        integrity_flags=[],
        review_notes=[f"untimed_work: {HIDDEN_FIXED}: slow; tensor [33, 100]"],
    )
    text = json.dumps(public_result(result, task))
    assert HIDDEN_FIXED not in text and "N=7,D=100" not in text and "33, 100" not in text
    data = public_result(result, task)
    assert data["stages"][2]["workloads"] == [
        {"label": "hidden#1", "passed": False},
        {"label": "hidden#2", "passed": True},
    ]
    assert data["workloads"][0]["axes"] == {} and data["workloads"][0]["speedup"] == 1.0
