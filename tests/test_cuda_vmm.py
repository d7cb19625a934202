"""GPU regions travel as descriptors (core/harness/cuda_vmm.py), with CUDA IPC handles kept for
drivers that cannot export one. What a CPU machine can check: the description each kind of
region carries, which of them bring a descriptor, the driver API's typed signatures, and the
fallback when there is no driver. The mapping itself runs on a GPU:
`python3 tests/gpu/check_shared_memory.py` (docs/integrity.md has the H200's answer)."""

from __future__ import annotations

import ctypes

import pytest
import torch

from core.harness import cuda_vmm, shared_region


def test_regions_that_travel_as_descriptors_say_so():
    assert shared_region.carries_fd({"kind": "memfd", "nbytes": 256})
    assert shared_region.carries_fd({"kind": "cuda_vmm", "nbytes": 2 << 20})
    assert not shared_region.carries_fd({"kind": "cuda_ipc", "nbytes": 256})
    assert not shared_region.carries_fd(None)


def test_without_a_cuda_driver_export_is_unavailable_not_a_crash(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cuda_vmm._lib.cache_clear()
    try:
        with pytest.raises(cuda_vmm.Unavailable):
            cuda_vmm.export(1 << 20, torch.device("cuda:0"))
    finally:
        cuda_vmm._lib.cache_clear()


def test_a_missing_descriptor_is_refused_before_the_driver_is_asked():
    with pytest.raises(ValueError, match="descriptor did not arrive"):
        shared_region.attach_region(
            {"kind": "cuda_vmm", "nbytes": 2 << 20}, [], torch.device("cuda:0")
        )


def test_every_driver_call_has_typed_sizes():
    # An untyped Python int reaches C as a 32-bit int: a 4 GiB region would wrap around.
    sizes = {"cuMemCreate": 1, "cuMemAddressReserve": 1, "cuMemMap": 1, "cuMemUnmap": 1}
    for name, index in sizes.items():
        assert cuda_vmm._SIGNATURES[name][index] is ctypes.c_size_t, name
    for name in ("cuMemMap", "cuMemUnmap", "cuMemAddressFree", "cuMemRelease"):
        assert cuda_vmm._SIGNATURES[name][0] is ctypes.c_uint64, name  # a 64-bit address


def test_the_allocation_properties_have_the_driver_layout():
    # CUmemAllocationProp: type, requestedHandleTypes, location{type,id}, a pointer, allocFlags
    assert ctypes.sizeof(cuda_vmm._AllocationProp) == 32
    assert cuda_vmm._AllocationProp.win32HandleMetaData.offset == 16
    assert ctypes.sizeof(cuda_vmm._AccessDesc) == 12
