"""Device memory that travels as a file descriptor: CUDA's virtual memory management API.

The trusted worker's shared regions on a GPU are created here (`export`) and mapped by the
candidate's and the baseline's workers (`import_fd`). The descriptor goes over the workers' Unix
socket (SCM_RIGHTS), as a memfd does on the CPU, so mapping it asks nothing of the kernel but
the descriptor itself.

Why not CUDA IPC handles (`cudaIpcGetMemHandle`, torch's `_share_cuda_`): opening one makes the
driver fetch the exporter's descriptor from that process, a ptrace-mode access. The trusted
worker is not dumpable (no same-user process may read its memory), so only a process holding
CAP_SYS_PTRACE over it could open its handles. A candidate worker in a namespace of its own
(isolation.py) holds no capability at all, and neither does any worker of a user who is not
root: every such round fell back to the old path, where the candidate's own process draws the
inputs (measured on the H200, 2026-12-02: docs/integrity.md).

Linux, NVIDIA drivers with POSIX-descriptor handles (CUDA 10.2 and later); elsewhere `export`
raises `Unavailable` and the caller keeps CUDA IPC handles. The functions are the driver API's
(libcuda), called through ctypes: torch exposes none of them.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

import torch

_as_tensor = torch.as_tensor  # taken before any candidate code can replace it

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0
CUDA_ERROR_OUT_OF_MEMORY = 2


class Unavailable(RuntimeError):
    """This driver or build cannot export device memory as a descriptor."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class DriverError(RuntimeError):
    def __init__(self, call: str, code: int, text: str):
        # "out of memory" in the text: shared_region.is_oom counts it as memory exhaustion
        super().__init__(f"{call}: CUDA driver error {code} ({text})")
        self.code = code


_P = ctypes.POINTER
_U64, _SIZE, _INT, _VOID = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p
# Every argument typed: an untyped Python int goes to C as a 32-bit int (regions pass 4 GiB).
_SIGNATURES: dict[str, list[Any]] = {
    "cuGetErrorString": [_INT, _P(ctypes.c_char_p)],
    "cuCtxGetCurrent": [_P(_VOID)],
    "cuCtxSetCurrent": [_VOID],
    "cuCtxSynchronize": [],
    "cuDeviceGet": [_P(_INT), _INT],
    "cuDevicePrimaryCtxRetain": [_P(_VOID), _INT],
    "cuMemGetAllocationGranularity": [_P(_SIZE), _P(_AllocationProp), _INT],
    "cuMemCreate": [_P(_U64), _SIZE, _P(_AllocationProp), _U64],
    "cuMemExportToShareableHandle": [_P(_INT), _U64, _INT, _U64],
    "cuMemImportFromShareableHandle": [_P(_U64), _VOID, _INT],
    "cuMemAddressReserve": [_P(_U64), _SIZE, _SIZE, _U64, _U64],
    "cuMemMap": [_U64, _SIZE, _SIZE, _U64, _U64],
    "cuMemSetAccess": [_U64, _SIZE, _P(_AccessDesc), _SIZE],
    "cuMemUnmap": [_U64, _SIZE],
    "cuMemAddressFree": [_U64, _SIZE],
    "cuMemRelease": [_U64],
}


@functools.cache
def _lib() -> ctypes.CDLL:
    if getattr(torch.version, "hip", None) or not torch.cuda.is_available():
        raise Unavailable("not a CUDA build with a GPU")
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
    except (OSError, AttributeError) as exc:
        raise Unavailable(f"the CUDA driver has no virtual memory management: {exc}") from None
    return lib


def _call(name: str, *args: Any) -> None:
    lib = _lib()
    code = getattr(lib, name)(*args)
    if code != 0:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(code, ctypes.byref(text))
        raise DriverError(name, code, (text.value or b"?").decode())


def _ensure_context(index: int) -> None:
    """The driver API acts on the calling thread's current context: torch's primary one."""
    lib = _lib()
    ctx = ctypes.c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value:
        return
    dev = ctypes.c_int()
    _call("cuDeviceGet", ctypes.byref(dev), index)
    _call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    _call("cuCtxSetCurrent", ctx)


