"""The scheduler: where and when jobs run, what is retried, and what it reports.

Runners here only sleep or raise; times are asserted with wide margins, never tightly.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from core.model import events
from core.model.events import DeviceHealthChanged, JobStateChanged
from core.orchestration.scheduler import (
    InfrastructureFault,
    Job,
    JobFailed,
    Scheduler,
    SchedulerClosed,
    Slot,
    capacity,
    slots_for,
)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=20))


def states(seen: list, job_id: str) -> list[str]:
    return [e.state for e in seen if isinstance(e, JobStateChanged) and e.job_id == job_id]


class Recorder:
    """A runner that sleeps `seconds`, records where each job ran and how many ran at once."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds
        self.order: list[str] = []
        self.where: dict[str, list[Slot]] = {}
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}

    async def __call__(self, job: Job, slot: Slot) -> str:
        self.order.append(job.id)
        self.where.setdefault(job.id, []).append(slot)
        self.now[slot.device] = self.now.get(slot.device, 0) + 1
        self.peak[slot.device] = max(self.peak.get(slot.device, 0), self.now[slot.device])
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.now[slot.device] -= 1
        return f"{job.id}@{slot.id}"


def test_slots_one_per_gpu_and_several_per_cpu():
    assert capacity("cuda:0") == 1 and capacity("box1/cuda:3") == 1
    assert (
        capacity("cpu", cpu_slots=3) == 3
        and capacity("box1/cpu", cpu_slots=2) == 2
        and capacity("sim:h200", cpu_slots=4) == 4
    )
    assert capacity("cpu") >= 1
    slots = slots_for(["cuda:0", "cpu", "box1/cpu"], cpu_slots=2, capacities={"box1/cpu": 5})
    assert [s.id for s in slots] == ["cuda:0#0", "cpu#0", "cpu#1"] + [
        f"box1/cpu#{i}" for i in range(5)
    ]
    with pytest.raises(ValueError, match="capacity 0"):
        slots_for(["cpu"], cpu_slots=0)


def test_higher_priority_first_and_fifo_within_a_priority():
    async def main():
        runner = Recorder()
        async with Scheduler(slots_for(["cuda:0"]), runner) as s:
            for name, priority in [
                ("low-1", 0),
                ("high-1", 5),
                ("low-2", 0),
                ("mid", 1),
                ("high-2", 5),
            ]:
                s.submit(Job(name, "cuda:0", priority=priority))
        return runner.order

    assert run(main()) == ["high-1", "high-2", "mid", "low-1", "low-2"]


def test_one_job_at_a_time_per_gpu_and_n_per_cpu_device_in_parallel():
    async def main():
        runner = Recorder(seconds=0.2)
        async with Scheduler(slots_for(["cuda:0", "cuda:1", "cpu"], cpu_slots=3), runner) as s:
            start = time.monotonic()
            futures = [s.submit(Job(f"g{i}", ("cuda:0", "cuda:1"))) for i in range(4)]
            futures += [s.submit(Job(f"c{i}", "cpu")) for i in range(6)]
            outcomes = await asyncio.gather(*futures)
        return runner, outcomes, time.monotonic() - start

    runner, outcomes, seconds = run(main())
    assert runner.peak == {"cuda:0": 1, "cuda:1": 1, "cpu": 3}
    assert {runner.where[f"g{i}"][0].device for i in range(4)} == {"cuda:0", "cuda:1"}
    assert outcomes[0].startswith("g0@cuda:") and outcomes[4].startswith("c0@cpu#")
    # 10 jobs of 0.2 s: two rounds on every device in parallel (0.4 s), not 2.0 s one by one.
    assert seconds < 1.2


def test_infrastructure_fault_is_retried_on_another_device_and_finishes_once():
    seen: list = []

    async def main():
        calls: list[str] = []

        async def runner(job: Job, slot: Slot) -> str:
            calls.append(slot.device)
            if slot.device == "cuda:0":
                raise InfrastructureFault("host lost")
            return f"ok on {slot.device}, attempt {job.attempts + 1}"

        async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner, on_event=seen.append) as s:
            future = s.submit(Job("j", ("cuda:0", "cuda:1")))
            outcome = await future
        return calls, outcome

    calls, outcome = run(main())
    assert calls == ["cuda:0", "cuda:1"] and outcome == "ok on cuda:1, attempt 2"
    assert states(seen, "j") == ["queued", "running", "retrying", "running", "done"]
    retrying = next(e for e in seen if e.state == "retrying")
    assert (retrying.device, retrying.attempt, retrying.reason, retrying.fault) == (
        "cuda:0",
        1,
        "host lost",
        "infrastructure",
    )


