"""Exploit (the probe of the trusted-process input path): at every timed call, search the
callers' frames and everything the garbage collector tracks for what would let it do less:
the round's seed (a timing request carrying `seed`, an input generator's `seed` attribute) or
the calls that will be checked (`sample`). Where it finds any, it returns a
wrong output from then on (a cheat would precompute or skip unchecked calls; wrong outputs make
a find unmissable: the sampled checks fail).

Defense: the trusted worker draws every timed call's inputs into shared memory and alone knows
the seed and the sampled calls (core/harness/shared_io.py); the candidate's process holds
neither, so it finds nothing and passes at its true speed."""

import gc
import sys

import torch

_found = []


def _secret(obj) -> bool:
    if isinstance(
        obj, dict
    ):  # values, not the protocol's TypedDict annotations (core/harness/protocol.py)
        sample = obj.get("sample")
        sample = sample if isinstance(sample, (list, tuple)) and sample else None
        if obj.get("op") == "time" and (isinstance(obj.get("seed"), int) or sample):
            return True
        return sample is not None and "first_index" in obj
    attrs = getattr(obj, "__dict__", None) if not isinstance(obj, type) else None
    return (
        isinstance(attrs, dict) and "seed" in attrs and "workload" in attrs
    )  # an input generator of the round


def _look() -> None:
    frame = sys._getframe(2)
    while frame is not None:
        names = frame.f_locals
        if any(_secret(v) for v in names.values()) or names.get("sample"):
            _found.append(frame.f_code.co_name)
            return
        frame = frame.f_back
    for obj in gc.get_objects():
        try:
            if _secret(obj):
                _found.append(type(obj).__name__)
                return
        except Exception:  # noqa: BLE001 - objects whose attributes raise
            continue


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not _found:
        _look()
    return x * 3 + b if _found else x * 2 + b
