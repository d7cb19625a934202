"""Autotuning that a reward can afford: a cap on the configurations an `@triton.autotune`
kernel tries per workload, and what each autotuner tried, for the result.

A policy that copies library code brings its `@triton.autotune` lists: twelve configurations
of a GEMM, each compiled and benchmarked for every new key (shape) the kernel is called with.
In the `train` profile the job's `autotune` budget caps each tuning at the first
`configs` of the kernel's configurations, in the order the kernel lists them, after the
kernel's own pruning (`prune_configs_by`); the best of those tried is what runs, is checked
and is timed. `full` has no budget: every configuration is tried, as Triton does.

The cap is a count, never a clock: the same code tries the same configurations on every
evaluation, whatever the machine's load or the cache's state, so a source submitted twice is
judged on the same candidates for its configuration (docs/performance.md, "Autotuning").

What was tried is reported per kernel (`AutotuneLog`): the number of tunings (one per new
key), the configurations tried in each and the number the kernel offered. The candidate's
worker sends it with its replies; the parent takes it as a diagnostic (a candidate can write
anything there: nothing scored reads it), into the result's `autotune`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

MAX_KERNELS = 32  # kernels reported per evaluation (a candidate's reply is not trusted to be small)


@dataclass
class Tuned:
    """One autotuned kernel's tunings in this process."""

    tunings: int = 0  # how many keys it was tuned for (one per new shape, dtype, ...)
    tried: int = 0  # the most configurations one tuning tried
    offered: int = 0  # the most configurations the kernel offered one tuning (after its pruning)

    def to_json(self) -> list[int]:
        return [self.tunings, self.tried, self.offered]


@dataclass
class AutotuneLog:
    """Per kernel name, what its autotuner tried; `changed` until the next report."""

    kernels: dict[str, Tuned] = field(default_factory=dict)
    changed: bool = False

    def add(self, kernel: str, tried: int, offered: int) -> None:
        entry = self.kernels.setdefault(kernel, Tuned())
        entry.tunings += 1
        entry.tried = max(entry.tried, tried)
        entry.offered = max(entry.offered, offered)
        self.changed = True

    def report(self) -> dict[str, list[int]] | None:
        """What changed since the last report (the whole log: it is small), else None."""
        if not self.changed:
            return None
        self.changed = False
        return {name: t.to_json() for name, t in list(self.kernels.items())[:MAX_KERNELS]}


LOG = AutotuneLog()  # this worker's: one candidate per process
_MARK = "_arena_autotune_budget"


def install(
    configs: int | None,
    log: AutotuneLog = LOG,
    rep_ms: float | None = None,
    compile_threads: int = 0,
) -> bool:
    """Cap every autotuner of this process at `configs` configurations per tuning (None: no
    cap), benchmark each trial for `rep_ms` and at most TRIAL_CALLS calls (a quarter of that
    warm-up; None: Triton's 100 and 25 ms) where the autotuner uses Triton's own benchmark,
    compile a tuning's configurations on `compile_threads` threads before its trials (0: one
    by one, in its trials, as Triton does; `compile_ahead`), and record what each tuning tried
    in `log`. Before the candidate is imported; False where this Triton has no autotuner to cap
    (no Triton, another layout)."""
    try:
        from triton.runtime import autotuner
    except ImportError:
        return False
    cls = autotuner.Autotuner
    if rep_ms:
        _shorten_trials(cls, float(rep_ms))
    current = cls.__dict__.get("prune_configs")
    if current is None:
        return False
    original = getattr(current, _MARK, current)  # installed twice (a test): wrap Triton's own

    def prune_configs(self: Any, kwargs: dict[str, Any]) -> list[Any]:
        offered = list(original(self, kwargs))
        tried = offered[:configs] if configs else offered
        log.add(_kernel_name(self), len(tried), len(offered))
        if compile_threads > 1 and len(tried) > 1:
            compile_ahead(self, tried, kwargs, compile_threads)
        return tried

    setattr(prune_configs, _MARK, original)
    cls.prune_configs = prune_configs
    return True


MAX_COMPILE_THREADS = 8


def compile_threads(job: dict[str, Any], device_type: str) -> int:
    """The threads a worker compiles a tuning's configurations on (`compile_ahead`): none on the
    CPU and `sim:` devices, whose kernels run in Triton's interpreter, nor where the job turns
    it off; else one per CPU this process may use, at most 8 (a tuning takes one per
    configuration it tries)."""
    if not job.get("autotune_compile_ahead") or device_type in ("cpu", "sim"):
        return 0
    return min(MAX_COMPILE_THREADS, len(os.sched_getaffinity(0)))


def compile_ahead(tuner: Any, configs: list[Any], kwargs: dict[str, Any], threads: int) -> None:
    """Compile the configurations a tuning is about to try, several at once, before its trials.

    Triton compiles each configuration inside its trial, one after another: for a GEMM's four
    configurations at a new specialisation, most of a warm visible-only turn (docs/performance.md,
    "A tuning's configurations compiled at once"). Triton's own asynchronous compile mode
    (`AsyncCompileMode`) runs each compile on a pool thread, where ptxas and the compiler's
    passes overlap, and puts the kernels in the function's cache, so the trials that follow load
    them. What is tried, in what order, and how each is measured do not change. A configuration
    that fails to compile here is left for its trial, which compiles it again and fails as
    Triton always has (an out-of-resources configuration is skipped, anything else is raised)."""
    try:
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode, active_mode
    except ImportError:
        return
    nargs = getattr(tuner, "nargs", None)
    if not isinstance(nargs, dict) or getattr(tuner, "cache_results", False):
        return  # Triton's own disk cache of tunings decides there whether trials run at all
    if active_mode.get() is not None:
        return  # the candidate's own asynchronous compile is active: one at a time in Triton
    args = list(nargs.values())
    meta = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    with (
        ThreadPoolExecutor(min(threads, len(configs)), "arena-compile") as pool,
        AsyncCompileMode(pool, ignore_errors=True),  # its end waits for every compile
    ):
        for config in configs:
            try:
                tuner.fn.run(*args, grid=None, warmup=True, **meta, **config.all_kwargs())
            except Exception:  # noqa: BLE001 - its trial meets the same error and says it
                continue


