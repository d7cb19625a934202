"""Autotuning that a reward can afford (core/harness/autotune.py): in `train` an
@triton.autotune kernel tries its first configurations only, in the order it lists them, and
the result says how many it tried; `full` tries every one."""

from __future__ import annotations

import asyncio
import functools
import threading
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

        @functools.cached_property  # as Triton 3.6 has it (a property before)
        def do_bench(self):
            return self._do_bench or triton.testing.do_bench

    autotune._shorten_trials(Tuner, 20.0)
    short = Tuner().do_bench
    assert isinstance(short, autotune.CappedBench)
    assert (short.bench, short.rep_ms) == (triton.testing.do_bench, 20.0)
    own = object()
    assert Tuner(own).do_bench is own


def test_the_installed_triton_autotuner_gets_the_shortened_trials() -> None:
    """On the real class, not a stand-in: Triton 3.6 made `do_bench` a cached_property, and a
    wrapper that only knew `property` left every trial at Triton's 100 ms on the H200."""
    from triton.runtime import autotuner

    probe = type("Probe", (), {"do_bench": autotuner.Autotuner.__dict__["do_bench"]})
    autotune._shorten_trials(probe, 4.0)
    installed = probe.__dict__["do_bench"]
    assert isinstance(installed, property)
    original = autotuner.Autotuner.__dict__["do_bench"]
    found = getattr(original, "func", None) or original.fget  # Triton's (or a wrapper of it)
    assert getattr(installed.fget, autotune._MARK) is getattr(found, autotune._MARK, found)


class FakeDevice:
    """Triton's device interface where every call takes `call_ms` of the device's time."""

    def __init__(self, call_ms: float):
        self.call_ms, self.calls = call_ms, 0

    def synchronize(self) -> None:
        pass

    def Event(self, enable_timing: bool):  # Triton's name for it
        device = self

        class Event:
            def record(self) -> None:
                self.at = device.calls * device.call_ms

            def elapsed_time(self, end) -> float:
                return end.at - self.at

        return Event()


class FakeDriver:
    def __init__(self, call_ms: float):
        self.device = FakeDevice(call_ms)

    def get_device_interface(self) -> FakeDevice:
        return self.device

    def get_empty_cache_for_benchmark(self) -> object:
        return object()

    def clear_cache(self, cache: object) -> None:
        pass


@pytest.mark.parametrize(
    ("call_ms", "rep", "warmup"),
    [
        (1.0, 4.0, 1.0),  # a millisecond kernel: the device's 4 ms, as before (4 calls)
        (0.01, 0.5, 0.125),  # a 10 µs kernel: 50 calls (400 by the device's time alone)
    ],
)
def test_a_trial_in_train_times_at_most_fifty_calls(call_ms, rep, warmup) -> None:
    driver = FakeDriver(call_ms)
    asked = {}

    def do_bench(fn, warmup=25, rep=100, quantiles=None):
        asked.update(warmup=warmup, rep=rep, quantiles=quantiles)
        return [1.0, 0.9, 1.1]

    def call() -> None:
        driver.device.calls += 1

    bench = autotune.CappedBench(do_bench, rep_ms=4.0, driver=driver)
    assert bench(call, quantiles=(0.5, 0.2, 0.8)) == [1.0, 0.9, 1.1]
    assert asked["rep"] == pytest.approx(rep) and asked["warmup"] == pytest.approx(warmup)
    assert asked["quantiles"] == (0.5, 0.2, 0.8)
    assert asked["rep"] / call_ms <= autotune.TRIAL_CALLS


class _Config:
    def __init__(self, block: int):
        self.block = block

    def all_kwargs(self) -> dict[str, int]:
        return {"BLOCK": self.block, "num_warps": 4}


class _Kernel:
    """A stand-in for a @triton.jit function's `run`: where Triton's asynchronous compile mode
    is active, its compile goes to the mode's pool, as JITFunction._do_compile does."""

    def __init__(self, barrier: threading.Barrier | None = None, broken: int | None = None):
        self.barrier, self.broken = barrier, broken
        self.compiled: dict[int, str] = {}  # BLOCK -> the thread it compiled on
        self.runs: list[dict] = []

    def run(self, *args, grid, warmup, **kwargs):
        from triton.runtime import _async_compile

        self.runs.append({"args": args, "grid": grid, "warmup": warmup, **kwargs})
        block = kwargs["BLOCK"]

        def compile_() -> str:
            if block == self.broken:
                raise RuntimeError("out of shared memory")
            if self.barrier is not None:
                self.barrier.wait(timeout=30)  # every configuration compiling at once
            return threading.current_thread().name

        mode = _async_compile.active_mode.get()
        assert mode is not None, "compiled outside Triton's asynchronous mode"
        return mode.submit(block, compile_, lambda name: self.compiled.__setitem__(block, name))


class _Tuner:
    def __init__(self, fn: _Kernel):
        self.fn, self.nargs = fn, {"x": "x-tensor", "n": 4096}


def test_a_tunings_configurations_compile_at_once_before_its_trials() -> None:
    from triton.runtime import _async_compile

    configs = [_Config(b) for b in (32, 64, 128, 256)]
    kernel = _Kernel(barrier=threading.Barrier(len(configs)))
    autotune.compile_ahead(
        _Tuner(kernel), configs, {"grid": (1,), "warmup": False, "alpha": 2.0}, threads=4
    )
    # All four compiled together on the pool (the barrier needs all four at once) and are in
    # the function's cache when the trials start; the arguments are the tuning's own.
    assert sorted(kernel.compiled) == [32, 64, 128, 256]
    assert all(name.startswith("arena-compile") for name in kernel.compiled.values())
    assert {(r["args"], r["warmup"], r["grid"], r["alpha"]) for r in kernel.runs} == {
        (("x-tensor", 4096), True, None, 2.0)
    }
    assert _async_compile.active_mode.get() is None  # the mode ends with the tuning's compiles


def test_a_configuration_that_fails_to_compile_ahead_is_left_to_its_trial() -> None:
    configs = [_Config(b) for b in (32, 64, 128)]
    kernel = _Kernel(broken=64)
    autotune.compile_ahead(_Tuner(kernel), configs, {"grid": (1,), "warmup": False}, threads=2)
    assert sorted(kernel.compiled) == [32, 128]  # 64 compiles (and fails) again in its trial
    # A configuration that clashes with the call's own arguments fails at once, and the rest
    # still compile (its trial raises Triton's own "Conflicting meta-parameters").
    clash = _Kernel()
    autotune.compile_ahead(_Tuner(clash), configs, {"BLOCK": 16, "warmup": False}, threads=2)
    assert clash.compiled == {}


def test_a_candidates_own_asynchronous_compile_is_left_alone() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime._async_compile import AsyncCompileMode

    kernel = _Kernel()
    with ThreadPoolExecutor(1) as pool, AsyncCompileMode(pool):
        autotune.compile_ahead(_Tuner(kernel), [_Config(32), _Config(64)], {}, threads=2)
    assert kernel.runs == []  # its trials compile them, one at a time, as Triton does


def test_configurations_compile_ahead_only_where_triton_compiles() -> None:
    on = {"autotune_compile_ahead": True}
    assert autotune.compile_threads(on, "cpu") == 0  # the interpreter compiles nothing
    assert autotune.compile_threads(on, "sim") == 0
    assert autotune.compile_threads({"autotune_compile_ahead": False}, "cuda") == 0
    assert 1 <= autotune.compile_threads(on, "cuda") <= autotune.MAX_COMPILE_THREADS
