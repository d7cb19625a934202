"""A fake executor for tests of what surrounds evaluations (runs, leases, signals, storage
faults, the server's lifecycle): it starts no harness and probes nothing, and answers every job
with a compile failure after `delay_s` seconds, so hundreds of evaluations take no time.

    FakeExecutor("cpu", folder)               # the scheduler's executor factory signature
    FakeExecutor.delay_s = 0.5                 # per evaluation (default 0, or $ARENA_FAKE_DELAY_S)

`python -m tests.fakes.executor ARENA-ARGS...` runs the `arena` command line with every
executor replaced by this one (for subprocess tests: signals, full disks): `arena run` and
`arena serve` then evaluate nothing for real, and their device ids still have to parse."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from core.devices.device import DeviceInfo
from core.model import events


class FakeExecutor:
    delay_s = float(os.environ.get("ARENA_FAKE_DELAY_S", "0"))
    runs = 0  # jobs started, in this process

    def __init__(self, device_id: str, folder: Path) -> None:
        self.device_id = device_id
        self.info = DeviceInfo(
            id=device_id,
            type="cpu",
            vendor="fake",
            model="fake-cpu",
            arch="fake",
            memory_gb=None,
            units=None,
            versions={},
        )
        self.closed = False

    def torch_device(self) -> str:
        return "cpu"

    async def run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: Any
    ) -> list[events.Event]:
        FakeExecutor.runs += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        seen: list[events.Event] = [
            events.EvaluationStarted(job["task_id"], {"id": self.device_id}, {}),
            events.StageFinished(
                "compile", "failed", 0.0, message="the fake executor compiles nothing"
            ),
            events.EvaluationFinished("failed", seconds=self.delay_s),
        ]
        for event in seen:
            if on_event is not None:
                on_event(event)
        return seen

    def close(self) -> None:
        self.closed = True


def factory(*_: Any) -> Any:
    """`executor_factory(hosts, ray)` as arena_tui.wiring has it: every device gets a fake."""
    return FakeExecutor


if __name__ == "__main__":
    import arena_tui.run_cmd
    import arena_tui.wiring
    from arena_tui.cli import main

    arena_tui.wiring.executor_factory = factory  # type: ignore[assignment]
    arena_tui.run_cmd.executor_factory = factory  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
