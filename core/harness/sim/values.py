"""The values of a `sim:` device's counted call, checked against the reference (docs/integrity.md,
"Simulated devices"). This module is the candidate worker's side: which output elements of the
counted call hold what a GPU would have computed, and their values.

The counted call runs a sample of each launch's programs, a sample of a long loop's iterations,
and stubs `tl.dot` out, so most of what it leaves in memory is not the kernel's result. An
element is *known* when its last writer computed it exactly from known values:

- a Triton launch's program that ran in full (no loop iteration skipped, no dot stubbed) stored
  it with a plain store, and the launch read nothing *unknown*; an address an atomic updated is
  not known (the atomics of programs that did not run are missing), unless every program of the
  launch ran exactly once; in an output the task declares written by atomics (task.yaml
  `atomic: true`), neither is what a program that ran an atomic stored;
- or a torch op on real memory wrote it (a dense write: a scatter or a strided view is not known
  to cover any one element), reading nothing unknown;
- or nothing wrote it and it belongs to an output updated in place: it still holds its input.

Unknown memory: whatever a launch that did not run in full (sampled programs, inexact ones) or
any op that read unknown memory wrote. Each unknown range remembers the launches it came from
(its roots), so that an output with no known element says why (sim_stage judges it): behind
which sampled launches (`chained`), written only by atomics, by torch's partial writes, or by
no exact program at all. The walk is conservative: an element is dropped, never guessed, where
a later writer may or may not have covered it.

Accesses outside every tensor argument's storage (strays, sim_count) are resolved here against
the storages of the tensors the call was given or made (a pointer array's targets); what
resolves is a read or write of that storage, what does not is reported (`strays`) and fails
the stage.

What is sent (per output): up to `SAMPLES` known elements, half drawn among the exact stores of
the launches writing it and half uniformly over it, as flat indices and float values. The trusted
worker compares them with the reference at the same elements (sim_reference).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from core.harness.sim import written as sim_written
from core.harness.sim.launch import STORED

SAMPLES = 2048  # known elements checked per output
EVERYWHERE = (0, 1 << 62)  # a read of memory no tensor of the call holds: unknown


@dataclass
class _Writer:
    seq: int
    reads: list[tuple[int, int]]
    writes: list[tuple[int, int, bool]]  # (start, end, dense)
    launch: Any = None  # a sim_count.Launch
    index: int = -1  # the launch's position in the call's launches
    clean: bool = True
    roots: set[int] = field(default_factory=set)  # launches whose partial output it read
    exact: dict[int, np.ndarray] = field(default_factory=dict)  # item size -> sorted addresses
    atomic: dict[int, np.ndarray] = field(default_factory=dict)
    tainted: dict[int, np.ndarray] = field(default_factory=dict)
    elementwise: Any = None  # sim_written.TorchEvent.elementwise


def _sorted(table: dict[int, list[np.ndarray]]) -> dict[int, np.ndarray]:
    return {k: np.unique(np.concatenate(v)) for k, v in table.items() if v}


def resolve_strays(launches: list[Any], storages: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Resolve each launch's stray sectors (sim_count) against `storages`, the byte ranges of
    every tensor the call was given, made or returned: what falls in one becomes a read or a
    write of it (`Launch.resolved_reads/writes`); what falls in none is returned, per launch,
    for the stage to fail (`sim_stray_access`)."""
    spans = sorted(set(storages))
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    ends = np.array([b for _, b in spans], dtype=np.int64)
    found = []
    for i, launch in enumerate(launches):
        lost = {"loads": 0, "stores": 0}
        for kind, arrays, into in (
            ("loads", launch.stray_loads, launch.resolved_reads),
            ("stores", launch.stray_stores, launch.resolved_writes),
        ):
            hit: set[int] = set()
            for sectors in arrays:
                if not starts.size:
                    lost[kind] += int(sectors.size)
                    continue
                # the storage starting last at or before the sector's end; hit if it reaches it
                k = np.searchsorted(starts, sectors + 31, "right") - 1
                ok = (k >= 0) & (sectors < ends[np.clip(k, 0, None)])
                lost[kind] += int((~ok).sum())
                hit.update(int(j) for j in np.unique(np.asarray(k)[ok]))
            into[:] = [spans[j] for j in sorted(hit)]
        if lost["loads"] or lost["stores"]:
            first = next(
                (int(a[0]) for a in (*launch.stray_stores, *launch.stray_loads) if a.size), 0
            )
            found.append(
                {
                    "launch": i,
                    "kernel": launch.kernel,
                    "load_bytes": 32 * lost["loads"],
                    "store_bytes": 32 * lost["stores"],
                    "address": hex(first),
                }
            )
    return found


