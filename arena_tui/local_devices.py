"""Which device a command runs on when the user names none, and whether a named local GPU exists.

A GPU id that this machine does not have (`cuda:0` on a laptop) is bad input, reported at once
(exit 2), not an infrastructure fault after a probe times out. With no GPU device node at all the
answer needs no torch; where nodes exist, torch is asked in a child process (as `arena devices`
does), and the list is cached for the process.
"""

from __future__ import annotations

import glob
from functools import lru_cache

from core.devices.device import DeviceError, ProbeError, local_device_ids, parse_device

NO_GPU_DEFAULT = "sim:h200"  # predicted H200 times: a meaningful first figure on any laptop

# Device nodes a vendor's driver makes (the sandbox binds the same ones, docs/sandbox.md).
_NODES = {"cuda": ("/dev/nvidia[0-9]*", "/dev/kfd"), "xpu": ("/dev/dri/renderD*",)}


def _has_nodes(kind: str) -> bool:
    return any(glob.glob(pattern) for pattern in _NODES.get(kind, ()))


@lru_cache(maxsize=1)
def _gpu_ids() -> tuple[str, ...]:
    if not (_has_nodes("cuda") or _has_nodes("xpu")):
        return ()
    try:
        return tuple(i for i in local_device_ids() if i != "cpu")
    except ProbeError:
        return ()


def default_device() -> str:
    """The first local GPU, else `sim:h200`: never the cpu device, whose interpreted times are
    no performance figure. The user picks another with `--device`."""
    gpus = _gpu_ids()
    return gpus[0] if gpus else NO_GPU_DEFAULT


def require_here(device_id: str) -> None:
    """Raise DeviceError (exit 2) for a local GPU this machine does not have; remote and
    simulated devices, and the cpu, pass (parse_device checks their spelling)."""
    device = parse_device(device_id)
    if device.type not in _NODES:
        return
    gpus = _gpu_ids()
    have = {parse_device(g).index for g in gpus if parse_device(g).type == device.type}
    missing = [i for i in device.indices if i not in have]
    if missing:
        found = ", ".join(gpus) if gpus else "no GPU"
        raise DeviceError(
            f"`{device_id}`: this machine has {found}; use one of: cpu, "
            + ", ".join(gpus + ("sim:h200 (predicted H200 times)",))
            + " (`arena devices` lists them)"
        )
