"""Devices: what can run the harness, how it is pinned, and what its peaks are.

Ids (parsed in core/devices/ids.py): `cpu`, `cuda:N` (NVIDIA, and AMD under torch's HIP build), `xpu:N` (Intel),
`sim:<gpu>` (a simulated GPU on this machine's CPU, whose times are predicted: core/devices/sim/ and
docs/simulation.md). `<host>/<device>` belongs to remotes/ and is refused here.
A device is probed by the harness itself (`python -m core.harness probe`), in a separate
process, so the engine never holds a GPU context and a remote box is probed the same way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from core.devices.ids import DeviceId, DeviceIdError, timing_kind_for_type

BUNDLED_PEAKS = Path(__file__).resolve().parents[1] / "data" / "peaks.yaml"
USER_PEAKS = (
    Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "kernel-arena" / "peaks.yaml"
)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_ID = re.compile(
    r"^(cpu|cuda:\d+(-\d+)?|xpu:\d+)$"
)  # cuda:0-3: a device group, for multi-rank tasks


SIM_GPUS = (
    "h100",
    "h200",
    "b200",
    "mi300x",
    "mi355x",
)  # peaks-table keys a `sim:` device can stand for


class DeviceError(ValueError):
    """A device id that cannot be used here; the message says what to use instead."""


@dataclass(frozen=True)
class Peaks:
    """Figures for speed of light. `source` is `measured` or `spec`."""

    source: str
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    fp32_tflops: float | None = None
    hbm_tbps: float | None = None
    link_gbps: float | None = None
    launch_overhead_us: float | None = None
    link_latency_us: float | None = None
    # The launch floor (core/harness/probe.py `measure_peaks`): the median time of a
    # one-element kernel under the arena's own timer, replayed from a CUDA graph / launched eagerly.
    launch_graph_us: float | None = None
    launch_eager_us: float | None = None
    # The arena's timer between two processes (measured only): how far an identity
    # evaluation's two sides read apart on the same kernel, an additive offset that lasts the
    # evaluation; it widens each measured workload's interval (core/evaluation/scoring.py).
    timer_offset_us: float | None = None

    def compute_tflops(self, kind: str) -> float | None:
        return getattr(self, f"{kind}_tflops", None)


@dataclass(frozen=True)
class DeviceInfo:
    """What a probe found, plus the matching entry of the peaks table (if any)."""

    id: str
    type: str
    vendor: str
    model: str
    arch: str
    memory_gb: float | None
    units: int | None
    versions: dict[str, Any]
    peaks_key: str | None = None
    spec: Peaks | None = None
    measured: Peaks | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def timing_kind(self) -> str:
        return timing_kind_for_type(self.type).value

    @property
    def sol_peaks(self) -> Peaks | None:
        """Measured figures where recorded (filled in from spec where a figure is missing).
        Its `source` says `measured` only where a speed-of-light figure was: a device whose
        measured entry holds nothing but its timer's offset keeps the datasheet's label."""
        if self.measured is None:
            return self.spec
        if self.spec is None:
            return self.measured
        merged = {
            k: getattr(self.measured, k)
            if getattr(self.measured, k) is not None
            else getattr(self.spec, k)
            for k in Peaks.__dataclass_fields__
            if k != "source"
        }
        speed_of_light = any(
            getattr(self.measured, k) is not None
            for k in Peaks.__dataclass_fields__
            if k not in ("source", "timer_offset_us")
        )
        return Peaks(source="measured" if speed_of_light else self.spec.source, **merged)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "vendor": self.vendor,
            "model": self.model,
            "arch": self.arch,
            "memory_gb": self.memory_gb,
            "units": self.units,
            "peaks": self.peaks_key,
        }


class Device(Protocol):
    """The seam the evaluator sees: where the harness runs and how it is started there."""

    id: str

    def harness_env(self) -> dict[str, str]: ...

    def torch_device(self) -> str: ...


@dataclass(frozen=True)
class LocalDevice:
    """A device of this machine: the CPU, or one GPU pinned by its vendor's visibility variable."""

    id: str

    @property
    def type(self) -> str:
        return self.id.split(":")[0]

    @property
    def index(self) -> int:
        """The first GPU (of a device group such as `cuda:0-3`)."""
        return int(self.id.split(":")[1].split("-")[0]) if ":" in self.id else 0

    @property
    def indices(self) -> list[int]:
        """Every GPU the id names: one, or a group's range."""
        if ":" not in self.id:
            return []
        low, _, high = self.id.split(":")[1].partition("-")
        return list(range(int(low), int(high or low) + 1))

    def torch_device(self) -> str:
        return (
            "cpu" if self.type in ("cpu", "sim") else f"{self.type}:0"
        )  # a sim: device runs on the CPU

    def harness_env(self) -> dict[str, str]:
        env = {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "PYTHONUNBUFFERED": "1",
        }
        if self.type == "sim":
            env["ARENA_SIM_PRELOAD"] = (
                "1"  # the warm parent imports fake tensors once (core/harness/__main__.py)
            )
        env.update(self.warm_env())
        if self.type in ("cpu", "sim"):
            # Triton's interpreter multiplies each tl.dot tile with numpy: on OpenBLAS's threads, a
            # 64x128x64 tile on a busy 2-core machine takes 5 ms of spinning instead of 0.3 ms.
            env["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
        return {**env, **self.visibility_env(_is_rocm_build() if self.type == "cuda" else False)}

    def warm_env(self) -> dict[str, str]:
        """What the harness parent prepares once for the workers it forks: Triton's key and lazy
        imports, where the workers compile (core/harness/triton_warm.py; the CPU device only
        interprets). A remote host's job script passes it too (remotes/executor.py)."""
        return {} if self.type == "cpu" else {"ARENA_TRITON_WARM": "1"}

    def visibility_env(self, rocm: bool) -> dict[str, str]:
        """The variable that pins the harness to this device, for a torch build that is ROCm's
        (`rocm`) or not; a remote host passes what its own torch says."""
        if self.type == "cuda":
            # One variable only: ROCm honours both and would apply them one after the other.
            return {
                "HIP_VISIBLE_DEVICES" if rocm else "CUDA_VISIBLE_DEVICES": ",".join(
                    map(str, self.indices)
                )
            }
        if self.type == "xpu":
            return {"ZE_AFFINITY_MASK": str(self.index)}
        return {"CUDA_VISIBLE_DEVICES": ""}  # the CPU device never touches a GPU


def parse_device(device_id: str) -> LocalDevice:
    """A device of this machine from its id; options (`sim:h200?escalate=1.0&to=cuda:0`) are
    checked here and left out of the device (Evaluator reads them: core/devices/ids.py)."""
    parsed = DeviceId.parse(device_id)
    if parsed.options:
        try:
            parsed.escalation()
        except DeviceIdError as exc:
            raise DeviceError(str(exc)) from None
    device_id = parsed.bare
    if _ID.match(device_id):
        device = LocalDevice(device_id)
        if device.type == "cuda" and not device.indices:  # cuda:3-1
            raise DeviceError(
                f"device group `{device_id}` is empty: write the first GPU before the last, e.g. cuda:0-3"
            )
        return device
    if device_id.startswith("sim:"):
        if device_id[4:] in SIM_GPUS:
            return LocalDevice(device_id)
        known = ", ".join(f"sim:{k}" for k in SIM_GPUS)
        raise DeviceError(f"unknown simulated device `{device_id}`: the simulated GPUs are {known}")
    if "/" in device_id:
        raise DeviceError(
            f"`{device_id}` is a remote host's device: those run through `arena run` with a hosts file (docs/hosts.md); "
            "here use cpu, cuda:N, cuda:A-B, xpu:N or sim:<gpu>"
        )
    raise DeviceError(
        f"unknown device `{device_id}`: use cpu, cuda:N (NVIDIA or AMD) or xpu:N (Intel)"
    )


@lru_cache(maxsize=1)
def _is_rocm_build() -> bool:
    import torch

    return bool(getattr(torch.version, "hip", None))


# --- peaks ---------------------------------------------------------------------------------


def load_peaks(user_file: Path | None = None) -> dict[str, dict[str, Any]]:
    """The bundled peaks table, with the user's entries (same shape) merged over it."""
    table = yaml.safe_load(BUNDLED_PEAKS.read_text())["devices"]
    user = user_file if user_file is not None else USER_PEAKS
    if user.is_file():
        try:
            extra = (yaml.safe_load(user.read_text()) or {}).get("devices", {})
        except yaml.YAMLError as exc:
            raise DeviceError(f"{user}: not valid YAML ({exc}); fix it or remove it") from None
        for key, entry in extra.items():
            merged = dict(table.get(key, {}))
            for section, value in entry.items():
                merged[section] = (
                    {**merged.get(section, {}), **value} if isinstance(value, dict) else value
                )
            table[key] = merged
    return table


def _peaks(section: dict[str, Any] | None, source: str) -> Peaks | None:
    if not section:
        return None
    return Peaks(
        source=source, **{k: section.get(k) for k in Peaks.__dataclass_fields__ if k != "source"}
    )


def match_peaks(model: str, table: dict[str, dict[str, Any]]) -> str | None:
    """The table entry whose `match` substrings occur in the device's model name; the most
    specific (longest) match wins, so `H200` is not taken for `H20`."""
    best, best_len = None, 0
    for key, entry in table.items():
        for needle in entry.get("match", []):
            if needle.lower() in model.lower() and len(needle) > best_len:
                best, best_len = key, len(needle)
    return best


# --- probing -------------------------------------------------------------------------------


def local_device_ids() -> list[str]:
    """The devices of this machine, asked of torch in a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "core.harness", "devices"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PACKAGE_ROOT,
        env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)},
    )
    try:
        return list(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        raise ProbeError(
            f"listing this machine's devices failed: {proc.stderr.strip()[-500:] or 'no output'}"
        ) from None


class ProbeError(RuntimeError):
    """The device could not be probed (no such GPU, no torch there, ...)."""


@lru_cache(maxsize=16)
def probe(device_id: str) -> DeviceInfo:
    device = parse_device(device_id)
    if device.type == "sim":
        return sim_info(device_id)
    env = {**os.environ, **device.harness_env()}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "core.harness", "probe", device.torch_device()],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=PACKAGE_ROOT,
        )
    except subprocess.TimeoutExpired:
        raise ProbeError(f"probing {device_id} took more than 120 s") from None
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise ProbeError(
            f"probing {device_id} failed: {proc.stderr.strip()[-500:] or 'no output'}"
        ) from None
    if "error" in data:
        raise ProbeError(f"{device_id}: {data['error']}")
    return info_from_probe(device_id, data)


def info_from_probe(device_id: str, data: dict[str, Any]) -> DeviceInfo:
    """A DeviceInfo from the harness's probe output, with its peaks-table entry (local and
    remote devices alike)."""
    table = load_peaks()
    key = match_peaks(data["model"], table) if data["type"] != "cpu" else None
    entry = table.get(key, {}) if key else {}
    return DeviceInfo(
        id=device_id,
        type=data["type"],
        vendor=data["vendor"],
        model=data["model"],
        arch=data.get("arch") or "",
        memory_gb=data.get("memory_gb"),
        units=data.get("units"),
        versions=data.get("versions", {}),
        peaks_key=key,
        spec=_peaks(entry.get("spec"), "spec"),
        measured=_peaks(entry.get("measured"), "measured"),
        extra={k: data[k] for k in ("l2_mb", "driver") if k in data},
    )


def sim_info(device_id: str) -> DeviceInfo:
    """A simulated GPU: the named peaks-table entry, run on this machine's CPU (no probe: the
    harness reports its versions when an evaluation starts)."""
    device_id = parse_device(device_id).id  # the id without its options
    key = device_id[4:]
    entry = load_peaks().get(key)
    if entry is None:
        raise DeviceError(f"`{device_id}`: the peaks table has no `{key}` entry")
    spec = entry.get("spec") or {}
    return DeviceInfo(
        id=device_id,
        type="sim",
        vendor=entry.get("vendor", ""),
        model=f"{entry.get('name', key)} (simulated)",
        arch=entry.get("arch", ""),
        memory_gb=spec.get("memory_gb"),
        units=spec.get("sm_count"),
        versions={},
        peaks_key=key,
        spec=_peaks(entry.get("spec"), "spec"),
        measured=_peaks(entry.get("measured"), "measured"),
        extra={"l2_mb": spec.get("l2_mb"), "simulated": True, "calibration": _calibration(key)},
    )


def _calibration(key: str) -> str:
    from core.devices.sim.targets import (
        calibration_label,  # core.devices.sim reads this module: import late
    )

    return calibration_label(key)
