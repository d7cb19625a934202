"""What a counted program reads and writes (core/harness/sim/count.py's `Counting` mixes this in):
bytes and sectors per access, sectors per tensor argument (the DRAM term), atomics billed as a
load and a store, and the accesses outside every tensor argument's storage (strays, resolved or
failed at the end of the call: sim_values, sim_judge). Imports only numpy: the harness is
shipped alone."""

from __future__ import annotations

import numpy as np

from core.harness.sim.launch import SECTOR, STORED, Launch, ProgramCounts, unique_sectors

STRAY_CAP = 1 << 16  # stray sectors kept per launch and kind, to resolve (sim_values) and report


class Accesses:
    """The access hooks of a `Counting` (its state: `program`, `current`, `forgetting`, `exact`,
    `stores`, `atomic_stores`, `did_atomic`)."""

    program: ProgramCounts | None
    current: Launch | None
    forgetting: int
    exact: bool
    stores: list[tuple[int, np.ndarray]]
    atomic_stores: list[tuple[int, np.ndarray]]
    did_atomic: bool

    def access(self, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int, store: bool) -> None:
        p, launch = self.program, self.current
        if p is None or launch is None or (self.forgetting and not store):
            return
        addrs = np.asarray(ptrs).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask), np.shape(ptrs)).reshape(-1).astype(bool)
            addrs = addrs[m]
        if self.forgetting:  # an iteration an exact program runs and forgets: only its stores
            if self.exact:
                self.stores.append((itemsize, addrs.astype(np.int64, copy=True)))
            self._strays(launch, unique_sectors(addrs), True)
            return
        n = addrs.size
        sectors = unique_sectors(addrs)
        if store:
            if self.exact:
                self.stores.append((itemsize, addrs.astype(np.int64, copy=True)))
            p.store_bytes += n * itemsize
            p.store_sectors += sectors.size
            p.stores += 1
        else:
            p.load_bytes += n * itemsize
            p.load_sectors += sectors.size
            p.loads += 1
        if sectors.size:
            self._attribute(launch, p, sectors, STORED if store else "")

    def atomic(self, ptrs: np.ndarray, mask: np.ndarray | None, itemsize: int) -> None:
        """An atomic read-modify-write: billed as a load and a store of the lanes it updates
        (and counted in `atomics`). Its addresses are not known values (their order is the
        programs'), but the program's other stores stay exact (sim_values)."""
        p, launch = self.program, self.current
        if p is None or launch is None:
            return
        addrs = np.asarray(ptrs).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask), np.shape(ptrs)).reshape(-1).astype(bool)
            addrs = addrs[m]
        self.did_atomic = True
        keep = addrs.astype(np.int64, copy=True)
        self.atomic_stores.append((itemsize, keep))
        if self.forgetting:
            self._strays(launch, unique_sectors(addrs), True)
            return
        p.atomics += addrs.size
        self.access(ptrs, mask, itemsize, store=False)
        # As a store, but not a known value: counted here, not through access().
        sectors = unique_sectors(addrs)
        p.store_bytes += addrs.size * itemsize
        p.store_sectors += sectors.size
        p.stores += 1
        if sectors.size:
            self._attribute(launch, p, sectors, STORED)

    def _attribute(
        self, launch: Launch, p: ProgramCounts, sectors: np.ndarray, suffix: str = ""
    ) -> None:
        """Each sector to the tensor argument it lies in (`sectors` sorted: two binary searches
        per tensor, not a pass over the sectors); what lies in none is `(other)`, and what lies
        outside every argument's whole storage is a stray (`_strays`)."""
        addrs: np.ndarray = sectors * SECTOR
        spans = []
        for t in launch.tensors:
            lo = int(np.searchsorted(addrs, t.start - SECTOR, "left"))
            hi = int(np.searchsorted(addrs, t.end, "left"))
            if hi > lo:
                p.tensor_bytes[t.name + suffix] = (
                    p.tensor_bytes.get(t.name + suffix, 0.0) + (hi - lo) * SECTOR
                )
                spans.append((lo, hi))
        left = sectors.size - _covered(spans)
        if left > 0:
            p.tensor_bytes["(other)" + suffix] = (
                p.tensor_bytes.get("(other)" + suffix, 0.0) + left * SECTOR
            )
            self._strays(launch, sectors, bool(suffix))

    def _strays(self, launch: Launch, sectors: np.ndarray, store: bool) -> None:
        """Record the sectors outside every tensor argument's storage. An honest kernel never
        reaches them: its pointers are its arguments' (or, through a pointer array, the call's
        own tensors: sim_values resolves those). Kept for the stage to judge (sim_stage)."""
        if not sectors.size:
            return
        addrs: np.ndarray = sectors * SECTOR
        outside: np.ndarray = np.ones(sectors.size, dtype=bool)
        for t in launch.tensors:
            lo = int(np.searchsorted(addrs, t.storage_start - SECTOR, "right"))
            hi = int(np.searchsorted(addrs, t.storage_end, "left"))
            outside[lo:hi] = False
        found = addrs[outside]
        if not found.size:
            return
        kept = launch.stray_stores if store else launch.stray_loads
        if store:
            launch.stray_store_sectors += found.size
        else:
            launch.stray_load_sectors += found.size
        if sum(a.size for a in kept) < STRAY_CAP:
            kept.append(found[:STRAY_CAP].astype(np.int64, copy=True))


def _covered(spans: list[tuple[int, int]]) -> int:
    """How many indices the half-open intervals `spans` cover together."""
    done, reach = 0, 0
    for lo, hi in sorted(spans):
        if hi > reach:
            done += hi - max(lo, reach)
            reach = hi
    return done