def _writers(launches: list[Any], events: list[sim_written.TorchEvent]) -> list[_Writer]:
    found: list[_Writer] = []
    for i, launch in enumerate(launches):
        totals: dict[str, float] = {}
        for p in launch.programs:
            for k, v in p.tensor_bytes.items():
                totals[k] = totals.get(k, 0.0) + v
        reads = [(t.start, t.end) for t in launch.tensors if totals.get(t.name)]
        reads += launch.resolved_reads
        if launch.stray_load_sectors and not launch.resolved_reads:
            reads.append(EVERYWHERE)  # read memory no tensor of the call holds
        writes = [(t.start, t.end, False) for t in launch.tensors if totals.get(t.name + STORED)]
        writes += [(a, b, False) for a, b in launch.resolved_writes]
        found.append(
            _Writer(
                launch.seq,
                reads,
                writes,
                launch,
                i,
                exact=_sorted(launch.exact_stores),
                atomic=_sorted(launch.atomic_addrs),
                tainted=_sorted(launch.tainted_stores),
            )
        )
    found += [_Writer(e.seq, e.reads, e.writes, elementwise=e.elementwise) for e in events]
    found.sort(key=lambda w: w.seq)
    unknown: list[tuple[int, int, frozenset[int]]] = []  # (start, end, roots)
    for w in found:
        for lo, hi, roots in unknown:
            if any(lo < b and a < hi for a, b in w.reads):
                w.clean = False
                w.roots |= roots
        partial = w.launch is not None and not w.launch.whole
        if not w.clean or partial:
            roots = frozenset(w.roots | ({w.index} if partial else set()))
            unknown += [(a, b, roots) for a, b, _ in w.writes]
    return found


def _holds(table: dict[int, np.ndarray], address: int, itemsize: int) -> bool:
    addrs = table.get(itemsize)
    if addrs is None or not addrs.size:
        return False
    i = int(np.searchsorted(addrs, address))
    return i < addrs.size and int(addrs[i]) == address


def _known(
    writers: list[_Writer],
    address: int,
    itemsize: int,
    inplace: bool,
    atomic_output: bool,
    upto: int | None = None,
) -> tuple[bool, str, set[int]]:
    """Whether the element at `address` holds what a GPU would have left there; if not, why
    (`sampled`, `chained`, `atomic`, `torch_partial`, `unwritten`) and the chain's roots.
    `upto`: only the writers before this position count (an elementwise op's inputs)."""
    for at in range(len(writers) - 1 if upto is None else upto - 1, -1, -1):
        w = writers[at]
        if not any(a <= address < b for a, b, _ in w.writes):
            continue
        if w.launch is None:
            if w.elementwise is not None:  # element i from the inputs' elements i
                (start, size), ins = w.elementwise
                if (address - start) % size == 0:
                    i = (address - start) // size
                    for in_start, in_size in ins:
                        known, reason, roots = _known(  # an input nobody wrote is the call's own
                            writers, in_start + i * in_size, in_size, True, atomic_output, at
                        )
                        if not known:
                            return False, reason, roots
                    return True, "", set()
            if not w.clean:
                return False, "chained", w.roots
            dense = any(a <= address < b and d for a, b, d in w.writes)
            return dense, "torch_partial", set()
        whole = w.launch.whole and not w.launch.reran_atomics
        if _holds(w.atomic, address, itemsize) and not whole:
            return False, "atomic", set()
        if _holds(w.exact, address, itemsize):
            if atomic_output and _holds(w.tainted, address, itemsize) and not whole:
                return False, "atomic", set()
            return (True, "", set()) if w.clean else (False, "chained", w.roots)
        if not w.launch.whole:
            # A program that did not run (or ran inexactly) may have written it.
            return False, "sampled", set()
    return inplace, "unwritten", set()


