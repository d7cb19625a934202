"""Device ids, parsed in one place: `[host/]local[?options]`, where local is `cpu`, `cuda:N`,
`cuda:A-B` (a device group), `xpu:N` or `sim:<gpu>`, and a Ray pool is `ray:<type>`.

A simulated GPU takes options after a `?`, `&`-separated: `sim:h200?escalate=1.0&to=cuda:0`
sends a result whose predicted speedup band straddles 1.0 (the decision a trainer makes on it)
to the GPU `cuda:0` to be measured (core/evaluation/escalate.py; docs/simulation.md,
"Escalation"). Without `to`, the GPU is the one named by ARENA_ESCALATE_TO, where set.

Every question the engine asks of an id alone (which host, which kind of device, the timing
kind of its results, how many GPUs it names, whether it runs on the CPU) is answered here, so
that a remote host's `box1/sim:h200` and a local `sim:h200` can never disagree. Validation
against what exists (a known simulated GPU, a non-empty group) is `core.devices.device.parse_device`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from core.model.statuses import TimingKind

SIM_PREFIX = "sim:"
ESCALATE_ENV = "ARENA_ESCALATE_TO"  # the GPU an `escalate=` option sends to, without `to=`
OPTIONS = {"escalate", "to"}


class DeviceIdError(ValueError):
    """An id's options that cannot be used (core.devices.device.DeviceError wraps it)."""


@dataclass(frozen=True)
class Escalation:
    """`sim:<gpu>?escalate=T[&to=DEVICE]`: a prediction whose speedup band straddles T goes to
    DEVICE (or ARENA_ESCALATE_TO) to be measured; `to` None where neither names one."""

    threshold: float
    to: str | None


@dataclass(frozen=True)
class DeviceId:
    """One device id, split: `host` (None for a local device), the `local` id on that host, and
    its `options` (after a `?`: only simulated GPUs take any)."""

    host: str | None
    local: str
    options: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, device_id: str) -> DeviceId:
        text, _, query = device_id.strip().partition("?")
        options = tuple(
            (k.strip(), v.strip())
            for k, _, v in (part.partition("=") for part in query.split("&") if part.strip())
        )
        host, sep, local = text.rpartition("/")
        return cls(host or None, local, options) if sep else cls(None, text, options)

    @property
    def bare(self) -> str:
        """The id without its options (`box1/sim:h200`)."""
        return f"{self.host}/{self.local}" if self.host else self.local

    def escalation(self) -> Escalation | None:
        """The `escalate` option, checked (DeviceIdError says what is wrong and how to write it)."""
        given = dict(self.options)
        unknown = sorted(set(given) - OPTIONS)
        if unknown:
            raise DeviceIdError(
                f"device `{self.bare}`: unknown option `{unknown[0]}` (options: escalate=SPEEDUP, to=DEVICE)"
            )
        if given and self.sim_gpu is None:
            raise DeviceIdError(
                f"device `{self.bare}` takes no options: only simulated GPUs do (sim:h200?escalate=1.0&to=cuda:0)"
            )
        if "escalate" not in given:
            if "to" in given:
                raise DeviceIdError(
                    f"device `{self.bare}`: `to` without `escalate`: write sim:h200?escalate=1.0&to={given['to']}"
                )
            return None
        try:
            threshold = float(given["escalate"])
        except ValueError:
            threshold = math.nan
        if not math.isfinite(threshold) or threshold <= 0:
            raise DeviceIdError(
                f"device `{self.bare}`: escalate={given['escalate']!r} is not a speedup: write a positive number, e.g. escalate=1.0"
            )
        to = given.get("to") or os.environ.get(ESCALATE_ENV) or None
        if to is not None:
            target = DeviceId.parse(to)
            if target.options or target.kind in ("cpu", "sim", "ray") or target.host:
                raise DeviceIdError(
                    f"device `{self.bare}`: escalate to `{to}`: name a GPU of this machine (cuda:N, xpu:N)"
                )
        return Escalation(threshold, to)

    @property
    def kind(self) -> str:
        """`cpu`, `cuda`, `xpu`, `sim` or `ray` (the part before the colon)."""
        return self.local.split(":", 1)[0]

    @property
    def sim_gpu(self) -> str | None:
        """The GPU a simulated device stands for (`sim:h200` -> `h200`), else None."""
        return self.local[len(SIM_PREFIX) :] if self.local.startswith(SIM_PREFIX) else None

    @property
    def timing_kind(self) -> TimingKind:
        return timing_kind_for_type(self.kind)

    @property
    def runs_on_cpu(self) -> bool:
        """The CPU device and the simulated GPUs (which run on the CPU): many slots, not one per GPU."""
        return self.kind in ("cpu", "sim")

    @property
    def gpus(self) -> int:
        """How many GPUs the id names: `cuda:0-3` (a device group) is four, `cuda:2` one."""
        tail = self.local.split(":", 1)[-1]
        if self.kind == "cuda" and "-" in tail:
            low, high = tail.split("-", 1)
            return int(high) - int(low) + 1
        return 1


def timing_kind_for_type(device_type: str) -> TimingKind:
    """The timing kind of a device type (`DeviceInfo.type` or an id's kind)."""
    return {"cpu": TimingKind.CPU, "sim": TimingKind.PREDICTED}.get(
        device_type, TimingKind.MEASURED
    )


def timing_kind_of(device_id: str) -> TimingKind:
    """`cpu` for a CPU (local or a host's), `predicted` for a simulated GPU (local or a host's), else `measured`."""
    return DeviceId.parse(device_id).timing_kind


def local_part(device_id: str) -> str:
    """The id on its host: `box1/cuda:0` -> `cuda:0`; a local id as it is."""
    return DeviceId.parse(device_id).local


def gpus_in(device_id: str) -> int:
    return DeviceId.parse(device_id).gpus