def test_a_retry_waits_for_an_untried_device_and_the_failed_one_serves_others_meanwhile():
    async def main():
        calls: list[tuple[str, str]] = []

        async def runner(job: Job, slot: Slot) -> None:
            calls.append((job.id, slot.device))
            if job.id in ("flaky", "pinned") and job.attempts == 0:
                raise InfrastructureFault("harness died")
            await asyncio.sleep(0.1 if job.id == "busy" else 0)

        async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner) as s:
            s.submit(Job("busy", "cuda:1"))
            s.submit(
                Job("flaky", ("cuda:0", "cuda:1"), priority=1)
            )  # cuda:1 is busy: starts on cuda:0
            s.submit(Job("other", "cuda:0"))
        async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner) as s:
            s.submit(Job("pinned", "cuda:0"))  # one device only: retried there
        return calls

    calls = run(main())
    assert [d for j, d in calls if j == "flaky"] == ["cuda:0", "cuda:1"]
    assert calls.index(("other", "cuda:0")) < calls.index(("flaky", "cuda:1"))
    assert [d for j, d in calls if j == "pinned"] == ["cuda:0", "cuda:0"]


def test_infrastructure_retries_are_capped_then_the_job_fails_as_infrastructure():
    seen: list = []

    async def main():
        calls: list[str] = []

        async def runner(job: Job, slot: Slot) -> None:
            calls.append(slot.id)
            raise InfrastructureFault(f"reference failed on {slot.id}")

        async with Scheduler(
            slots_for(["cpu"], cpu_slots=2),
            runner,
            max_retries=2,
            on_event=seen.append,
            unhealthy_after=None,
        ) as s:
            future = s.submit(Job("j", "cpu"))
            with pytest.raises(JobFailed) as caught:
                await future
        return calls, caught.value

    calls, error = run(main())
    assert len(calls) == 3 and calls[:2] == [
        "cpu#0",
        "cpu#1",
    ]  # another slot of the same device first
    assert (
        error.kind == "infrastructure"
        and error.attempts == 3
        and "reference failed on cpu#1" in error.reason
    )
    assert states(seen, "j") == [
        "queued",
        "running",
        "retrying",
        "running",
        "retrying",
        "running",
        "failed",
    ]
    assert seen[-1].fault == "infrastructure"


def test_a_candidate_failure_is_an_outcome_and_never_retried():
    async def main():
        calls = 0

        async def runner(job: Job, slot: Slot) -> dict:
            nonlocal calls
            calls += 1
            return {"status": "failed", "failed_stage": "correctness"}

        async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner) as s:
            outcome = await s.submit(Job("j", ("cuda:0", "cuda:1")))
        return calls, outcome

    assert run(main()) == (1, {"status": "failed", "failed_stage": "correctness"})


def test_a_runner_bug_fails_its_job_as_error_and_the_scheduler_keeps_going():
    seen: list = []

    async def main():
        async def runner(job: Job, slot: Slot) -> str:
            if job.id == "bad":
                raise KeyError("payload has no 'task'")
            return "fine"

        async with Scheduler(slots_for(["cuda:0"]), runner, on_event=seen.append) as s:
            bad = s.submit(Job("bad", "cuda:0", priority=1))
            good = s.submit(Job("good", "cuda:0"))
            results = await asyncio.gather(bad, good, return_exceptions=True)
        return results

    bad, good = run(main())
    assert isinstance(bad, JobFailed) and bad.kind == "error" and bad.attempts == 1
    assert "KeyError" in bad.reason and isinstance(bad.__cause__, KeyError)
    assert good == "fine"
    failed = next(e for e in seen if e.state == "failed")
    assert failed.fault == "error" and "payload has no 'task'" in failed.reason


def test_cancel_a_queued_and_a_running_job_runs_the_runners_cleanup():
    seen: list = []

    async def main():
        cleaned: list[str] = []
        started = asyncio.Event()

        async def runner(job: Job, slot: Slot) -> str:
            try:
                started.set()
                await asyncio.sleep(30)
                return "finished"
            finally:
                cleaned.append(job.id)

        async with Scheduler(slots_for(["cuda:0"]), runner, on_event=seen.append) as s:
            running = s.submit(Job("running", "cuda:0"))
            queued = s.submit(Job("queued", "cuda:0"))
            await started.wait()
            assert s.cancel("queued") and s.cancel("running")
            assert not s.cancel("no-such-job")
            results = await asyncio.gather(running, queued, return_exceptions=True)
        return cleaned, results

    cleaned, results = run(main())
    assert cleaned == ["running"]  # the queued job never ran
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert states(seen, "running") == ["queued", "running", "cancelled"]
    assert states(seen, "queued") == ["queued", "cancelled"]
    assert (
        next(e for e in seen if e.job_id == "running" and e.state == "cancelled").device == "cuda:0"
    )


def test_cancelling_the_future_cancels_the_job_and_leaving_on_an_error_cancels_all():
    async def main():
        cleaned: list[str] = []

        async def runner(job: Job, slot: Slot) -> None:
            try:
                await asyncio.sleep(30)
            finally:
                cleaned.append(job.id)

        s = Scheduler(slots_for(["cuda:0", "cuda:1"]), runner)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(s.submit(Job("timed-out", "cuda:0")), timeout=0.05)
        await s.join()
        assert cleaned == ["timed-out"]
        with pytest.raises(RuntimeError, match="the caller broke"):
            async with s:
                s.submit(Job("a", "cuda:0"))
                s.submit(Job("b", "cuda:1"))
                s.submit(Job("c", "cuda:1"))
                await asyncio.sleep(0.02)
                raise RuntimeError("the caller broke")
        assert sorted(cleaned) == ["a", "b", "timed-out"]
        with pytest.raises(SchedulerClosed):
            s.submit(Job("late", "cuda:0"))

    run(main())


