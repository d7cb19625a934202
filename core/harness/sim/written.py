"""How much of each output the counted call of a `sim:` device wrote (docs/integrity.md,
"Simulated devices").

A candidate can tell the counting pass from a checked call: by its sizes (only GPU workloads
are counted; correctness runs at CPU sizes), by fake tensors, by the harness's frames. It then
does part of its work there and is predicted for that part, while every checked call is right.
Whatever it does less, the counted call's outputs show it: an honest kernel writes every element
of an output it returns. So the counted call records what it writes (each torch op's outputs;
each Triton launch's stored sectors per tensor argument, extrapolated from the sampled programs
as its bytes are) and reports, per returned tensor, the share of its bytes that was written. The
harness parent fails the stage where a share is below `MIN_WRITTEN` (sim_stage).

An output that shares storage with an input (declared `inplace_of`: a KV-cache write updates a
few slots of a large cache) is judged against what the reference changes instead: its counted
call must write at least `MIN_WRITTEN` as many bytes as the reference changed there
(`inplace_problem`; the trusted worker counts them, sim_reference). A Triton launch's
share is an estimate from its sampled programs (exact when all of them ran, or when its programs
do alike), hence the margin below 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from core.harness.sim.launch import STORED, total_se

MIN_WRITTEN = 0.8  # share of an output's bytes the counted call must write
Span = tuple[int, int, int]  # (storage key, first byte, end byte), relative to the storage
_CLOCK = itertools.count()


def tick() -> int:
    """One clock for Triton launches and torch ops, to order who wrote what last (sim_values)."""
    return next(_CLOCK)


def _storage_key(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def span(t: torch.Tensor) -> Span:
    """The bytes of its storage that `t` covers (fake tensors too: no data pointer needed)."""
    size = t.element_size()
    first = t.storage_offset() * size
    extent = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * size if t.numel() else 0
    return _storage_key(t), first, first + extent


def note(written: list[Span], outs: Iterable[Any]) -> None:
    """Record the tensors an op wrote (its outputs; an in-place op returns its target)."""
    for t in outs:
        if isinstance(t, torch.Tensor) and t.numel():
            try:
                written.append(span(t))
            except (
                RuntimeError,
                NotImplementedError,
            ):  # a tensor without storage (sparse, nested): not an output
                pass


def _union(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    done, reach = 0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in spans if a < hi and b > lo):
        if b > reach:
            done += b - max(a, reach)
            reach = b
    return done


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def shares(
    result: Any,
    args: list[Any],
    torch_written: list[Span],
    launches: Iterable[Any] = (),
    z: float = 0.0,
) -> list[float | None]:
    """Per returned tensor (in order), the share of its bytes the counted call wrote; None for
    what is not judged (not a tensor, empty, sharing storage with an input: sim_values judges
    those against the elements the reference changes). `launches` are sim_count.Launch objects
    of a real-memory count (their addresses are absolute). `z`: the share plus that many
    standard errors of the launches' samples (written_bytes)."""
    found: list[float | None] = []
    for (done, size), inplace in zip(
        written_bytes(result, args, torch_written, launches, z), _inplace(result, args)
    ):
        found.append(None if inplace or done is None or size <= 0 else min(1.0, done / size))
    return found


def _inputs(args: list[Any]) -> set[int]:
    keys = set()
    for a in args:
        if isinstance(a, torch.Tensor):
            try:
                keys.add(_storage_key(a))
            except (RuntimeError, NotImplementedError):
                pass
    return keys


def _inplace(result: Any, args: list[Any]) -> list[bool]:
    keys = _inputs(args)
    found = []
    for t in _tensors(result):
        try:
            found.append(isinstance(t, torch.Tensor) and _storage_key(t) in keys)
        except (RuntimeError, NotImplementedError):
            found.append(False)
    return found


def written_bytes(
    result: Any,
    args: list[Any],
    torch_written: list[Span],
    launches: Iterable[Any] = (),
    z: float = 0.0,
) -> list[tuple[float | None, int]]:
    """Per returned tensor, (bytes of it the counted call wrote, its bytes); (None, 0) for what
    is not a tensor with storage. A launch's stores are extrapolated from its sampled programs;
    `z` > 0 gives their upper bound instead, the estimate plus `z` standard errors of each
    sample (launch.total_se; a whole launch's stores are exact): what the count cannot rule
    out that the call wrote, which the stage holds to `MIN_WRITTEN`."""
    stored: list[tuple[int, int, float]] = []  # (start, end, bytes stored) per launch argument
    for launch in launches:
        scale = launch.num_programs / max(len(launch.programs), 1)
        for arg in launch.tensors:
            each = [p.tensor_bytes.get(arg.name + STORED, 0.0) for p in launch.programs]
            got = sum(each) * scale
            if got and z:
                got += z * total_se(each, launch.num_programs)
            if got:
                stored.append((arg.start, arg.end, min(got, float(arg.end - arg.start))))
        for lo, hi in getattr(launch, "resolved_writes", ()):  # through a pointer array
            got = 32.0 * scale * sum(int(((a >= lo) & (a < hi)).sum()) for a in launch.stray_stores)
            if got:
                stored.append((lo, hi, min(got, float(hi - lo))))
    found: list[tuple[float | None, int]] = []
    for t in _tensors(result):
        if not isinstance(t, torch.Tensor) or not t.numel():
            found.append((None, 0))
            continue
        try:
            key, lo, hi = span(t)
        except (RuntimeError, NotImplementedError):
            found.append((None, 0))
            continue
        if hi <= lo:
            found.append((None, 0))
            continue
        done = float(_union([(a, b) for k, a, b in torch_written if k == key], lo, hi))
        if stored and not _is_fake(t):
            base = t.untyped_storage().data_ptr()
            start, end = base + lo, base + hi
            for a, b, got in stored:
                overlap = min(b, end) - max(a, start)
                if overlap > 0:
                    done += min(
                        got * overlap / (b - a), overlap
                    )  # a launch argument wider than the output: its share
        found.append((min(done, float(hi - lo)), hi - lo))
    return found


