"""The exact programs of a counted launch and their twins (core/harness/sim/count.py): one run of a
program (`_Ran`), what an exact program and its sampled twin must count alike (`differs`), and
how a program's stored addresses are kept for the value check (`keep_capped`). Imports only
numpy: the harness is shipped alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.harness.sim.clock import Tally
from core.harness.sim.launch import Launch, ProgramCounts

EXACT_STORES_CAP = (
    1 << 21
)  # stored element addresses kept per launch for the value check (sim_values)


@dataclass
class Ran:
    """One run of one program: its counts, and what it stored (sim_values)."""

    counts: ProgramCounts
    exact: bool
    finished_exactly: bool
    stores: list[tuple[int, np.ndarray]]
    atomic_stores: list[tuple[int, np.ndarray]]
    did_atomic: bool
    took: float  # interpreter seconds
    tally: Tally  # interpreted work (sim/clock.py)


HELD = (  # what an exact program and its twin must count alike
    "loop_iterations",
    "loads",
    "stores",
    "atomics",
    "load_bytes",
    "store_bytes",
    "alu_ops",
    "sfu_ops",
)
SECTOR_SLACK = (
    0.1  # their sectors may differ this much: a skipped iteration leaves a pointer behind
)


def differs(exact: ProgramCounts, twin: ProgramCounts) -> dict[str, Any] | None:
    """The first count in which an exact program and its sampled twin differ, or None."""
    for key in HELD:
        a, b = getattr(exact, key), getattr(twin, key)
        if abs(a - b) > 1e-9 * max(abs(a), abs(b), 1.0):
            return {"count": key, "exact": a, "sampled": b}
    for dtype in set(exact.dot_flops) | set(twin.dot_flops):
        a, b = exact.dot_flops.get(dtype, 0.0), twin.dot_flops.get(dtype, 0.0)
        if abs(a - b) > 1e-9 * max(abs(a), abs(b), 1.0):
            return {"count": f"{dtype} dot FLOPs", "exact": a, "sampled": b}
    for key in ("load_sectors", "store_sectors"):
        a, b = getattr(exact, key), getattr(twin, key)
        if abs(a - b) > SECTOR_SLACK * max(a, b) + 1:
            return {"count": key, "exact": a, "sampled": b}
    return None


def keep_capped(
    launch: Launch, into: dict[int, list[np.ndarray]], stores: list[tuple[int, np.ndarray]]
) -> bool:
    """Append a program's stored addresses to `into`, by item size; past `EXACT_STORES_CAP`
    addresses kept in the launch, nothing more is kept and the launch's stores are no longer
    all known (False)."""
    if launch.stores_dropped:
        return False
    kept = sum(
        a.size
        for table in (launch.exact_stores, launch.atomic_addrs, launch.tainted_stores)
        for arrays in table.values()
        for a in arrays
    )
    if kept + sum(a.size for _, a in stores) > EXACT_STORES_CAP:
        launch.stores_dropped = True
        return False
    for itemsize, addrs in stores:
        into.setdefault(itemsize, []).append(addrs)
    return True
