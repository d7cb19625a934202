"""`arena compare RUN_A RUN_B`: two runs paired task by task (A/B: with and without a
cheatsheet, one model against another), with a bootstrap interval on the geometric-mean
speedup ratio. A failed attempt counts as speedup 1.0: the user keeps the baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.store.compare import Outcome, arm, compare
from core.store.db import Store
from tests.test_store import make_result


def outcome(task: str, speedup: float, passed: bool = True) -> Outcome:
    return Outcome(
        task, "NVIDIA H200", passed, speedup if passed else 0.0, 0.4 if passed else None, "measured"
    )


def test_a_failed_attempt_counts_as_keeping_the_baseline():
    pooled = arm([outcome("t", 4.0), outcome("t", 0.0, passed=False)])
    assert pooled.correct == 0.5
    assert pooled.speedup == pytest.approx(2.0)  # sqrt(4 * 1)
    assert pooled.sol_fraction == 0.4


def test_uniformly_faster_arm_gets_an_interval_above_one():
    tasks = [f"gemm/t{i}" for i in range(8)]
    a = [outcome(t, 1.0 + 0.1 * i) for i, t in enumerate(tasks)]
    b = [outcome(t, 1.5 * (1.0 + 0.1 * i) * (1.1 if i % 2 else 0.95)) for i, t in enumerate(tasks)]
    c = compare("A", a, "B", b)
    assert len(c.tasks) == 8
    assert 1.3 < c.geomean_ratio < 1.7
    low, high = c.interval
    assert 1.0 < low <= c.geomean_ratio <= high
    assert (
        compare("A", a, "B", b).interval == c.interval
    )  # a fixed seed: the same runs print the same interval


def test_mixed_results_give_an_interval_that_straddles_one():
    tasks = [f"t{i}" for i in range(10)]
    a = [outcome(t, 1.0) for t in tasks]
    b = [outcome(t, 2.0 if i % 2 else 0.5) for i, t in enumerate(tasks)]
    low, high = compare("A", a, "B", b).interval
    assert low < 1.0 < high


def test_tasks_missing_from_one_run_are_listed_not_paired():
    c = compare(
        "A", [outcome("x", 1.0), outcome("y", 1.0)], "B", [outcome("y", 2.0), outcome("z", 1.0)]
    )
    assert [t.task_id for t in c.tasks] == ["y"]
    assert c.only_a == [("x", "NVIDIA H200")] and c.only_b == [("z", "NVIDIA H200")]


def _run(store: Store, name: str, speedups: dict[str, float]) -> str:
    run_id = store.create_run(name)
    for task, s in speedups.items():
        job = store.add_job(run_id, task_id=task, device_id="cuda:0", agent=name)
        store.record_result(job, make_result(task, "passed" if s > 0 else "failed", speedup=s))
    store.finish_run(run_id)
    return run_id


def test_fewer_than_five_paired_tasks_are_not_enough_evidence_and_get_no_interval():
    c = compare(
        "A", [outcome("x", 1.0), outcome("y", 1.0)], "B", [outcome("x", 3.0), outcome("y", 3.1)]
    )
    assert (
        c.verdict == "not enough evidence" and "2 paired tasks" in c.why and "at least 5" in c.why
    )
    assert c.interval is None, "a bootstrap over two values is no interval"


def test_identical_ratios_never_give_a_zero_width_interval():
    tasks = [f"t{i}" for i in range(6)]
    c = compare(
        "A",
        [outcome(t, 0.0, passed=False) for t in tasks],
        "B",
        [outcome(t, 0.0, passed=False) for t in tasks],
    )
    assert c.geomean_ratio == 1.0 and c.interval is None
    assert c.verdict == "not enough evidence" and "no spread" in c.why


def predicted(task: str, speedup: float, band: float = 0.3) -> Outcome:
    return Outcome(task, "NVIDIA H200 (simulated)", True, speedup, None, "predicted", band)


def test_a_difference_inside_the_simulators_band_is_not_enough_evidence():
    tasks = [f"t{i}" for i in range(8)]
    a = [predicted(t, 1.0) for t in tasks]
    b = [
        predicted(t, 1.15 + 0.01 * i) for i, t in enumerate(tasks)
    ]  # clearly above 1, but inside ±30%
    c = compare("A", a, "B", b)
    assert c.interval[0] > 1.0, "measured, this would be a win"
    assert c.verdict == "not enough evidence" and "±30% band" in c.why
    far = compare("A", a, "B", [predicted(t, 2.0 + 0.05 * i) for i, t in enumerate(tasks)])
    assert far.verdict == "B faster"


def test_cpu_runs_get_no_verdict_their_times_are_interpreted():
    tasks = [f"norm/t{i}" for i in range(8)]
    cpu = lambda o: Outcome(o.task_id, "x86_64", o.passed, o.speedup, None, "cpu")
    c = compare(
        "A",
        [cpu(outcome(t, 1.0)) for t in tasks],
        "B",
        [cpu(outcome(t, 3.0 + 0.1 * i)) for i, t in enumerate(tasks)],
    )
    assert c.geomean_ratio > 3, "the numbers are kept (--json)"
    assert (c.verdict, c.interval) == ("not enough evidence", None) and "interpreted" in c.why


def test_the_command_prints_the_paired_table_and_the_interval(tmp_path: Path, capsys):
    db = tmp_path / "arena.db"
    with Store.open(db) as store:
        a = _run(
            store,
            "no-cheatsheet",
            {
                "gemm/a": 1.0,
                "norm/b": 1.2,
                "moe/c": 0.0,
                "norm/d": 1.0,
                "norm/e": 1.1,
                "gemm/f": 0.9,
            },
        )
        b = _run(
            store,
            "cheatsheet",
            {
                "gemm/a": 1.5,
                "norm/b": 1.3,
                "moe/c": 2.0,
                "norm/d": 1.6,
                "norm/e": 1.8,
                "gemm/f": 1.4,
            },
        )
        few_a = _run(store, "few-a", {"gemm/a": 1.0})
        few_b = _run(store, "few-b", {"gemm/a": 2.0})
    assert main(["--db", str(db), "compare", a, b]) == 0
    text = capsys.readouterr().out
    assert (
        "gemm/a" in text and "moe/c" in text and "bootstrap interval" in text and "B faster" in text
    )
    assert main(["--db", str(db), "compare", few_a, few_b]) == 0
    text = capsys.readouterr().out
    assert "not enough evidence" in text and "1 paired task;" in text and "interval" not in text
    assert main(["--db", str(db), "compare", a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "B faster" and data["interval"][0] > 1
    assert {t["task"] for t in data["tasks"]} == {
        "gemm/a",
        "norm/b",
        "moe/c",
        "norm/d",
        "norm/e",
        "gemm/f",
    }
    moe = next(t for t in data["tasks"] if t["task"] == "moe/c")
    assert moe["correct_diff"] == 1.0 and moe["ratio"] == pytest.approx(2.0)


def test_an_unknown_run_is_one_line_and_exit_2(tmp_path: Path, capsys):
    assert main(["--db", str(tmp_path / "arena.db"), "compare", "r-nope", "r-nada"]) == 2
    err = capsys.readouterr().err
    assert "unknown run" in err and "Traceback" not in err


# -- two candidate files of one task: `arena compare A.py B.py --task ID` ----------------------


def timed(speedups: tuple[float, ...], spread: float = 0.01, passed: bool = True):
    """A measured result with these per-workload speedups over a 100 µs baseline."""
    from dataclasses import replace

    from core.model.result import WorkloadFigures

    r = make_result("gemm/a", "passed" if passed else "failed", speedup=1.0)
    work = [
        WorkloadFigures(
            f"M={m}",
            {"M": m},
            False,
            "event",
            {"median_us": 100.0 / s, "spread": spread},
            {"median_us": 100.0, "spread": spread},
            s,
            None,
            None,
        )
        for m, s in zip((16, 4096, 77), speedups)
    ]
    return replace(r, workloads=work if passed else [], device={"id": "cuda:0", "model": "H200"})


def test_two_files_are_paired_per_workload_with_an_interval_and_a_verdict():
    from core.evaluation.paired import FASTER_A, FASTER_B, SAME, compare_results

    c = compare_results(timed((1.0, 1.0, 1.0)), timed((1.5, 1.6, 1.4)), seed=7)
    assert c.verdict == FASTER_B and [round(w.ratio, 2) for w in c.workloads] == [1.5, 1.6, 1.4]
    low, high = c.workloads[0].interval
    assert low < 1.5 < high and low > 1.0  # two 1% spreads: a narrow interval
    assert c.interval[0] > 1.0 and c.seed == 7
    assert compare_results(timed((1.5, 1.6, 1.4)), timed((1.0, 1.0, 1.0)), 7).verdict == FASTER_A
    noisy = compare_results(timed((1.0, 1.0, 1.0), 0.3), timed((1.1, 1.1, 1.1), 0.3), 7)
    assert noisy.verdict == SAME and noisy.interval[0] < 1 < noisy.interval[1]
    broken = compare_results(timed((1.0,), passed=False), timed((1.1, 1.1, 1.1)), 7)
    assert broken.verdict == "only B is correct" and broken.ratio is None
    assert "A failed at correctness" in broken.why


def test_the_command_evaluates_both_files_with_one_seed_and_pairs_them(tmp_path: Path, capsys):
    """On the cpu device (interpreted: correctness only, no speed verdict), end to end: one
    batch, the same seed, hence the same hidden workloads for both."""
    from tests.conftest import FIXTURES

    tasks = FIXTURES / "tasks"
    a, b = tmp_path / "a" / "solution.py", tmp_path / "b" / "solution.py"  # one name, two files
    for path in (a, b):
        path.parent.mkdir()
        path.write_bytes((FIXTURES / "candidates" / "axpy_torch.py").read_bytes())
    argv = ["--tasks-dir", str(tasks), "compare", str(a), str(b), "--task", "elementwise/axpy"]
    assert main([*argv, "--device", "cpu", "--seed", "11", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["seed"] == 11 and data["verdict"] == "both are correct"
    hidden = [
        [w["label"] for s in r["stages"] if s["name"] == "generalization" for w in s["workloads"]]
        for r in (data["a"], data["b"])
    ]
    assert hidden[0] and hidden[0] == hidden[1]  # the same drawn hidden workloads
    assert "interpreted" in data["why"]
    assert main(["compare", str(a), str(b)]) == 2  # files without --task: say how
    assert "arena compare A.py B.py --task ID" in capsys.readouterr().err
