"""The values of a `sim:` device's counted call, checked against the reference (docs/integrity.md,
"Simulated devices"). This module is the candidate worker's side: which output elements of the
counted call hold what a GPU would have computed, and their values.

The counted call runs a sample of each launch's programs, a sample of a long loop's iterations,
and stubs `tl.dot` out, so most of what it leaves in memory is not the kernel's result. An
element is *known* when its last writer computed it exactly from known values:

- a Triton launch's program that ran in full (no loop iteration skipped, no dot, no atomic)
  stored it, and the launch read nothing *unknown*;
- or a torch op on real memory wrote it (a dense write: a scatter or a strided view is not known
  to cover any one element), reading nothing unknown;
- or nothing wrote it and it belongs to an output updated in place: it still holds its input.

Unknown memory: whatever a launch that did not run in full (sampled programs, inexact ones) or
any op that read unknown memory wrote. The walk is conservative: an element is dropped, never
guessed, where a later writer may or may not have covered it. A launch that stores outside its
tensor arguments makes the whole call unknown.

What is sent (per output): up to `SAMPLES` known elements, half drawn among the exact stores of
the launches writing it and half uniformly over it, as flat indices and float values. The trusted
worker compares them with the reference at the same elements (sim_reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from core.harness.sim import written as sim_written
from core.harness.sim.launch import STORED

SAMPLES = 2048  # known elements checked per output


@dataclass
class _Writer:
    seq: int
    reads: list[tuple[int, int]]
    writes: list[tuple[int, int, bool]]  # (start, end, dense)
    launch: Any = None  # a sim_count.Launch
    clean: bool = True
    exact: dict[int, np.ndarray] = field(default_factory=dict)  # item size -> sorted addresses


def _overlaps(ranges: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(lo < b and a < hi for lo, hi in ranges)


def _writers(launches: list[Any], events: list[sim_written.TorchEvent]) -> list[_Writer] | None:
    found: list[_Writer] = []
    for launch in launches:
        totals: dict[str, float] = {}
        for p in launch.programs:
            for k, v in p.tensor_bytes.items():
                totals[k] = totals.get(k, 0.0) + v
        if totals.get("(other)" + STORED):
            return None  # it stored where no argument lies: who wrote what is unknown
        reads = [(t.start, t.end) for t in launch.tensors if totals.get(t.name)]
        if totals.get("(other)"):
            reads.append((0, 1 << 62))  # it read memory outside its arguments: unknown
        writes = [(t.start, t.end, False) for t in launch.tensors if totals.get(t.name + STORED)]
        exact = {k: np.unique(np.concatenate(v)) for k, v in launch.exact_stores.items() if v}
        found.append(_Writer(launch.seq, reads, writes, launch, exact=exact))
    found += [_Writer(e.seq, e.reads, e.writes) for e in events]
    found.sort(key=lambda w: w.seq)
    unknown: list[tuple[int, int]] = []
    for w in found:
        w.clean = not any(_overlaps(unknown, a, b) for a, b in w.reads)
        if not w.clean or (w.launch is not None and not w.launch.whole):
            unknown += [(a, b) for a, b, _ in w.writes]
    return found


def _stored_by(w: _Writer, address: int, itemsize: int) -> bool:
    addrs = w.exact.get(itemsize)
    if addrs is None or not addrs.size:
        return False
    i = int(np.searchsorted(addrs, address))
    return i < addrs.size and int(addrs[i]) == address


def _known(writers: list[_Writer], address: int, itemsize: int, inplace: bool) -> bool:
    """Whether the element at `address` holds what a GPU would have left there."""
    for w in reversed(writers):
        if not any(a <= address < b for a, b, _ in w.writes):
            continue
        if w.launch is None:
            dense = any(a <= address < b and d for a, b, d in w.writes)
            return dense and w.clean
        if _stored_by(w, address, itemsize):
            return w.clean
        if not w.launch.whole:
            return False  # a program that did not run (or ran inexactly) may have written it
    return inplace  # nobody wrote it: an in-place output still holds its input


def samples(
    result: Any,
    args: list[Any],
    launches: list[Any],
    events: list[sim_written.TorchEvent],
    seed: int,
) -> dict[str, Any]:
    """{"outputs": [{"index": [...], "value": [...]} or None per returned tensor], "reason"}."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    writers = _writers(launches, events)
    if writers is None:
        return {
            "outputs": [None] * len(outs),
            "reason": "a launch stored outside its tensor arguments",
        }
    inplace = sim_written._inplace(result, args)
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any] | None] = []
    for t, ip in zip(outs, inplace):
        if not isinstance(t, torch.Tensor) or not t.numel() or t.device.type != "cpu":
            found.append(None)
            continue
        found.append(_sample(t, writers, ip, rng))
    return {"outputs": found, "reason": None}


def _sample(t: torch.Tensor, writers: list[_Writer], inplace: bool, rng: Any) -> dict[str, Any]:
    itemsize, base, n = t.element_size(), t.data_ptr(), t.numel()
    strides, shape = t.stride(), t.shape
    candidates = list(rng.integers(0, n, SAMPLES // 2))
    if t.is_contiguous():  # exact stores map back to flat indices
        end = base + n * itemsize
        pool = [
            a[(a >= base) & (a < end)] for w in writers for s, a in w.exact.items() if s == itemsize
        ]
        stored = np.concatenate(pool) if pool else np.zeros(0, dtype=np.int64)
        if stored.size:
            picks = stored[rng.integers(0, stored.size, SAMPLES // 2)]
            candidates += list((picks - base) // itemsize)
    index: list[int] = []
    for flat in sorted(set(int(i) for i in candidates)):
        offset, rest = 0, flat
        for size, stride in zip(reversed(shape), reversed(strides)):
            offset += (rest % size) * stride
            rest //= size
        if _known(writers, base + offset * itemsize, itemsize, inplace):
            index.append(flat)
    values = t.reshape(-1)[torch.tensor(index, dtype=torch.long)].float() if index else None
    return {
        "index": index,
        "value": values.tolist() if values is not None else [],
    }