def test_a_hung_job_does_not_block_other_slots():
    async def main():
        async def runner(job: Job, slot: Slot) -> str:
            await asyncio.sleep(3600 if job.id == "hung" else 0.01)
            return job.id

        async with Scheduler(slots_for(["cuda:0", "cuda:1"]), runner) as s:
            s.submit(Job("hung", "cuda:0"))
            others = [s.submit(Job(f"j{i}", ("cuda:0", "cuda:1"))) for i in range(5)]
            done = await asyncio.wait_for(asyncio.gather(*others), timeout=2)
            assert s.cancel_all() == 1  # only the hung one was left
        return done

    assert run(main()) == [f"j{i}" for i in range(5)]


def test_every_state_change_is_an_event_in_order_and_json_ready():
    seen: list = []

    async def main():
        async def runner(job: Job, slot: Slot) -> int:
            await asyncio.sleep(0.01)
            return 1

        async with Scheduler(slots_for(["cpu"], cpu_slots=1), runner, on_event=seen.append) as s:
            s.submit(Job("a", "cpu"))
            s.submit(Job("b", "cpu"))

    run(main())
    assert [(e.job_id, e.state) for e in seen] == [
        ("a", "queued"),
        ("b", "queued"),
        ("a", "running"),
        ("a", "done"),
        ("b", "running"),
        ("b", "done"),
    ]
    assert [(e.device, e.slot, e.attempt) for e in seen if e.job_id == "a"] == [
        (None, None, 0),
        ("cpu", 0, 1),
        ("cpu", 0, 1),
    ]
    for event in seen:
        assert events.parse(events.to_json(event)) == event


def test_a_device_failing_repeatedly_is_taken_out_of_use():
    seen: list = []

    async def main():
        async def runner(job: Job, slot: Slot) -> str:
            if slot.device == "box1/cuda:0":
                raise InfrastructureFault("connection reset")
            return slot.device

        async with Scheduler(
            slots_for(["box1/cuda:0", "cuda:0"]), runner, on_event=seen.append, unhealthy_after=2
        ) as s:
            both = [s.submit(Job(f"j{i}", ("box1/cuda:0", "cuda:0"))) for i in range(4)]
            outcomes = await asyncio.gather(*both)
            only_box = s.submit(Job("box-only", "box1/cuda:0"))
            with pytest.raises(JobFailed, match="unhealthy"):
                await only_box
            assert s.unhealthy == {"box1/cuda:0"}
            s.mark_healthy("box1/cuda:0")
            assert s.unhealthy == frozenset()
        return outcomes

    assert run(main()) == ["cuda:0"] * 4
    health = [e for e in seen if isinstance(e, DeviceHealthChanged)]
    assert [(e.device, e.healthy) for e in health] == [
        ("box1/cuda:0", False),
        ("box1/cuda:0", True),
    ]
    # Once unhealthy, no job went there again.
    failures = [e for e in seen if isinstance(e, JobStateChanged) and e.state == "retrying"]
    assert len(failures) == 2


def test_a_broken_event_handler_does_not_stop_the_jobs():
    def handler(event):
        raise ValueError("the UI fell over")

    async def main():
        async def runner(job: Job, slot: Slot) -> str:
            return "ok"

        async with Scheduler(slots_for(["cpu"], cpu_slots=1), runner, on_event=handler) as s:
            return await s.submit(Job("j", "cpu"))

    assert run(main()) == "ok"


def test_bad_submissions_say_what_to_do():
    async def main():
        async def runner(job: Job, slot: Slot) -> None:
            await asyncio.sleep(0.05)

        async with Scheduler(slots_for(["cuda:0"]), runner) as s:
            with pytest.raises(
                ValueError, match="cuda:7, which have no slot here; slots exist for cuda:0"
            ):
                s.submit(Job("j", ("cuda:0", "cuda:7")))
            s.submit(Job("j", "cuda:0"))
            with pytest.raises(ValueError, match="already queued or running"):
                s.submit(Job("j", "cuda:0"))
        with pytest.raises(ValueError, match="names no device"):
            Job("k", ())

    run(main())


def test_a_runner_that_swallows_the_cancellation_is_still_reported_cancelled():
    async def main():
        started = asyncio.Event()

        async def runner(job: Job, slot: Slot) -> str:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                return "pretended to finish"
            return "finished"

        async with Scheduler(slots_for(["cuda:0"]), runner) as s:
            future = s.submit(Job("j", "cuda:0"))
            await started.wait()
            s.cancel("j")
            with pytest.raises(asyncio.CancelledError):
                await future

    run(main())
