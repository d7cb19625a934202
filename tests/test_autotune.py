"""Autotuning that a reward can afford (core/harness/autotune.py): in `train` an
@triton.autotune kernel tries its first configurations only, in the order it lists them, and
the result says how many it tried; `full` tries every one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import autotune
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TUNED = FIXTURES / "candidates" / "axpy_autotuned.py"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)


@pytest.fixture(scope="module")
def axpy():
    return load_task(FIXTURES / "tasks" / "elementwise" / "axpy")


def test_train_tries_the_first_configurations_and_full_tries_them_all(axpy) -> None:
    with Evaluator("cpu", timing=FAST) as ev:
        train, full = (
            asyncio.run(
                ev.aevaluate(axpy, TUNED, seed=3, visible_only=True, performance=False, profile=p)
            )
            for p in ("train", "full")
        )
    # The last two configurations are wrong and the fastest in the interpreter: only an
    # exhaustive search finds them.
    assert (train.status, full.status, full.failed_stage) == ("passed", "failed", "correctness")
    (tuned,) = train.autotune or []
    assert tuned["kernel"] == "_axpy_tuned"
    assert (tuned["tried"], tuned["offered"], tuned["budget"]) == (4, 6, 4)
    assert tuned["tunings"] >= 2  # one per new `n`: the compile call's and each workload's
    assert [(k["tried"], k["offered"], k["budget"]) for k in full.autotune or []] == [(6, 6, None)]


def test_a_worker_report_is_kept_only_when_well_formed() -> None:
    into: dict[int, dict[str, list[int]]] = {}
    autotune.merge(into, 1, {"k": [2, 4, 6], "bad": [1, "x", 3], "neg": [-1, 0, 0]})
    autotune.merge(into, 2, "not a report")
    autotune.merge(into, 2, {"k": [1, 4, 6]})
    assert into == {1: {"k": [2, 4, 6]}, 2: {"k": [1, 4, 6]}}
    assert autotune.summary(into, 4) == [
        {"kernel": "k", "tunings": 3, "tried": 4, "offered": 6, "budget": 4}
    ]


def test_train_shortens_only_tritons_own_benchmark_of_a_trial() -> None:
    import triton.testing

    class Tuner:  # the two ways an autotuner benchmarks: Triton's do_bench, or its own
        def __init__(self, own=None):
            self._do_bench = own

        @property
        def do_bench(self):
            return self._do_bench or triton.testing.do_bench

    autotune._shorten_trials(Tuner, 20.0)
    short = Tuner().do_bench
    assert short.func is triton.testing.do_bench and short.keywords == {"warmup": 5.0, "rep": 20.0}
    own = object()
    assert Tuner(own).do_bench is own
