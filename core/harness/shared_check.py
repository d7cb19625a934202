"""Correctness and generalization runs whose inputs the trusted worker draws (issues 20, 23).

Before this path the candidate's worker drew each run's inputs from the run's seed, under the
candidate's hooks (a function or dispatch mode it left pushed saw the draw), and sent every
output to the parent, which relayed it to the trusted worker: hundreds of MB per run through
one Python process on a GPU. Here, per run:

1. The parent asks the trusted worker to `stage` it. The trusted worker draws the inputs (or
   takes them from its ReferenceCache), writes them into a region of memory the candidate's
   worker maps (shared_region.py's regions: a sealed memfd on the CPU, CUDA IPC on a GPU; one per
   candidate worker, kept while it is big enough), fills the output slots with poison, and
   answers with the layout at once; only then does it compute the reference, while the
   candidate runs.
2. The parent sends the candidate's worker the layout (`run_shared`: no seed); it runs the
   candidate on each copy of the inputs (the first seed twice, on fresh copies), checks the
   outputs' types as before and copies them into their slots.
3. The parent tells the trusted worker to `collect` the slots (a private clone, before the
   region takes the worker's next run); the in-order verdict (`judge`) compares them with the
   reference exactly as the old `check` does: same `checking.judge`, pools and independence.

The parent relays only these small headers. The trusted worker reads nothing but its own
slots: wrong dtypes or shapes are caught in the candidate's worker (an error reply, as
before), and a worker that never writes its slots leaves the poison there. Inputs that cannot
be shared (shared_region.Unshareable, `cannot_share`), a worker that cannot map the region, or a
job with `timing.shared_io: false` keep the old path, and the stage's result says so.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from core.harness import inputs, shared_region, timing
from core.harness.guard import trusted
from core.harness.shared_region import Region, Slot

_TB = torch._C.TensorBase
_copy, _clone, _fill = _TB.copy_, _TB.clone, _TB.fill_
POISON = 0xFF  # every float slot reads NaN, every integer one -1, until the candidate writes it
OLD_PATH_NOTE = "inputs drawn in the candidate's process, outputs sent over its socket"


# --- the trusted worker's side ---------------------------------------------------------------


class CheckRegions:
    """The trusted worker's regions for correctness runs, one per candidate worker (`rkey`),
    each reused while it is big enough; a request of another member (a batch's next candidate)
    frees the earlier member's. Regions of timed rounds whose consumer left mid-round wait in
    `orphans` (by the same key) until the parent says whether that worker is dead."""

    def __init__(self, device: torch.device):
        self.device = device
        self.regions: dict[str, tuple[Region, int]] = {}
        self.outs: dict[str, list[torch.Tensor]] = {}  # the output slots of each region's run
        self.orphans: dict[str, list[Region]] = {}
        self.member: str | None = None
        self.freed_dead = 0  # regions freed after their consumer died (introspection)

    def write(
        self,
        rkey: str,
        member: str,
        args: list[Any],
        copies: int,
        out_specs: list[dict[str, Any]],
        shapes: dict[str, list[int]],
    ) -> tuple[dict[str, Any], list[int]]:
        """Write `copies` copies of `args` into `rkey`'s region (a new one where it has none or
        too small a one) and poison their output slots. Returns the header for the parent (the
        layout, and the region's description where it is new) and the descriptors to send.
        Raises shared_region.Unshareable where these inputs cannot be shared, RegionOOM where
        the device has no memory for the region even after the stale ones are freed."""
        if member != self.member:
            self.close()
            self.member = member
        layouts, out_slots, nbytes = shared_region.plan_copies(args, out_specs, shapes, copies)
        header: dict[str, Any] = {}
        fds: list[int] = []
        region, size = self.regions.get(rkey, (None, 0))
        if region is None or size < nbytes:
            if region is not None:
                self.release(rkey)  # before the new one: both at once may not fit
            size = max(nbytes, 2 * size, shared_region.ALIGN)  # grows rarely: workloads grow
            region, desc, fds = shared_region.create_region(
                size, self.device, lambda: self.free_stale(rkey)
            )
            size = int(desc["nbytes"])
            self.regions[rkey] = (region, size)
            header["region"] = desc
        with trusted():
            for layout, outs in zip(layouts, out_slots):
                for x, arg in zip(layout, args):
                    if "slot" in x:
                        _copy(region.view(Slot.from_json(x["slot"], size)), arg)
                for s in outs:
                    _fill(region.base[s.offset : s.offset + s.nbytes], POISON)
        self.outs[rkey] = [region.view(s) for outs in out_slots for s in outs]
        timing._sync(self.device.type)  # written before the candidate's worker is told
        header["layout"] = {
            "inputs": layouts,
            "outputs": [[s.to_json() for s in outs] for outs in out_slots],
        }
        return header, fds

    def snapshot(self, rkey: str) -> list[torch.Tensor]:
        """Private copies of the output slots of `rkey`'s last run."""
        timing._sync(self.device.type)
        with trusted():
            return [_clone(v) for v in self.outs.get(rkey, [])]

    def keep_until_gone(self, rkey: str) -> None:
        """`rkey`'s worker keeps a tensor over its region after the stage: the region waits
        with the orphans, freed once that worker is dead (a CUDA block it still maps must not
        go back to this worker's allocator, and one freed now would never be returned)."""
        region, _ = self.regions.pop(rkey, (None, 0))
        self.outs.pop(rkey, None)
        if region is not None:
            self.orphan(rkey, region)

    def orphan(self, rkey: str, region: Region) -> None:
        """A timed round's region whose consumer left mid-round: kept (not freed: it may still
        map it) until `release(rkey, gone=...)` says what became of that worker."""
        self.orphans.setdefault(rkey, []).append(region)

    def release(self, rkey: str, gone: bool = False) -> None:
        """Free `rkey`'s regions. `gone`: its worker is dead (the parent reaped it), so what
        it never unmapped is freed too (shared_region.Region.close_for_dead_consumer)."""
        region, _ = self.regions.pop(rkey, (None, 0))
        self.outs.pop(rkey, None)
        regions = ([region] if region is not None else []) + (
            self.orphans.pop(rkey, []) if gone else []
        )
        failed: BaseException | None = None
        for r in regions:
            try:
                if gone:
                    r.close_for_dead_consumer()
                    self.freed_dead += 1
                else:
                    r.close()
            except Exception as exc:  # noqa: BLE001 - the others are freed all the same
                failed = failed or exc
        if regions:
            shared_region.free_cached(self.device)  # what no consumer maps goes to the driver
        if failed is not None:
            raise failed

    def free_stale(self, keep: str) -> None:
        """Before an allocation is retried: every region but `keep`'s (the parent sends each
        worker's region again where it needs one), and what the allocator caches."""
        for rkey in [k for k in self.regions if k != keep]:
            self.release(rkey)
        shared_region.free_cached(self.device)

    def held(self) -> dict[str, Any]:
        """What the trusted worker holds now (its `regions` op: tests and
        bench/h200_regions.sh): its regions and orphans by key, how many regions it freed for
        dead workers and, on a GPU, its memory (the peak since it started)."""
        held: dict[str, Any] = {
            "regions": {k: r.nbytes for k, (r, _) in self.regions.items()},
            "orphans": {k: sum(r.nbytes for r in rs) for k, rs in self.orphans.items()},
            "freed_dead": self.freed_dead,
        }
        if self.device.type == "cuda":
            held["cuda"] = {
                "allocated": torch.cuda.memory_allocated(self.device),
                "reserved": torch.cuda.memory_reserved(self.device),
                "max_allocated": torch.cuda.max_memory_allocated(self.device),
            }
        return held

    def close(self) -> None:
        for rkey in list(self.regions):
            self.release(rkey)


# --- the candidate's side --------------------------------------------------------------------


class CandidateRegion:
    """The region this candidate worker's correctness runs read and write (one at a time)."""

    def __init__(self) -> None:
        self.region: Region | None = None
        self.size = 0

    def detach(self) -> bool:
        """Unmap the region; True when nothing of this process maps it any more (False: the
        candidate kept a tensor over it, which keeps the mapping, and on a GPU the trusted
        worker's block, alive until this process dies). A full collection runs only when the
        storage outlives `close`, where a reference cycle may hold the last view: it costs a few
        hundred ms in a worker that has loaded torch."""
        gone = True
        if self.region is not None:
            ref = StorageWeakRef(self.region.base.untyped_storage())
            self.region.close()
            self.region = None
            if not ref.expired():
                gc.collect()
            gone = ref.expired()
        self.size = 0
        return gone

    def attach(self, desc: dict[str, Any], fds: list[int], device: torch.device) -> None:
        self.detach()
        self.region = shared_region.attach_region(desc, fds, device)
        self.size = int(desc["nbytes"])

    def run(
        self,
        fn: Any,
        msg: dict[str, Any],
        specs: list[dict[str, Any]],
        out_specs: list[dict[str, Any]],
        device: torch.device,
    ) -> dict[str, Any]:
        """The candidate on each copy of the inputs the trusted worker wrote, into poisoned
        memory; each copy's outputs, checked for type, copied into its slots."""
        region = self.region
        if region is None:
            raise RuntimeError("no shared region is mapped")
        layout = msg["layout"]
        shapes = msg["workload"]["shapes"]
        for ins, outs in zip(layout["inputs"], layout["outputs"]):
            args = [
                region.view(Slot.from_json(x["slot"], self.size)) if "slot" in x else x["value"]
                for x in ins
            ]
            views = [region.view(Slot.from_json(s, self.size)) for s in outs]
            inputs.poison(out_specs, shapes, device)
            result = fn(*args)
            timing._sync(device.type)
            got = inputs.collect_outputs(result, out_specs, specs, args, shapes, device)
            with trusted():
                for dst, src in zip(views, got):
                    _copy(dst, src)
            timing._sync(device.type)  # the copies are finished before the parent is told
            del result, args, got, views
        return {"ok": True}


def recv_fds(conn: Any, desc: dict[str, Any] | None) -> list[int]:
    """The descriptor that follows a header describing a new region, if it travels as one."""
    if shared_region.carries_fd(desc):
        return [shared_region.recv_fd(conn)]
    return []


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
