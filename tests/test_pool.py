"""One evaluator per slot (core.orchestration.pool), shared by `arena run` and the RL arena.

Making an evaluator probes its device, which blocks for seconds; the pool does it in a worker
thread, so the event loop (the app's, during `arena run`) keeps running meanwhile."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from core.devices.device import DeviceInfo
from core.orchestration.pool import EvaluatorPool
from core.orchestration.scheduler import InfrastructureFault, Slot
from core.rl.arena import Arena

PROBE_S = 0.6


class SlowProbe:
    """An executor whose construction blocks like a device probe."""

    def __init__(self, device: str, folder: Path):
        time.sleep(PROBE_S)  # blocking, as a probe is: subprocesses, CUDA initialisation
        self.info = DeviceInfo(
            id=device,
            type="cpu",
            vendor="cpu",
            model="test",
            arch="x86_64",
            memory_gb=None,
            units=None,
            versions={},
        )
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_the_device_probe_runs_off_the_event_loop(tmp_path):
    pool = EvaluatorPool(SlowProbe, lambda: tmp_path, keep_folders=True)
    slot = Slot("cpu", 0)

    async def main() -> tuple[int, float]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        beat = asyncio.create_task(ticker())
        start = time.monotonic()
        first = await pool.get(slot)
        took = time.monotonic() - start
        assert await pool.get(slot) is first  # one evaluator per slot, made once
        beat.cancel()
        return ticks, took

    ticks, took = asyncio.run(main())
    assert took >= PROBE_S
    assert ticks >= 0.5 * took / 0.02, (
        f"the loop ran {ticks} times in {took:.2f} s: the probe blocked it"
    )
    executor = pool.evaluators()[0].executor
    pool.drop(slot)
    assert executor.closed and pool.evaluators() == []


def test_an_evaluator_made_for_a_cancelled_job_is_closed_with_the_pool(tmp_path):
    """A run stopped by a signal while a slot's device is being probed: the probe's thread
    cannot be stopped, so what it makes (a harness, the slot's folder) is closed when it is
    there, and `aclose` waits for that, so the run's folder is removed after the last writer."""
    made: list[SlowProbe] = []

    def probe(device: str, folder: Path) -> SlowProbe:
        made.append(SlowProbe(device, folder))
        return made[-1]

    pool = EvaluatorPool(probe, lambda: tmp_path / "run", keep_folders=True)

    async def main() -> None:
        job = asyncio.create_task(pool.get(Slot("cpu", 0)))
        await asyncio.sleep(PROBE_S / 3)  # the probe is under way
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        assert not made, "still probing when the job was cancelled"
        await pool.aclose()
        assert len(made) == 1 and made[0].closed, "the orphan's harness was stopped"

    asyncio.run(main())
    assert pool.evaluators() == []


def test_a_device_that_cannot_be_reached_is_an_infrastructure_fault(tmp_path):
    def unreachable(device: str, folder: Path):
        raise OSError("no route to host")

    pool = EvaluatorPool(unreachable, lambda: tmp_path)
    with pytest.raises(InfrastructureFault, match="box1/cuda:0: no route to host"):
        asyncio.run(pool.get(Slot("box1/cuda:0", 0)))


def test_the_rl_arena_and_runs_share_the_one_pool():
    import inspect

    from core.orchestration import runs

    assert isinstance(Arena(["cpu"]).pool, EvaluatorPool)
    assert "EvaluatorPool(" in inspect.getsource(runs._execute)
