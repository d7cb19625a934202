"""Correctness runs through shared memory (core/harness/shared_check.py, issues 20 and 23): the
trusted worker draws each run's inputs into a region the candidate's worker maps and judges the
outputs the candidate's worker writes into its slots; no seed and no output byte passes through
the candidate's socket. The verdicts are the old path's (`timing.shared_io: false`)."""

from __future__ import annotations

import os

import pytest
import torch
from torch.overrides import TorchFunctionMode

from core.evaluation.evaluator import Evaluator, Timing
from core.harness import inputs, shared_check, workers
from core.tasks.spec import load_task
from tests.cheats.catalogue import TASKS, by_name, outcome_problems
from tests.task_variants import variant_dir

FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=8)
OLD = Timing(**{**FAST.__dict__, "shared_io": False})
CPU = torch.device("cpu")

CANDIDATES = {
    "right": "def run(x, b):\n    return 2 * x + b\n",
    "wrong": "def run(x, b):\n    return 2 * x + b + 1e-2\n",
    # Right on the first call, off by a little on every later one: the same inputs twice
    # give two answers.
    "nondeterministic": (
        "calls = [0]\n"
        "def run(x, b):\n"
        "    calls[0] += 1\n"
        "    return 2 * x + b + (0 if calls[0] < 3 else 1e-3 * (calls[0] % 2))\n"
    ),
}


@pytest.fixture(scope="module")
def task():
    return load_task(TASKS["axpy"])


def _verdict(result) -> tuple:
    correctness = next(s for s in result.stages if s.name == "correctness")
    first = (correctness.message or "").split(":")[0]
    return result.status, correctness.status, first


def test_verdicts_are_the_old_paths_and_the_old_path_says_so(task, tmp_path):
    results = {}
    for timing in (FAST, OLD):
        with Evaluator("cpu", timing=timing) as evaluator:
            for name, source in CANDIDATES.items():
                path = tmp_path / f"{name}.py"
                path.write_text(source)
                results[name, timing.shared_io] = evaluator.evaluate(task, path)
    for name in CANDIDATES:
        new, old = results[name, True], results[name, False]
        assert _verdict(new) == _verdict(old), (name, new.stages, old.stages)
    assert results["right", True].status == "passed"
    assert results["wrong", True].status == "failed"
    nondeterministic = next(
        s for s in results["nondeterministic", True].stages if s.name == "correctness"
    )
    assert "not deterministic" in (nondeterministic.message or ""), nondeterministic
    # Only the old path's result says its inputs were drawn in the candidate's process.
    said = results["right", False].stage("correctness").note or ""
    assert shared_check.OLD_PATH_NOTE in said and "timing.shared_io is off" in said, said
    assert results["right", True].stage("correctness").note is None
    assert results["right", True].review_notes == []  # how the harness ran is no review note


def test_a_candidate_hunting_for_the_runs_seed_finds_none(task):
    """`check_seed_hunt` returns wrong outputs once it finds a correctness run's seed in its
    process: it passes when the trusted worker draws the inputs, and fails on the old path."""
    cheat = by_name("check_seed_hunt")
    with Evaluator("cpu", timing=FAST) as evaluator:
        result = evaluator.evaluate(task, cheat.path)
    assert outcome_problems(cheat.expect, cheat.notes, result) == [], result
    with Evaluator("cpu", timing=OLD) as evaluator:
        old = evaluator.evaluate(task, cheat.path)
    assert old.status == "failed" and _verdict(old)[1] == "failed", old.stages


def test_inputs_that_cannot_be_shared_keep_the_old_path_and_the_result_says_why(tmp_path):
    path = tmp_path / "right.py"
    path.write_text("def run(x, b):\n    return (2 * x + b).contiguous()\n")
    with Evaluator("cpu", timing=FAST) as evaluator:
        result = evaluator.evaluate(load_task(variant_dir("axpy_strided_inputs")), path)
    assert result.status == "passed", result.stages
    said = result.stage("correctness").note or ""
    assert shared_check.OLD_PATH_NOTE in said and "not a plain contiguous tensor" in said, said


SPECS = [
    {"name": "x", "dtype": "float32", "shape": ["N"]},
    {"name": "b", "dtype": "float32", "shape": ["N"], "init": {"dist": "uniform"}},
]
OUTS = [{"name": "y", "dtype": "float32", "shape": ["N"]}]
WORKLOAD = {"axes": {"N": 256}, "shapes": {"x": [256], "b": [256], "y": [256]}}


def _custom_inputs(axes, gen):
    """A task's inputs.py that calls Tensor methods: in the candidate's process (the old path)
    a patched method sees each call."""
    x = torch.empty(axes["N"]).normal_(generator=gen)
    b = torch.empty(axes["N"]).uniform_(generator=gen)
    return [x, b]


