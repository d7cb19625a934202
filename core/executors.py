"""Executors: where a resolved job runs. The evaluator never knows which one it has.

`LocalExecutor` runs jobs through a warm harness on this machine's device; remotes/ adds one
that runs them on a host in the hosts file. Both take the same job and return the same events.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from . import events
from .devices import DeviceInfo, LocalDevice, parse_device, probe

OnEvent = Callable[[events.Event], None]
HARNESS_START_S = 120.0


class Executor(Protocol):
    """Runs resolved jobs on one device and streams back their events."""

    device_id: str
    info: DeviceInfo

    def torch_device(self) -> str:
        """The device as the harness names it where it runs (`cuda:0` once pinned)."""
        ...

    async def run(self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None) -> list[events.Event]:
        """Run one job (its paths point into this machine's files; `job_dir` is its local
        folder); every event goes to `on_event` as it arrives. Raises HarnessError when the
        harness or the host fails, which is never the candidate's fault."""
        ...

    def close(self) -> None: ...


class HarnessError(RuntimeError):
    """The harness itself failed (not the candidate): an infrastructure fault."""


class Harness:
    """A warm harness parent on one device: started once, it evaluates job after job, forking
    fresh workers for each. Use as a context manager."""

    def __init__(self, device: LocalDevice, log_dir: Path):
        self.device = device
        self.log_path = log_dir / "harness.log"
        read_fd, write_fd = os.pipe()
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core.harness", "serve", "--events-fd", str(write_fd)],
            env={**os.environ, **device.harness_env()}, stdin=subprocess.PIPE, stdout=self._log, stderr=self._log,
            pass_fds=(write_fd,), start_new_session=True, cwd=str(log_dir),
        )
        os.close(write_fd)
        self._events = os.fdopen(read_fd, "rb", buffering=0)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._events, selectors.EVENT_READ)
        self._buffer = b""
        first = self._next(time.monotonic() + HARNESS_START_S)
        if not isinstance(first, events.HarnessReady):
            raise HarnessError(f"the harness did not start: {self._tail()}")

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def _next(self, deadline: float) -> events.Event:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(timeout=left):
                raise HarnessError("the harness sent no event before its deadline")
            chunk = os.read(self._events.fileno(), 1 << 16)
            if not chunk:
                raise HarnessError(f"the harness exited: {self._tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return events.parse(line)

    def run(self, job_path: Path, deadline_s: float, on_event: OnEvent | None = None) -> list[events.Event]:
        """Run one job; every event is passed to `on_event` as it arrives and returned."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{job_path}\n".encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise HarnessError(f"the harness exited: {self._tail()}") from None
        deadline = time.monotonic() + deadline_s
        seen: list[events.Event] = []
        while True:
            event = self._next(deadline)
            seen.append(event)
            if on_event is not None:
                on_event(event)
            if isinstance(event, events.EvaluationFinished):
                return seen

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._selector.close()
        self._events.close()
        self._log.close()


class LocalExecutor:
    """A device of this machine, evaluated through one warm harness, restarted when it dies."""

    def __init__(self, device_id: str, log_dir: Path):
        self.device: LocalDevice = parse_device(device_id)
        self.device_id = device_id
        self.info = probe(device_id)
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.harness: Harness | None = None

    def torch_device(self) -> str:
        return self.device.torch_device()

    async def run(self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None) -> list[events.Event]:
        return await asyncio.to_thread(self._run, job, job_dir, deadline_s, on_event)

    def _run(self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None) -> list[events.Event]:
        job_path = job_dir / "job.json"
        job_path.write_text(json.dumps(job))
        try:
            if self.harness is None:
                self.harness = Harness(self.device, self.log_dir)
            return self.harness.run(job_path, deadline_s, on_event)
        except HarnessError:
            self.close()  # the next job starts a fresh harness
            raise

    def close(self) -> None:
        if self.harness is not None:
            self.harness.close()
            self.harness = None
