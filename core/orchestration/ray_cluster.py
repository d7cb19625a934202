"""A Ray cluster as the arena sees it: `ray:` device ids (`RayDevice`: what each evaluation asks
for), connecting (this process joins the cluster once, its `core` package shipped with every
job), and what the cluster offers (`offers`, `capacities`: the scheduler's slots per device).
`ray` is an optional extra, imported only when a Ray device is used."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.devices.device import PACKAGE_ROOT, DeviceError, LocalDevice

PREFIX = "ray:"
INSTALL_HINT = "Ray devices need the `ray` package: pip install -e '.[ray]' in the kernel-arena checkout (README, Install)"
LOCAL = "local"  # the address that starts a Ray instance on this machine


SHIP_CORE = {"py_modules": [str(PACKAGE_ROOT / "core")], "excludes": ["__pycache__", "*.pyc"]}


class RayUnavailable(DeviceError):
    """A Ray device or address was asked for, and `ray` is not installed."""


def is_ray_device(device_id: str) -> bool:
    return device_id.startswith(PREFIX)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class RayDevice:
    """What a `ray:` id asks each evaluation's task for."""

    id: str
    kind: str  # cpu | cuda | the accelerator type

    @classmethod
    def parse(cls, device_id: str) -> RayDevice:
        kind = device_id[len(PREFIX) :] if is_ray_device(device_id) else ""
        if not kind or "/" in kind or kind.strip() != kind:
            raise DeviceError(
                f"`{device_id}` is not a Ray device id: write ray:cpu, ray:cuda (any GPU) or ray:<accelerator type> such as ray:H100"
            )
        return cls(device_id, kind)

    @property
    def gpu(self) -> bool:
        return self.kind != "cpu"

    @property
    def local(self) -> LocalDevice:
        """The local device the harness is told it runs on (Ray pins the GPU itself)."""
        return LocalDevice("cuda:0" if self.gpu else "cpu")

    def resources(self, cpus_per_eval: float) -> dict[str, Any]:
        """Ray task options for one evaluation."""
        if self.kind == "cpu":
            return {"num_cpus": cpus_per_eval, "num_gpus": 0}
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": 1}
        if self.kind != "cuda":
            options["accelerator_type"] = self.kind
        return options


def connect(address: str | None) -> Any:
    """Connect this process to the cluster at `address` (`auto`: the one RAY_ADDRESS or a
    local `ray start` names; `local`: start one here), shipping this `core` package to every
    task (the job's `py_modules`). Already connected (a trainer that called ray.init), the
    existing connection is used as it is: its nodes must import `core` (kernel-arena installed
    there, or `py_modules` in the trainer's runtime_env: docs/ray.md). Returns `ray`."""
    ray = import_ray()
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or "auto"
        _check_reachable(address)
        try:
            ray.init(
                address=None if address == LOCAL else address,
                runtime_env=SHIP_CORE,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise DeviceError(
                f"cannot reach the Ray cluster at `{address}`: {exc} (start one with `ray start --head`, or pass --ray local)"
            ) from None
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A `host:port` or `ray://host:port` that takes no connection fails in seconds here;
    ray.init would retry it for minutes."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if address in ("auto", LOCAL) or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise DeviceError(
            f"cannot reach the Ray cluster at `{address}`: {exc} (is its head node up? `ray status` there says)"
        ) from None


@dataclass(frozen=True)
class Offer:
    """What the cluster offers for one Ray device id, over its live nodes."""

    id: str
    vendor: str
    kind: str  # CPU | GPU | the accelerator type
    count: float  # CPUs or GPUs in all
    nodes: int


def vendor_of(accelerator_type: str) -> str:
    """The vendor of one of Ray's accelerator type names for GPUs (`AMD-Instinct-MI300X-OAM`,
    `Intel-GPU-Max-1550`; NVIDIA's carry no prefix: `H100`, `A100`, `L4`)."""
    for prefix, vendor in (("AMD", "AMD"), ("Intel", "Intel")):
        if accelerator_type.lower().startswith(prefix.lower()):
            return vendor
    return "NVIDIA"


def offers(address: str | None) -> list[Offer]:
    """Every Ray device id the cluster can run, by vendor and type: `ray:cpu`, `ray:cuda`
    (any GPU) and one `ray:<TYPE>` per accelerator type its nodes report."""
    ray = connect(address)
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    found = [
        Offer(
            "ray:cpu",
            "",
            "CPU",
            sum(r.get("CPU", 0) for r in nodes),
            sum(1 for r in nodes if r.get("CPU")),
        )
    ]
    gpus = [r for r in nodes if r.get("GPU")]
    if gpus:
        found.append(Offer("ray:cuda", "any", "GPU", sum(r["GPU"] for r in gpus), len(gpus)))
    types = sorted(
        {k.split(":", 1)[1] for r in gpus for k in r if k.startswith("accelerator_type:")}
    )
    for t in types:
        with_type = [r for r in gpus if f"accelerator_type:{t}" in r]
        found.append(
            Offer(f"ray:{t}", vendor_of(t), t, sum(r["GPU"] for r in with_type), len(with_type))
        )
    return [o for o in found if o.count > 0]


def capacities(
    device_ids: Sequence[str], address: str | None, cpus_per_eval: float = 1
) -> dict[str, int]:
    """Slots per Ray device: evaluations the cluster can run at once (its GPUs of that type,
    or its CPUs / `cpus_per_eval`). DeviceError for a device the cluster does not offer."""
    wanted = [d for d in dict.fromkeys(device_ids) if is_ray_device(d)]
    if not wanted:
        return {}
    for d in wanted:
        RayDevice.parse(d)
    by_id = {o.id: o for o in offers(address)}
    found: dict[str, int] = {}
    for d in wanted:
        offer = by_id.get(d)
        count = int(offer.count // (cpus_per_eval if d == "ray:cpu" else 1)) if offer else 0
        if count < 1:
            have = ", ".join(f"{o.id} ({o.count:g})" for o in by_id.values()) or "nothing"
            raise DeviceError(
                f"the Ray cluster offers no {d}: it has {have} (`arena devices --ray ADDRESS` lists them)"
            )
        found[d] = count
    return found


def default_device(address: str | None) -> str:
    """`ray:cuda` on a cluster with GPUs, else `ray:cpu`."""
    return "ray:cuda" if any(o.id == "ray:cuda" for o in offers(address)) else "ray:cpu"