class _Record(TorchFunctionMode):
    def __init__(self, seen: list[str]):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def test_hooks_in_the_candidates_process_see_no_input_drawn(monkeypatch):
    """A TorchFunctionMode left pushed and a patched `torch.Tensor.normal_` record what runs
    in the candidate's process: on the old path the task's inputs.py draws there (the patch
    sees it); through shared memory nothing but the candidate's own call runs there."""
    patched: list[str] = []
    original = torch.Tensor.normal_

    def spy(self, *args, **kwargs):
        patched.append("normal_")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "normal_", spy)
    trusted_side = shared_check.CheckRegions(CPU)
    args = inputs.correctness_inputs(SPECS, WORKLOAD, 7, CPU, _custom_inputs)
    patched.clear()  # that draw was the trusted worker's (here the same process)
    header, fds = trusted_side.write("w:1", "", args, 2, OUTS, WORKLOAD["shapes"])
    side = shared_check.CandidateRegion()
    side.attach(header["region"], fds, CPU)
    seen: list[str] = []
    with _Record(seen):
        reply = side.run(
            lambda x, b: torch.add(2 * x, b),
            {"layout": header["layout"], "workload": WORKLOAD},
            SPECS,
            OUTS,
            CPU,
        )
    assert reply == {"ok": True}
    assert patched == [] and seen == ["mul", "add"] * 2, (patched, seen)
    got = trusted_side.snapshot("w:1")
    assert len(got) == 2  # two copies of the same inputs, two outputs
    for y in got:
        torch.testing.assert_close(y, 2 * args[0] + args[1])
    with _Record(seen):  # the old path draws in this process, where the patch sees it
        workers.run_for_check(
            lambda x, b: 2 * x + b, SPECS, OUTS, WORKLOAD, 7, 1, CPU, _custom_inputs
        )
    assert patched == ["normal_"]
    trusted_side.close()


def test_a_worker_that_writes_no_outputs_leaves_poison():
    trusted_side = shared_check.CheckRegions(CPU)
    args = inputs.correctness_inputs(SPECS, WORKLOAD, 3, CPU, None)
    header, fds = trusted_side.write("w:2", "", args, 1, OUTS, WORKLOAD["shapes"])
    for fd in fds:
        os.close(fd)
    (y,) = trusted_side.snapshot("w:2")
    assert torch.isnan(y).all()
    # The region is reused while big enough: the next run's header describes no new one.
    again, fds = trusted_side.write("w:2", "", args, 1, OUTS, WORKLOAD["shapes"])
    assert "region" not in again and fds == []
    trusted_side.close()


def test_every_stage_ends_with_its_regions_unmapped_then_freed(tmp_path):
    """A mapped region pins its memory in the trusted worker (CUDA IPC), so a worker kept for
    its timing, or a batch's later candidates, would run the device out of it: after a stage's
    last run each candidate worker unmaps its region, and only then does the trusted worker
    free it."""
    import json
    import subprocess
    import sys
    import textwrap

    from tests.conftest import FIXTURES, ROOT

    candidate = tmp_path / "solution.py"
    candidate.write_text(CANDIDATES["right"])
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from core.devices.device import probe
        from core.evaluation.evaluator import build_job
        from core.harness import worker_process
        from core.harness.runner import run_job
        from core.tasks.spec import load_task

        sent = []
        send = worker_process.Worker.send
        def record(self, header, payload=None):
            sent.append([self.name, header.get("op")])
            return send(self, header, payload)
        worker_process.Worker.send = record
        task = load_task({str(FIXTURES / "tasks" / "elementwise" / "axpy")!r})
        job = build_job(task, Path({str(candidate)!r}), probe("cpu"), "cpu", 5, {str(tmp_path / "w")!r})
        events = []
        run_job(job, events.append)
        print(json.dumps([sent, [e.get("status") for e in events if e.get("type") == "stage_finished"]]))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    sent, stages = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stages[:3] == ["passed", "passed", "passed"]
    ops = [op for _, op in sent]
    detaches = [i for i, op in enumerate(ops) if op == "detach"]
    assert detaches, ops
    for i in detaches:
        later = ops[i + 1 :]
        # the trusted worker frees the region next, before the next stage stages a run
        assert "release" in later, ops
        assert "stage" not in later or later.index("release") < later.index("stage"), ops
        # and no run of the finished stage is still to come on that worker
        assert ops[:i].count("run_shared") > 0
    # correctness and generalization each end so, and nothing is left mapped for the timing
    last_run = max(i for i, op in enumerate(ops) if op == "run_shared")
    assert any(i > last_run for i in detaches)
    assert len(detaches) >= 2
