"""Batches (core/evaluation/batch.py, core/harness/batch.py): many candidates of one task in one harness
job, sharing the trusted worker, the reference outputs and the warm baseline, each with its own
verdict; profiles (`full`, `train`) recorded in every result; timing that stops on the
median's interval; limits that name themselves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing, build_job
from core.evaluation.profiles import ProfileError, parse_profile, per_regime, regime_of
from core.harness.timing import median_ci, summarize
from core.model.task import Limits
from core.model.workload import Workload
from core.rl.arena import Arena, EvalRequest
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CANDIDATES = FIXTURES / "candidates"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)


@pytest.fixture(scope="module")
def axpy():
    return load_task(FIXTURES / "tasks" / "elementwise" / "axpy")


def test_a_batch_gives_each_candidate_the_verdict_it_gets_alone(
    cpu_evaluator: Evaluator, axpy
) -> None:
    paths = [
        CANDIDATES / "axpy_torch.py",
        CANDIDATES / "axpy_wrong.py",
        CANDIDATES / "axpy_crash.py",
        CANDIDATES / "axpy_torch.py",
    ]
    seen = []
    batch = asyncio.run(
        cpu_evaluator.aevaluate_batch(axpy, paths, seed=11, on_event=seen.append, profile="train")
    )
    alone = [asyncio.run(cpu_evaluator.aevaluate(axpy, p, seed=11, profile="train")) for p in paths]
    assert [(r.status, r.failed_stage) for r in batch] == [
        (r.status, r.failed_stage) for r in alone
    ]
    assert [r.status for r in batch] == ["passed", "failed", "failed", "passed"]
    assert batch[2].failed_stage == "compile" and "SIGSEGV" in batch[2].stage("compile").message
    assert all(r.profile == "train" for r in batch + alone)
    # One harness job: one evaluation_started per candidate, numbered.
    started = [e for e in seen if type(e).__name__ == "EvaluationStarted"]
    assert len(started) == len(paths)
    # The same workloads and seeds for every candidate of the batch.
    assert [w.label for w in batch[0].workloads] == [w.label for w in batch[3].workloads]
    assert [w["label"] for w in batch[0].stage("generalization").workloads] == [
        w["label"] for w in batch[3].stage("generalization").workloads
    ]


def test_arena_batches_a_group_and_keeps_request_order() -> None:
    good = (CANDIDATES / "axpy_torch.py").read_text()
    wrong = (CANDIDATES / "axpy_wrong.py").read_text()

    async def go():
        async with Arena(["cpu"], tasks_dir=FIXTURES / "tasks", timing=FAST) as arena:
            return await arena.aevaluate_many(
                [
                    EvalRequest("elementwise/axpy", good, seed=3, profile="train"),
                    EvalRequest("elementwise/axpy", wrong, seed=3, profile="train"),
                    EvalRequest(
                        "elementwise/axpy", "def nothing(): pass\n", seed=3, profile="train"
                    ),
                ]
            )

    results = asyncio.run(go())
    assert [r.outcome for r in results] == ["correct", "incorrect", "compile_failed"]
    assert [r.result.profile for r in results] == [
        "train"
    ] * 3  # the one that never reached the harness too


def test_train_times_one_workload_per_regime() -> None:
    ws = [
        Workload({"M": 1}, note="qkv decode"),
        Workload({"M": 16}, note="down decode"),
        Workload({"M": 64}, note="x decode"),
        Workload({"M": 4096}, note="gate prefill"),
        Workload({"M": 9}),
    ]
    small = lambda w: w.axes["M"] < 32
    assert [regime_of(w, small) for w in ws] == ["decode", "decode", "decode", "prefill", "decode"]
    assert per_regime(ws, ws[:4], small) == [
        ws[1],
        ws[3],
    ]  # the middle visible decode one, the prefill one
    assert regime_of(Workload({"M": 9}), lambda w: None) == "all"
    with pytest.raises(ProfileError, match="full, train"):
        parse_profile("fast")


def test_profiles_set_limits_and_timing_in_the_job(axpy, tmp_path: Path) -> None:
    from core.devices.device import probe

    info = probe("cpu")
    full = build_job(
        axpy, CANDIDATES / "axpy_torch.py", info, "cpu", 1, tmp_path, Limits(), profile="full"
    )
    train = build_job(
        axpy, CANDIDATES / "axpy_torch.py", info, "cpu", 1, tmp_path, Limits(), profile="train"
    )
    assert (full["profile"], train["profile"]) == ("full", "train")
    assert (
        full["limits"]["compile_s"] == 180 and train["limits"]["compile_s"] == 60
    )  # the task's 300 s, capped per profile
    assert train["timing"]["alternations"] < full["timing"]["alternations"]
    assert train["timing"]["round_factor"] == 10 and train["timing"]["ci_target"] == 0.01
    # Hidden correctness is never skipped in train.
    assert train["stages"]["generalization"] == [] or len(train["stages"]["generalization"]) == len(
        full["stages"]["generalization"]
    )


def test_median_interval_from_order_statistics() -> None:
    xs = [float(x) for x in range(1, 101)]
    low, high = median_ci(xs)
    assert (low, high) == (40.0, 61.0)  # ranks 40 and 61 of 100: the binomial 95% interval
    s = summarize([100.0] * 50 + [101.0] * 50)
    assert (
        s["ci_low_us"] == 100.0
        and s["ci_high_us"] == 101.0
        and s["ci_rel"] == pytest.approx(0.5 / 100.5)
    )


def test_a_hang_ends_at_the_limit_it_names(cpu_evaluator: Evaluator, axpy) -> None:
    result = cpu_evaluator.evaluate(
        axpy,
        CANDIDATES / "axpy_hang.py",
        limits=Limits(compile_s=2, correctness_s=30, performance_s=30),
        profile="train",
    )
    stage = result.stage("compile")
    assert (result.failed_stage, stage.status) == ("compile", "timeout")
    assert "compile stage's limit of 2 s (profile train)" in stage.message


SABOTEUR = '''"""Tries to reach its neighbours in a batch: overwrites every other candidate file it can find
under the batch's folder, and plants a candidate where the next one might be put."""
import os
import pathlib

