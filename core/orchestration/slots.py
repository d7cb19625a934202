"""The scheduler's nouns: a `Job` (what runs, on which devices, at what priority), a `Slot` (one
place on a device where one job runs at a time), how many slots a device has (`capacity`,
`slots_for`: one per GPU, several per CPU), and the two ways a job fails (`InfrastructureFault`,
retried on another slot; `JobFailed`, past its retries)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.devices.ids import DeviceId


class InfrastructureFault(Exception):
    """Raised by a runner when the job failed through no fault of the candidate (host lost,
    harness died, reference failed): the scheduler retries it on another slot."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class JobFailed(RuntimeError):
    """What a failed job's future raises. `kind` is `infrastructure` (every retry spent, or no
    healthy device left) or `error` (the runner raised something else: a bug in the caller,
    chained as `__cause__`)."""

    def __init__(self, job_id: str, kind: str, reason: str, attempts: int):
        super().__init__(f"job {job_id} failed ({kind}) after {attempts} attempt(s): {reason}")
        self.job_id, self.kind, self.reason, self.attempts = job_id, kind, reason, attempts


class SchedulerClosed(RuntimeError):
    """A job was submitted to a scheduler that has been closed."""


@dataclass(frozen=True, order=True)
class Slot:
    """One place a job can run: `device` is a device id (`cpu`, `cuda:0`, `box1/cuda:0`)."""

    device: str
    index: int = 0

    @property
    def id(self) -> str:
        return f"{self.device}#{self.index}"


@dataclass(frozen=True)
class Job:
    """One unit of work. `devices`: the ids it may run on (any of them); `attempts`: the runs
    before this one, as the runner sees it. `payload` is the caller's, never looked at here."""

    id: str
    devices: tuple[str, ...]
    priority: int = 0
    payload: Any = None
    attempts: int = 0

    def __post_init__(self) -> None:
        devices = (self.devices,) if isinstance(self.devices, str) else tuple(self.devices)
        if not devices:
            raise ValueError(f"job {self.id} names no device: give the device ids it may run on")
        object.__setattr__(self, "devices", devices)


Runner = Callable[[Job, Slot], Awaitable[Any]]


def default_cpu_slots() -> int:
    """Half the machine's cores (the harness runs a candidate and a reference side by side)."""
    return max(1, (os.cpu_count() or 2) // 2)


def capacity(device_id: str, cpu_slots: int | None = None) -> int:
    """How many evaluations a device runs at once: one per GPU, `cpu_slots` for a CPU or a
    simulated device (which runs on the CPU); a host's devices (`box1/cpu`) alike."""
    if DeviceId.parse(device_id).runs_on_cpu:
        return cpu_slots if cpu_slots is not None else default_cpu_slots()
    return 1


def slots_for(
    devices: Iterable[str],
    cpu_slots: int | None = None,
    capacities: Mapping[str, int] | None = None,
) -> list[Slot]:
    """The slots of these devices; `capacities` overrides the count per device id (a remote
    host's CPU, say, from its hosts-file entry)."""
    slots: list[Slot] = []
    for device in dict.fromkeys(devices):
        n = (capacities or {}).get(device, capacity(device, cpu_slots))
        if n < 1:
            raise ValueError(
                f"device {device} has capacity {n}: give at least 1 slot, or leave the device out"
            )
        slots.extend(Slot(device, i) for i in range(n))
    return slots
