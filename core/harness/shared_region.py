"""The memory both workers of an evaluation map, and how it is laid out.

A region is a flat uint8 tensor: a sealed memfd on the CPU, an allocation of the CUDA driver's
exported as a descriptor on a GPU (cuda_vmm.py), both sent over a socket with SCM_RIGHTS
(`send_fd`, `recv_fd`); where the driver cannot export one, a CUDA IPC handle of the trusted
worker's own allocation (`create_region` on the trusted side, `attach_region` on the
candidate's).
`plan` and `plan_copies` lay inputs and declared outputs out in `Slot`s, each on a 256-byte
boundary; inputs that cannot be shared raise `Unshareable` (the old path is kept), and
`cannot_share` says why a device keeps the old path. Used by the timed rounds (shared_io.py)
and the correctness runs (shared_check.py).
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import socket
from dataclasses import dataclass
from typing import Any

import torch

from core.harness import channel, cuda_vmm, inputs
from core.harness.guard import trusted

ALIGN = 256  # bytes: every slot starts on a boundary any vector load accepts
_TB = torch._C.TensorBase
_view, _reshape = _TB.view, _TB.reshape
_empty = torch.empty
_SEALS = (
    getattr(fcntl, "F_SEAL_SHRINK", 0)
    | getattr(fcntl, "F_SEAL_GROW", 0)
    | getattr(fcntl, "F_SEAL_SEAL", 0)
)


class Unshareable(ValueError):
    """These inputs cannot travel through shared memory (the old path times the round)."""


def cannot_share(device: torch.device) -> str | None:
    """Why this device keeps the old path (inputs drawn in the candidate's process), or None."""
    if device.type == "cpu":
        return (
            None
            if hasattr(os, "memfd_create") and hasattr(socket, "send_fds")
            else "this platform has no memfd_create or SCM_RIGHTS"
        )
    if device.type == "cuda":
        if getattr(torch.version, "hip", None):
            return "ROCm builds are not checked with CUDA IPC here"
        return None
    return f"{device.type} devices cannot share memory between processes here"


# --- the shared region -----------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * inputs.dtype_of(self.dtype).itemsize

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: Any, size: int) -> Slot:
        slot = cls(int(data["offset"]), str(data["dtype"]), tuple(int(n) for n in data["shape"]))
        if slot.offset < 0 or min(slot.shape, default=1) < 0 or slot.offset + slot.nbytes > size:
            raise ValueError(f"a slot {data!r} outside the shared region of {size} bytes")
        return slot


class RegionOOM(RuntimeError):
    """The trusted worker could not allocate a region even after freeing what was stale: the
    candidate's stage ends as an infrastructure error that says so."""


class Region:
    """A flat uint8 tensor both workers map; `view(slot)` is a typed tensor over part of it.
    `counter`, on the trusted side of a CUDA region: torch's IPC reference counter (its
    shared-memory file and slot), which the consumer returns when its mapping goes."""

    def __init__(
        self, base: torch.Tensor, keep: Any = None, counter: tuple[bytes, int] | None = None
    ):
        self.base, self._keep, self.counter = base, keep, counter
        self.nbytes = int(base.numel())

    def view(self, slot: Slot) -> torch.Tensor:
        with trusted():
            raw = self.base[slot.offset : slot.offset + slot.nbytes]
            return _reshape(_view(raw, inputs.dtype_of(slot.dtype)), slot.shape)

    def close(self) -> None:
        """Forget the region here; the mapping goes when its last tensor does."""
        self.base, self._keep = None, None  # type: ignore[assignment]

    def close_for_dead_consumer(self) -> None:
        """Free a region whose consumer died holding it (killed, crashed). torch keeps an
        exported CUDA block alive, in its IPC limbo, until the consumer's count is returned,
        and a killed consumer never returns it: without this the block stays allocated for
        the trusted worker's whole life. Returned here, while this side still owns the block
        (so the counter's slot is still this block's), the `close` frees it at once. Only for
        a consumer known dead (reaped): one alive would keep mapping memory given back."""
        try:
            if self.counter is not None and self.base is not None:
                handle, offset = self.counter
                torch.UntypedStorage._release_ipc_counter_cuda(handle, offset)
        finally:
            self.counter = None
            self.close()


