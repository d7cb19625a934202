"""Device ids, parsed in one place: `[host/]local`, where local is `cpu`, `cuda:N`, `cuda:A-B`
(a device group), `xpu:N` or `sim:<gpu>`, and a Ray pool is `ray:<type>`.

Every question the engine asks of an id alone (which host, which kind of device, the timing
kind of its results, how many GPUs it names, whether it runs on the CPU) is answered here, so
that a remote host's `box1/sim:h200` and a local `sim:h200` can never disagree. Validation
against what exists (a known simulated GPU, a non-empty group) is `core.devices.device.parse_device`.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.model.statuses import TimingKind

SIM_PREFIX = "sim:"


@dataclass(frozen=True)
class DeviceId:
    """One device id, split: `host` (None for a local device) and the `local` id on that host."""

    host: str | None
    local: str

    @classmethod
    def parse(cls, device_id: str) -> DeviceId:
        text = device_id.strip()
        host, sep, local = text.rpartition("/")
        return cls(host or None, local) if sep else cls(None, text)

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