def samples(
    result: Any,
    args: list[Any],
    launches: list[Any],
    events: list[sim_written.TorchEvent],
    seed: int,
    atomic_outputs: list[bool] | None = None,
) -> dict[str, Any]:
    """{"outputs": [{"index", "value", "why", "roots"} or None per returned tensor],
    "reason"}. `why` counts the reasons the drawn elements were not known; `roots` the
    launches (by position) behind the `chained` ones."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    writers = _writers(launches, events)
    inplace = sim_written._inplace(result, args)
    atomic = list(atomic_outputs or []) + [False] * len(outs)
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any] | None] = []
    for t, ip, at in zip(outs, inplace, atomic):
        if not isinstance(t, torch.Tensor) or not t.numel() or t.device.type != "cpu":
            found.append(None)
            continue
        found.append(_sample(t, writers, ip, at, rng))
    return {"outputs": found, "reason": None}


def _stored_indices(writers: list[_Writer], base: int, n: int, itemsize: int) -> np.ndarray:
    """Flat indices of a contiguous tensor at `base` that exact programs stored, directly or
    into the input of an elementwise op that wrote it (a cast of a kernel's output)."""
    end = base + n * itemsize
    pool = [
        (a[(a >= base) & (a < end)] - base) // itemsize
        for w in writers
        for s, a in w.exact.items()
        if s == itemsize
    ]
    for w in writers:
        if w.elementwise is None or w.elementwise[0][0] != base:
            continue
        for in_start, in_size in w.elementwise[1]:
            stop = in_start + n * in_size
            pool += [
                (a[(a >= in_start) & (a < stop)] - in_start) // in_size
                for v in writers
                for s, a in v.exact.items()
                if s == in_size
            ]
    return np.concatenate(pool) if pool else np.zeros(0, dtype=np.int64)


def _sample(
    t: torch.Tensor, writers: list[_Writer], inplace: bool, atomic_output: bool, rng: Any
) -> dict[str, Any]:
    itemsize, base, n = t.element_size(), t.data_ptr(), t.numel()
    strides, shape = t.stride(), t.shape
    candidates = list(rng.integers(0, n, SAMPLES // 2))
    if t.is_contiguous():  # exact stores map back to flat indices
        stored = _stored_indices(writers, base, n, itemsize)
        if stored.size:
            candidates += list(stored[rng.integers(0, stored.size, SAMPLES // 2)])
    index: list[int] = []
    why: Counter[str] = Counter()
    roots: set[int] = set()
    for flat in sorted(set(int(i) for i in candidates)):
        offset, rest = 0, flat
        for size, stride in zip(reversed(shape), reversed(strides)):
            offset += (rest % size) * stride
            rest //= size
        known, reason, behind = _known(
            writers, base + offset * itemsize, itemsize, inplace, atomic_output
        )
        if known:
            index.append(flat)
        else:
            why[reason] += 1
            roots |= behind
    values = t.reshape(-1)[torch.tensor(index, dtype=torch.long)].float() if index else None
    return {
        "index": index,
        "value": values.tolist() if values is not None else [],
        "why": dict(why),
        "roots": sorted(roots),
    }