def free_cached(device: torch.device) -> None:
    """Give the blocks of freed regions back to the driver (CUDA: torch's IPC limbo collected,
    then the caching allocator emptied); nothing to do for memfd regions."""
    if device.type == "cuda":
        torch.cuda.ipc_collect()
        torch.cuda.empty_cache()


def is_oom(exc: BaseException) -> bool:
    """The device (or, for a memfd, the host) is out of memory."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOMEM, errno.ENOSPC)
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
    )


def _map(fd: int, nbytes: int) -> torch.Tensor:
    """A MAP_SHARED mapping owned by a torch storage: it lives while any tensor over it lives
    (a candidate that keeps an input, or a thread still reading one after the round, must not
    find it unmapped)."""
    return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=nbytes, dtype=torch.uint8)


def create_region(
    nbytes: int, device: torch.device, free_stale: Any = None
) -> tuple[Region, dict[str, Any], list[int]]:
    """The trusted worker's side: a new region, its description and the descriptors to send.
    Where the device is out of memory, `free_stale()` (what the caller holds that is stale)
    and the allocator's cache are freed and the allocation is tried once more; a second
    failure raises RegionOOM naming the size and the device."""
    try:
        return _create_region(nbytes, device)
    except Exception as exc:  # only memory exhaustion is retried
        if not is_oom(exc):
            raise
        first = f"{type(exc).__name__}: {exc}"[:300]
    if free_stale is not None:
        free_stale()
    free_cached(device)
    try:
        return _create_region(nbytes, device)
    except Exception as exc:
        if not is_oom(exc):
            raise
        raise RegionOOM(
            f"the trusted worker could not allocate a shared region of {nbytes} bytes on "
            f"{device} ({first}), also after freeing its stale regions and its allocator's cache"
        ) from None


def _create_region(nbytes: int, device: torch.device) -> tuple[Region, dict[str, Any], list[int]]:
    nbytes = max(nbytes, ALIGN)
    if device.type == "cpu":
        fd = os.memfd_create(
            "arena-shared-io", os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0)
        )
        try:
            os.ftruncate(fd, nbytes)
            if (
                _SEALS
            ):  # the candidate gets this descriptor: it must not shrink it under our mapping
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            base = _map(fd, nbytes)
        except BaseException:
            os.close(fd)
            raise
        return Region(base), {"kind": "memfd", "nbytes": nbytes}, [fd]
    if device.type == "cuda":
        try:
            base, fd = cuda_vmm.export(nbytes, device)
        except cuda_vmm.Unavailable:
            pass  # CUDA IPC handles, for whom the driver lets open them (cuda_vmm.py says who)
        else:
            return Region(base), {"kind": "cuda_vmm", "nbytes": int(base.numel())}, [fd]
        base = _empty(nbytes, dtype=torch.uint8, device=device)
        try:
            (dev, handle, size, offset, ref_handle, ref_offset, event, event_sync) = (
                base.untyped_storage()._share_cuda_()
            )
        except Exception as exc:  # noqa: BLE001 - a driver or build without CUDA IPC: the old path
            raise Unshareable(
                f"CUDA IPC is not available: {type(exc).__name__}: {exc}"[:300]
            ) from None
        desc = {
            "kind": "cuda_ipc",
            "nbytes": nbytes,
            "device": int(dev),
            "handle": bytes(handle).hex(),
            "size": int(size),
            "offset": int(offset),
            "ref_handle": bytes(ref_handle).hex(),
            "ref_offset": int(ref_offset),
            "event": None if event is None else bytes(event).hex(),
            "event_sync": bool(event_sync),
        }
        return Region(base, base, (bytes(ref_handle), int(ref_offset))), desc, []
    raise Unshareable(cannot_share(device) or device.type)


def carries_fd(desc: Any) -> bool:
    """A region so described travels as a descriptor that follows its header."""
    return isinstance(desc, dict) and desc.get("kind") in ("memfd", "cuda_vmm")


def attach_region(desc: dict[str, Any], fds: list[int], device: torch.device) -> Region:
    """The candidate's side: map the region the trusted worker described."""
    nbytes = int(desc["nbytes"])
    if desc.get("kind") == "memfd":
        if len(fds) != 1:
            raise ValueError("the shared region's descriptor did not arrive")
        try:
            return Region(_map(fds[0], nbytes))
        finally:
            os.close(fds[0])
    if desc.get("kind") == "cuda_vmm":
        if len(fds) != 1:
            raise ValueError("the shared region's descriptor did not arrive")
        try:
            with trusted():
                return Region(cuda_vmm.import_fd(fds[0], nbytes, device))
        finally:
            os.close(fds[0])
    if desc.get("kind") == "cuda_ipc":
        storage = torch.UntypedStorage._new_shared_cuda(
            int(desc["device"]),
            bytes.fromhex(desc["handle"]),
            int(desc["size"]),
            int(desc["offset"]),
            bytes.fromhex(desc["ref_handle"]),
            int(desc["ref_offset"]),
            None if desc["event"] is None else bytes.fromhex(desc["event"]),
            bool(desc["event_sync"]),
        )
        with trusted():
            base = _empty((0,), dtype=torch.uint8, device=device).set_(storage, 0, (nbytes,), (1,))
        return Region(base, storage)
    raise ValueError(f"unknown shared region {desc.get('kind')!r}")


