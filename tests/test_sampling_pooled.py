"""A stochastic output is judged on evidence pooled over checked calls (docs/integrity.md,
class 4): the sampling task's check returns each call's evidence, `check_pooled` tests the sum
(the argmax hit count against its honest expectation, one-sided Bernstein, and the per-call
location and spread sums), and a workload with few rows runs more seeds. Honest samplers are
never failed; a sampler biased too little for one call, and greedy decoding at B = 1 and 3,
are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from core.harness.checking import Pool
from core.tasks.spec import load_task
from tests.task_files import load_module

ROOT = Path(__file__).resolve().parents[1]
SAMPLING = ROOT / "tasks" / "sampling" / "top_k_top_p_sampling"
CHEATS = ROOT / "tests" / "cheats"


_load = load_module


@pytest.fixture(scope="module")
def task_files():
    torch.set_num_threads(1)  # tiny tensors: more threads only contend on a shared CI machine
    names = ("inputs", "reference", "check", "baseline")
    return {n: _load(SAMPLING / f"{n}.py") for n in names}


def _calls(files, sampler, B: int, V: int, n: int, seed: int = 0):
    """Run `sampler` on n fresh calls; yield each call's verdict alone and as the harness's
    Pool turns it (failed once the pooled evidence fails), as the trusted worker does."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    pool = Pool(files["check"].check_pooled)
    for _ in range(n):
        args = files["inputs"].make_inputs({"B": B, "V": V}, gen)
        expected = list(files["reference"].run(*args))
        single = files["check"].check([sampler(*args)], expected, args)
        yield single["token_ids"], pool.add(f"B={B},V={V}", single)["token_ids"]
    _calls.last_pool = pool  # type: ignore[attr-defined]


def test_honest_samplers_raise_no_false_alarm_over_a_thousand_calls(task_files):
    """The bundled baseline (torch's sort + multinomial path on the CPU) and a draw straight
    from the reference's q: 500 calls each, every single-call and pooled verdict passes."""
    baseline = task_files["baseline"].run
    from_q = lambda l, k, p: torch.multinomial(task_files["reference"].run(l, k, p)[1], 1).squeeze(
        1
    )
    for sampler, seed in ((baseline, 1), (from_q, 2)):
        for single, pooled in _calls(task_files, sampler, B=16, V=128, n=500, seed=seed):
            assert single["passed"] and pooled["passed"], (single, pooled)
        stats = task_files["check"].check_pooled(_calls.last_pool.evidence["*"])["token_ids"]  # type: ignore[attr-defined]
        assert stats["pooled_calls"] == 500 and stats["argmax_hits"] < stats["argmax_threshold"]


@pytest.mark.slow
def test_the_starter_raises_no_false_alarm_over_many_calls(task_files):
    """The bundled starter, in Triton's interpreter (half a second a call here: 40 calls)."""
    from core.harness.triton_cpu import enable_interpreter

    enable_interpreter()
    starter = _load(SAMPLING / "starter.py")
    for single, pooled in _calls(task_files, starter.run, B=64, V=300, n=40, seed=3):
        assert single["passed"] and pooled["passed"], (single, pooled)


@pytest.mark.parametrize("B,V", [(128, 512), (96, 1000), (100, 777), (80, 300)])
def test_an_argmax_fallback_passes_every_call_alone_and_fails_pooled(task_files, B, V):
    fallback = _load(CHEATS / "sampling_argmax_fallback.py").run
    verdicts = list(_calls(task_files, fallback, B, V, n=20))
    assert all(single["passed"] for single, _ in verdicts), (
        "the cheat is meant to pass one call's test"
    )
    failed = [i for i, (_, pooled) in enumerate(verdicts) if not pooled["passed"]]
    assert failed and failed[0] < 12, "pooled over a few calls, the excess argmax hits show"
    assert "most probable token too often" in verdicts[failed[0]][1]["message"]


@pytest.mark.parametrize("B,V", [(1, 16384), (3, 16384)])
def test_greedy_at_one_and_three_rows_fails_within_the_seeds_its_workload_runs(task_files, B, V):
    """GPU workloads of the task (B = 1 and 3): each call alone carries too little evidence;
    the seeds `correctness.samples` gives the workload (64 rows' worth) are enough."""
    seeds = load_task(SAMPLING).correctness.seeds_for({"B": B, "V": V})
    assert seeds == -(-64 // B)
    greedy = _load(CHEATS / "sampling_greedy.py").run
    verdicts = list(_calls(task_files, greedy, B, V, n=seeds))
    assert verdicts[0][0]["passed"], "one call alone passes"
    assert (
        not verdicts[-1][1]["passed"]
        and "pooled over the workload's checked calls" in verdicts[-1][1]["message"]
    )


def test_a_sampling_task_with_one_and_three_rows_catches_greedy_end_to_end(cpu_evaluator, tmp_path):
    """The harness itself: a copy of the task whose CPU workloads have B = 1 and 3 runs 64 and
    22 seeds, the trusted worker pools them, greedy fails correctness and the baseline passes."""
    task_dir = tmp_path / "sampling" / "small_b"
    shutil.copytree(SAMPLING, task_dir)
    spec = task_dir / "task.yaml"
    text = spec.read_text()
    start, end = text.index("  cpu:\n"), text.index("model_workloads:")
    spec.write_text(
        text[:start] + "  cpu:\n    visible:\n      - {B: 1, V: 300}\n      - {B: 3, V: 300}\n"
        "    hidden:\n      fixed:\n        - {B: 2, V: 200}\n\n" + text[end:]
    )
    task = load_task(task_dir)
    greedy = cpu_evaluator.evaluate(task, CHEATS / "sampling_greedy.py", performance=False)
    assert greedy.failed_stage == "correctness" and "pooled" in greedy.stage("correctness").message
    honest = cpu_evaluator.evaluate(task, SAMPLING / "baseline.py", performance=False)
    assert honest.status == "passed" and not honest.integrity_flags, [
        s.message for s in honest.stages
    ]
