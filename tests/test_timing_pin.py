"""Both sides of a GPU timing run their rounds on one CPU (worker_tools.pinned): a call that
waits for the GPU inside it is timed with the host's part in it, and that part must be the same
for the candidate and the baseline. The CPU and sim: devices compute on the host's cores: never
pinned."""

from __future__ import annotations

import os
import threading

import pytest

from core.harness.performance import timing_cpu
from core.harness.worker_tools import pinned

linux = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")


def _thread_cpus() -> dict[int, set[int]]:
    return {int(t): os.sched_getaffinity(int(t)) for t in os.listdir("/proc/self/task")}


@linux
def test_a_timed_round_runs_every_thread_on_the_one_cpu_then_goes_back() -> None:
    before = os.sched_getaffinity(0)
    cpu = max(before)
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)  # a thread torch or Triton would have started
    helper.start()
    try:
        with pinned(cpu):
            assert all(cpus == {cpu} for cpus in _thread_cpus().values())
        assert all(cpus == before for cpus in _thread_cpus().values())
    finally:
        stop.set()
        helper.join()


@linux
def test_no_cpu_or_one_this_process_may_not_use_leaves_it_as_it_is() -> None:
    before = os.sched_getaffinity(0)
    with pinned(None):
        assert os.sched_getaffinity(0) == before
    with pinned(max(before) + 4096):
        assert os.sched_getaffinity(0) == before


@linux
def test_the_cpu_is_chosen_once_for_a_gpu_and_never_for_the_host_devices() -> None:
    allowed = os.sched_getaffinity(0)

    def job(device: str, pin: str = "auto") -> dict:
        return {"device": {"type": device}, "timing": {"pin_cpu": pin}}

    assert timing_cpu(job("cuda")) == max(allowed)
    assert timing_cpu(job("cpu")) is None
    assert timing_cpu(job("sim")) is None
    assert timing_cpu(job("cuda", "off")) is None
    assert timing_cpu(job("rocm", str(min(allowed)))) == min(allowed)


def test_the_engine_passes_arena_timing_cpu_to_the_harness(monkeypatch, tmp_path) -> None:
    """The sandbox scrubs the harness's environment: the choice travels in the job."""
    from pathlib import Path

    from core.devices.device import probe
    from core.evaluation.job import build_job
    from core.tasks.spec import load_task

    fixtures = Path(__file__).resolve().parent / "fixtures"
    task = load_task(fixtures / "tasks" / "elementwise" / "axpy")

    def job() -> dict:
        return build_job(
            task, fixtures / "candidates" / "axpy_torch.py", probe("cpu"), "cpu", 5, tmp_path
        )

    monkeypatch.delenv("ARENA_TIMING_CPU", raising=False)
    assert job()["timing"]["pin_cpu"] == "auto"
    monkeypatch.setenv("ARENA_TIMING_CPU", "off")
    assert job()["timing"]["pin_cpu"] == "off"