def _json_value(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise Unshareable(
            f"a non-tensor input of type {type(value).__name__} cannot be sent"
        ) from None
    return value


def plan(
    args: list[Any], out_specs: list[dict[str, Any]], shapes: dict[str, list[int]]
) -> tuple[list[dict[str, Any]], list[Slot], int]:
    """Slots for the tensor inputs (as drawn) and the declared outputs; other inputs as values."""
    layouts, outs, nbytes = plan_copies(args, out_specs, shapes, 1)
    return layouts[0], outs[0], nbytes


def plan_copies(
    args: list[Any], out_specs: list[dict[str, Any]], shapes: dict[str, list[int]], copies: int
) -> tuple[list[list[dict[str, Any]]], list[list[Slot]], int]:
    """`plan` for `copies` runs side by side (a correctness run repeated on fresh copies of the
    same inputs): per copy its inputs' layout and its output slots, and the bytes of them all."""
    offset = 0

    def slot(dtype: str, shape: tuple[int, ...]) -> Slot:
        nonlocal offset
        s = Slot(offset, dtype, shape)
        offset += -(-s.nbytes // ALIGN) * ALIGN
        return s

    for arg in args:
        if isinstance(arg, torch.Tensor) and (
            type(arg) is not torch.Tensor or arg.layout != torch.strided or not arg.is_contiguous()
        ):
            raise Unshareable("an input is not a plain contiguous tensor")
    values = [None if isinstance(a, torch.Tensor) else _json_value(a) for a in args]
    layouts: list[list[dict[str, Any]]] = []
    outs: list[list[Slot]] = []
    for _ in range(copies):
        layouts.append(
            [
                {"slot": slot(str(a.dtype).removeprefix("torch."), tuple(a.shape)).to_json()}
                if isinstance(a, torch.Tensor)
                else {"value": v}
                for a, v in zip(args, values)
            ]
        )
        outs.append([slot(spec["dtype"], inputs.output_shape(spec, shapes)) for spec in out_specs])
    return layouts, outs, offset


# --- the peer socket -------------------------------------------------------------------------


def send_fd(sock: socket.socket, header: dict[str, Any], fd: int) -> None:
    """A frame, then one descriptor (SCM_RIGHTS) with a byte of its own."""
    channel.send(sock, header)
    socket.send_fds(sock, [b"f"], [fd])


def recv_fd(sock: socket.socket) -> int:
    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected one descriptor")
    os.set_inheritable(
        fds[0], False
    )  # a process the candidate starts must not keep the round alive
    return fds[0]
