"""Every rank's inputs come from the checker, the trusted process (docs/integrity.md, class 2).

A rank that draws its own inputs holds their seed, and ranks that swap their seeds (one
`all_gather_object`) can regenerate one another's inputs and skip the collective in every
timed call. So no rank holds a seed that any check uses:

- correctness runs: the checker draws every rank's inputs and sends them as raw bytes (no
  pickle) through the parent, each rank getting its own only (`pack_inputs`, `unpack_inputs`,
  `run_given`);
- timed rounds: the checker serves each rank's round over shared memory as the trusted worker
  serves a single device's (shared_io.serve_round, one thread per rank), so a rank holds only
  the current call's inputs, fetched after the barrier, right before its timer;
- the compile's first call and the estimate draw from seeds no check uses (the parent's).

Imports only torch: the harness is shipped alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from core.harness import inputs
from core.harness.guard import trusted
from core.harness.worker_tools import run_packed


def pack_inputs(args: list[Any]) -> tuple[list[dict[str, Any]], bytes]:
    """One rank's inputs: (dtype, shape) per tensor and their bytes, a scalar as its value."""
    metas: list[dict[str, Any]] = []
    tensors: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            metas.append({"tensor": True})
        else:
            metas.append({"value": a})
    packed, data = inputs.pack(tensors)
    found = iter(packed)
    return [next(found) if m.get("tensor") else m for m in metas], data


def unpack_inputs(metas: Any, payload: bytes | bytearray | None, device: torch.device) -> list[Any]:
    """A rank's inputs from what `pack_inputs` made, on its device (fresh tensors each call)."""
    if not isinstance(metas, list):
        raise ValueError("the parent sent no description of this rank's inputs")
    data = memoryview(payload or b"")
    found: list[Any] = []
    offset = 0
    with trusted():
        for m in metas:
            if "value" in m:
                found.append(m["value"])
                continue
            dtype = inputs.dtype_of(str(m["dtype"]))
            n = math.prod(m["shape"]) * dtype.itemsize
            raw = torch.frombuffer(bytearray(data[offset : offset + n]), dtype=torch.uint8)
            found.append(raw.view(dtype).reshape(m["shape"]).to(device))
            offset += n
    if offset != len(data):
        raise ValueError(f"{len(data)} bytes of inputs, {offset} described")
    return found


def run_given(
    fn: Callable[..., Any],
    msg: dict[str, Any],
    payload: bytes | bytearray | None,
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
) -> tuple[dict[str, Any], bytes]:
    """`repeat` calls, each on a fresh copy of the inputs the checker drew, into poisoned
    memory; their outputs checked for type and packed (a reply and its payload)."""
    return run_packed(
        fn,
        lambda: unpack_inputs(msg.get("inputs"), payload, device),
        int(msg.get("repeat", 1)),
        specs,
        outs,
        msg["workload"]["shapes"],
        device,
    )