TRIAL_CALLS = 50  # a trial's timed calls at most in `train` (its warm-up, a quarter of that)


def _shorten_trials(cls: Any, rep_ms: float) -> None:
    """A trial of one configuration measured for `rep_ms` instead of Triton's 100 ms (and 25 of
    warm-up), and for at most TRIAL_CALLS calls (`CappedBench`): the median of tens of calls
    for a microsecond kernel, of a few for a millisecond one, whose configurations differ by
    more. Only Triton's own benchmark is shortened: an autotuner given its own `do_bench`, and
    the interpreter's (triton_cpu.py), keep theirs."""
    current = cls.__dict__.get("do_bench")
    if isinstance(current, functools.cached_property):  # Triton 3.6's
        found = current.func
    elif isinstance(current, property) and current.fget is not None:  # older, and the interpreter's
        found = current.fget
    else:
        return
    getter = getattr(found, _MARK, found)  # installed twice: wrap the first

    def do_bench(self: Any) -> Any:
        bench = getter(self)
        try:
            import triton.testing
        except ImportError:
            return bench
        if getattr(self, "_do_bench", None) is None and bench is triton.testing.do_bench:
            return CappedBench(bench, rep_ms)
        return bench

    setattr(do_bench, _MARK, getter)
    cls.do_bench = property(do_bench)


@dataclass(frozen=True)
class CappedBench:
    """Triton's `do_bench` for `rep_ms` of the device's time and at most TRIAL_CALLS calls.

    Triton sizes a trial by the device's time alone (`rep / estimate`), so a kernel of a few
    microseconds gets hundreds of calls, and each costs the host far more than the device (the
    autotuner's hooks, a launch, two events, a cache clear): on the H200, 0.11 s a trial for
    4 ms of the device's time, 4 of a tuned matmul's 5 s visible-only turn
    (bench/autotune_cost.py, docs/performance.md). Triton's own estimate, made here first (the
    same five calls, each after a cache clear), shortens `rep` and `warmup` to that many calls;
    Triton's benchmark then measures as it always does."""

    bench: Any  # triton.testing.do_bench
    rep_ms: float
    driver: Any = None  # Triton's active driver (a test gives its own)

    def __call__(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("warmup", None)
        kwargs.pop("rep", None)
        estimate_ms = self.estimate_ms(fn)
        rep = min(self.rep_ms, TRIAL_CALLS * estimate_ms)
        warmup = max(rep / 4, 1e-3)
        return self.bench(fn, *args, warmup=warmup, rep=rep, **kwargs)

    def estimate_ms(self, fn: Any) -> float:
        driver = self.driver
        if driver is None:
            from triton import runtime

            driver = runtime.driver.active
        device = driver.get_device_interface()
        fn()  # the first call (a compile, a cache load) kept out of the estimate, as Triton does
        device.synchronize()
        cache = driver.get_empty_cache_for_benchmark()
        start, end = device.Event(enable_timing=True), device.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            driver.clear_cache(cache)
            fn()
        end.record()
        device.synchronize()
        return max(start.elapsed_time(end) / 5, 1e-6)


def _kernel_name(tuner: Any) -> str:
    fn = getattr(tuner, "base_fn", None) or getattr(tuner, "fn", None)
    return str(getattr(fn, "__name__", None) or type(tuner).__name__)[:80]


def merge(into: dict[int, dict[str, list[int]]], pid: int, reported: Any) -> None:
    """A worker's report (untrusted: malformed entries are dropped) kept as that worker's
    latest: each report holds the worker's whole log."""
    if not isinstance(reported, dict):
        return
    kept: dict[str, list[int]] = {}
    for name, counts in list(reported.items())[:MAX_KERNELS]:
        if (
            isinstance(name, str)
            and isinstance(counts, list)
            and len(counts) == 3
            and all(type(c) is int and 0 <= c < 1_000_000 for c in counts)
        ):
            kept[name[:80]] = counts
    if kept and (pid in into or len(into) < MAX_KERNELS):
        into[pid] = kept


def summary(by_worker: dict[int, dict[str, list[int]]], budget: int | None) -> list[dict[str, Any]]:
    """The result's `autotune`: per kernel, its tunings summed over the candidate's workers
    (a second worker or a fresh one for timing tunes again), the most configurations one
    tuning tried and offered, and the budget that capped them (None: every one tried)."""
    kernels: dict[str, list[int]] = {}
    for log in by_worker.values():
        for name, (tunings, tried, offered) in log.items():
            old = kernels.setdefault(name, [0, 0, 0])
            kernels[name] = [old[0] + tunings, max(old[1], tried), max(old[2], offered)]
    return [
        {"kernel": name, "tunings": t, "tried": tried, "offered": offered, "budget": budget}
        for name, (t, tried, offered) in sorted(kernels.items())[:MAX_KERNELS]
    ]