def _prop(index: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = _Location(CU_MEM_LOCATION_TYPE_DEVICE, index)
    return prop


def rounded(nbytes: int, index: int) -> int:
    """`nbytes` up to the device's allocation granularity (2 MiB on Hopper)."""
    gran = ctypes.c_size_t()
    _call(
        "cuMemGetAllocationGranularity",
        ctypes.byref(gran),
        ctypes.byref(_prop(index)),
        CU_MEM_ALLOC_GRANULARITY_MINIMUM,
    )
    g = max(int(gran.value), 1)
    return -(-nbytes // g) * g


class _Mapping:
    """A range of this process's address space mapped onto one allocation. torch's tensor over
    it holds this object (`__cuda_array_interface__`), and its deleter drops it, so the range is
    unmapped when the last tensor over it goes, never while one can still reach it."""

    def __init__(self, handle: int, nbytes: int, index: int):
        self.ptr: ctypes.c_uint64 | None = ctypes.c_uint64()
        self.nbytes, self.index = nbytes, index
        _call("cuMemAddressReserve", ctypes.byref(self.ptr), nbytes, 0, 0, 0)
        try:
            _call("cuMemMap", self.ptr, nbytes, 0, handle, 0)
        except BaseException:
            _call("cuMemAddressFree", self.ptr, nbytes)
            raise
        try:
            access = _AccessDesc(
                _Location(CU_MEM_LOCATION_TYPE_DEVICE, index), CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            )
            _call("cuMemSetAccess", self.ptr, nbytes, ctypes.byref(access), 1)
        except BaseException:
            self.close()
            raise
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (int(self.ptr.value or 0), False),
            "strides": None,
            "version": 2,
        }

    def close(self) -> None:
        if self.ptr is None:
            return
        ptr, self.ptr = self.ptr, None
        _ensure_context(self.index)  # the last tensor may go on another thread
        try:
            _call("cuCtxSynchronize")  # no queued kernel may still reach the range
            _call("cuMemUnmap", ptr, self.nbytes)
        finally:
            _call("cuMemAddressFree", ptr, self.nbytes)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at exit the driver may be gone already
            pass


def _tensor(mapping: _Mapping, device: torch.device) -> torch.Tensor:
    return _as_tensor(mapping, device=device)


def export(nbytes: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """A new allocation of at least `nbytes` on `device`, mapped here as a flat uint8 tensor,
    and a descriptor another process imports it by (the caller sends it, then closes it). The
    memory is freed once this tensor and every importer's mapping are gone."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    _ensure_context(index)
    size = rounded(nbytes, index)
    handle = ctypes.c_uint64()
    try:
        _call("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(_prop(index)), 0)
    except DriverError as exc:
        if exc.code == CUDA_ERROR_OUT_OF_MEMORY:
            raise
        raise Unavailable(str(exc)) from None
    try:
        fd = ctypes.c_int(-1)
        try:
            _call(
                "cuMemExportToShareableHandle",
                ctypes.byref(fd),
                handle,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        except DriverError as exc:
            raise Unavailable(str(exc)) from None
        try:
            base = _tensor(_Mapping(handle.value, size, index), device)
        except BaseException:
            os.close(fd.value)
            raise
    finally:
        _call("cuMemRelease", handle)  # the mapping and the descriptor keep the memory
    os.set_inheritable(fd.value, False)
    return base, fd.value


def import_fd(fd: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """Map the allocation behind `fd` (from `export`, `nbytes` long) as a flat uint8 tensor. The
    descriptor stays the caller's to close."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    _ensure_context(index)
    handle = ctypes.c_uint64()
    _call(
        "cuMemImportFromShareableHandle",
        ctypes.byref(handle),
        ctypes.c_void_p(fd),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    )
    try:
        return _tensor(_Mapping(handle.value, nbytes, index), device)
    finally:
        _call("cuMemRelease", handle)