def _is_fake(t: torch.Tensor) -> bool:
    return type(t).__name__ == "FakeTensor"


def _number(values: Any, i: int) -> float | None:
    value = values[i] if isinstance(values, list) and i < len(values) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def problem(written: Any, names: list[str], high: Any = None) -> str | None:
    """The stage's failure message for a reply's `written` shares, or None when every judged
    output was written (at least MIN_WRITTEN of it). `high`: the shares at their samples' upper
    bound (shares with z = SAMPLING_Z): a share estimated from sampled programs fails only
    where that bound, too, falls short."""
    if not isinstance(written, list):
        return None
    for i in range(len(written)):
        share = _number(written, i)
        bound = _number(high, i)
        bound = share if bound is None or share is None else max(share, bound)
        if share is not None and bound is not None and bound < MIN_WRITTEN:
            name = names[i] if i < len(names) else f"#{i}"
            sampled = (
                f", at most {100 * bound:.0f}% within its sampled programs' error"
                if bound > share
                else ""
            )
            return (
                f"sim_unwritten_output: the counted call wrote {100 * max(share, 0.0):.0f}% of output `{name}`{sampled} (at "
                f"least {100 * MIN_WRITTEN:.0f}% must be written: a kernel that does less when it is counted than when it is "
                "checked is predicted for work it does not do)"
            )
    return None


def inplace_problem(changed: Any, written: Any, names: list[str], high: Any = None) -> str | None:
    """The stage's failure for an output updated in place whose counted call wrote fewer bytes
    than `MIN_WRITTEN` of those the reference changes (`changed`, from the trusted worker;
    `written`, the candidate worker's written_bytes; `high`, the same at its samples' upper
    bound, which is what must fall short), or None."""
    changed = changed if isinstance(changed, list) else []
    for i, want in enumerate(changed):
        if isinstance(want, bool) or not isinstance(want, (int, float)) or want <= 0:
            continue
        done = _number(written, i) or 0.0
        bound = max(done, _number(high, i) or 0.0)
        if bound < MIN_WRITTEN * want:
            name = names[i] if i < len(names) else f"#{i}"
            sampled = (
                f", at most {100 * bound / want:.0f}% within its sampled programs' error"
                if bound > done
                else ""
            )
            return (
                f"sim_unwritten_output: the counted call wrote {100 * max(done, 0.0) / want:.0f}% as many bytes of "
                f"in-place output `{name}` as the reference changes{sampled} (at least {100 * MIN_WRITTEN:.0f}%: a kernel "
                "that does less when it is counted than when it is checked is predicted for work it does not do)"
            )
    return None


# An in-place op that overwrites all of its target without reading it; any other in-place op
# reads its target, and one that writes only some elements (scatter, index_put, masked_fill) is
# not known to have written any particular element of it.
OVERWRITES = {"fill_", "zero_", "copy_", "normal_", "uniform_"}
PARTIAL = ("index", "scatter", "masked", "put", "slice_scatter", "select_scatter")


@dataclass
class TorchEvent:
    """A torch op of a real-memory count: when, the byte ranges it read, and those it wrote
    (absolute addresses, `dense`: every byte of the range is an element it wrote). An
    elementwise op (`elementwise`: its output's and each input's (start, item size), all of
    one element count, contiguous) computes element i from the inputs' elements i only, so
    an element of its output is known where those are (sim_values)."""

    seq: int
    reads: list[tuple[int, int]]
    writes: list[tuple[int, int, bool]]
    elementwise: tuple[tuple[int, int], list[tuple[int, int]]] | None = None


ELEMENTWISE = {"_to_copy", "copy_", "clone"}  # besides the ops torch tags pointwise


def _elementwise(
    func: Any, name: str, ins: list[Any], outs: list[Any]
) -> tuple[tuple[int, int], list[tuple[int, int]]] | None:
    tags = {str(t).rsplit(".", 1)[-1] for t in getattr(func, "tags", ())}
    if len(outs) != 1 or not ("pointwise" in tags or name in ELEMENTWISE):
        return None
    out = outs[0]
    if _is_fake(out) or not out.is_contiguous():
        return None
    found = []
    for t in ins:
        if t is out and name in OVERWRITES:
            continue
        if t.numel() != out.numel() or not t.is_contiguous() or _is_fake(t):
            return None
        found.append((t.data_ptr(), t.element_size()))
    return (out.data_ptr(), out.element_size()), found


def _absolute(t: torch.Tensor) -> tuple[int, int] | None:
    if _is_fake(t) or t.device.type != "cpu" or not t.numel():
        return None
    try:
        _, lo, hi = span(t)
        base = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    return base + lo, base + hi


def torch_event(func: Any, name: str, ins: list[Any], outs: list[Any]) -> TorchEvent | None:
    mutated = [a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments]
    partial = any(mutated) and any(p in name for p in PARTIAL)
    targets = {id(t) for t in outs}
    reads = []
    for t in ins:
        if name in OVERWRITES and id(t) in targets:
            continue  # overwritten, not read
        r = _absolute(t)
        if r is not None:
            reads.append(r)
    writes = []
    for t in outs:
        r = _absolute(t)
        if r is not None:
            writes.append((r[0], r[1], not partial and t.is_contiguous()))
    if not writes:
        return None
    return TorchEvent(tick(), reads, writes, _elementwise(func, name, ins, outs))