import torch

here = pathlib.Path(__file__).resolve()
batch_dir = here.parents[2]
for path in batch_dir.rglob("*.py"):
    if path != here:
        try:
            path.write_text("def run(*a):\\n    raise RuntimeError('sabotaged by a neighbour')\\n")
        except OSError:
            pass
for k in range(8):
    (batch_dir / f"member-{k}" / "candidate").mkdir(parents=True, exist_ok=True)
    (batch_dir / f"member-{k}" / "candidate" / "candidate.py").write_text("def run(*a):\\n    raise RuntimeError('planted')\\n")


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * 2 + b
'''


def test_a_cheat_in_a_batch_cannot_touch_its_neighbours(
    cpu_evaluator: Evaluator, axpy, tmp_path: Path
) -> None:
    saboteur = tmp_path / "saboteur" / "candidate.py"
    saboteur.parent.mkdir()
    saboteur.write_text(SABOTEUR)
    kill = Path(__file__).resolve().parent / "cheats" / "kill_harness.py"
    good = CANDIDATES / "axpy_torch.py"
    results = asyncio.run(
        cpu_evaluator.aevaluate_batch(
            axpy, [good, saboteur, good, kill, good], seed=5, profile="train"
        )
    )
    assert [r.status for r in results] == ["passed", "passed", "passed", "failed", "passed"], [
        (r.status, r.failed_stage) for r in results
    ]
    assert (
        results[3].stage("compile").status == "crashed"
    )  # it killed the zygote: its own fault, a fresh zygote for the next


def test_a_run_evaluates_one_tasks_candidates_as_a_batch_on_one_seed(tmp_path: Path) -> None:
    from core.orchestration.runfile import RunSpec
    from core.orchestration.runs import execute
    from core.store.db import Store

    spec = RunSpec(
        name="batch",
        tasks=("elementwise/axpy",),
        candidates=(
            str(CANDIDATES / "axpy_torch.py"),
            str(CANDIDATES / "axpy_wrong.py"),
            "starter",
        ),
        devices=("cpu",),
        cpu_slots=1,
        tasks_dir=str(FIXTURES / "tasks"),
        profile="train",
    )
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(spec.name, spec.to_json())
        outcome = asyncio.run(execute(store, run_id, spec))
        jobs = store.jobs(run_id)
        results = {r.job_id: r for r in store.results(run_id)}
    assert not outcome.failed_jobs and len(results) == 3
    assert len({j.seed for j in jobs}) == 1, "one batch, one secret seed"
    hidden = [
        [w["label"] for w in results[j.id].to_result().stage("generalization").workloads]
        for j in jobs
    ]
    assert hidden[0] == hidden[2] and hidden[0], "every candidate saw the same hidden draws"
    assert [results[j.id].status for j in jobs] == ["passed", "failed", "passed"]
    assert {results[j.id].to_result().profile for j in jobs} == {"train"}


def test_a_batch_member_is_judged_on_its_own_pooled_evidence(cpu_evaluator: Evaluator) -> None:
    # The sampling check pools evidence over a candidate's checked calls (docs/integrity.md,
    # class 4) in the trusted worker the batch shares: the biased sampler's excess argmax hits
    # must neither fail the honest sampler after it nor be diluted by it.
    from core.tasks.discovery import find_task

    task = find_task("sampling/top_k_top_p_sampling")
    cheat = FIXTURES.parent / "cheats" / "sampling_argmax_fallback.py"
    cheat_first, honest = asyncio.run(
        cpu_evaluator.aevaluate_batch(
            task, [cheat, task.file("baseline.py")], seed=5, performance=False
        )
    )
    assert cheat_first.status == "failed" and "pooled" in (
        cheat_first.stage(cheat_first.failed_stage).message or ""
    )
    assert honest.status == "passed", [s.message for s in honest.stages]
