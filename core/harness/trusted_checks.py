"""The trusted worker's memory of a job's checks: cached references, pools, independence.

`ReferenceCache` keeps (inputs, reference outputs) by `workload#seed` within the job's byte
budget, so a batch's candidates share them; `pool_key` names the workload whose calls pool
together (checking.Pool: evidence of stochastic outputs); `compare_all` judges one call's
outputs; `independence` proves that an output ignores its inputs (bit-identical for two seeds
whose expected outputs clearly differ), comparing `fingerprint`s computed where the output lies.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import torch

from core.harness import checking, inputs

INDEPENDENT_SAMPLE = 4096  # elements compared when asking whether an output ignores its inputs
INDEPENDENT_REL_DIFF = 0.5  # "clearly different": more than any 2-bit-mantissa rounding explains
INDEPENDENT_MIN_SHARE = 0.25
FINGERPRINT_CHUNK = 1 << 24  # 32-bit words per step: 128 MiB of int64 temporaries at most

# Drawn once per trusted worker, whose memory no other process may read: an output that only
# looks unchanged to a known checksum cannot be built without them.
_KEYS = (secrets.randbits(62) | 1, secrets.randbits(62))


def pool_key(workload: dict[str, Any]) -> str:
    """A workload's calls pool together whichever stage checks them (its axes name it)."""
    return ",".join(f"{k}={v}" for k, v in sorted(workload["axes"].items()))


class ReferenceCache:
    """(inputs, reference outputs) by `workload#seed`, up to `budget` bytes of tensors; what
    does not fit is computed again for each candidate (the single pending `expected`)."""

    def __init__(self, budget: int):
        self.budget, self.used = budget, 0
        self.entries: dict[str, tuple[list[Any], list[torch.Tensor]]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> tuple[list[Any], list[torch.Tensor]]:
        return self.entries[key]

    def add(self, key: str, entry: tuple[list[Any], list[torch.Tensor]]) -> bool:
        size = sum(
            t.numel() * t.element_size()
            for t in [*entry[0], *entry[1]]
            if isinstance(t, torch.Tensor)
        )
        if self.used + size > self.budget:
            return False
        self.entries[key] = entry
        self.used += size
        return True


def compare_all(
    out_specs: list[dict[str, Any]],
    got: list[torch.Tensor],
    want: list[torch.Tensor],
    args: list[Any],
    rule: dict[str, Any],
    device: torch.device,
    check: checking.Check | None,
) -> dict[str, Any]:
    if len(got) != len(out_specs):
        raise inputs.OutputError(f"{len(got)} outputs, expected {len(out_specs)}")
    return checking.judge(out_specs, [g.to(device) for g in got], want, args, rule, check)


def _sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    n = flat.numel()
    k = min(n, INDEPENDENT_SAMPLE)
    # Integer arithmetic: a float32 linspace on a GPU rounds past n - 1 for large n.
    index = torch.arange(k, device=flat.device, dtype=torch.int64) * max(n - 1, 0) // max(k - 1, 1)
    return flat[index].to("cpu", torch.float64)


def fingerprint(t: torch.Tensor) -> tuple[str, tuple[int, ...], int | str]:
    """The tensor's dtype, shape and a digest of its bytes, computed where they lie. On the
    host: BLAKE2b of the memory itself. On a device: a keyed 64-bit checksum, the sum over its
    32-bit words w_i of w_i * (k1 * i + k2), wrapping in int64; two tensors with the same bytes
    always agree, two that differ agree with negligible odds for keys they cannot know. One
    pass on the GPU, where hashing on the host cost a copy of the whole output (1.5-2 s of a
    warm add_rmsnorm turn on the H200)."""
    raw = t.detach().reshape(-1).contiguous().view(torch.uint8)
    if raw.device.type == "cpu":
        return str(t.dtype), tuple(t.shape), hashlib.blake2b(raw.numpy()).hexdigest()
    return str(t.dtype), tuple(t.shape), keyed_checksum(raw)


def keyed_checksum(raw: torch.Tensor) -> int:
    """`fingerprint`'s device digest of a flat uint8 tensor (any device)."""
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw.to(torch.int32)
    k1, k2 = _KEYS
    total = torch.zeros((), dtype=torch.int64, device=raw.device)
    for start in range(0, words.numel(), FINGERPRINT_CHUNK):
        chunk = words[start : start + FINGERPRINT_CHUNK].to(torch.int64)
        index = torch.arange(start, start + chunk.numel(), device=raw.device, dtype=torch.int64)
        total += (chunk * (index * k1 + k2)).sum()
    return int(total)


def independence(
    history: list[tuple[int, list[Any], list[torch.Tensor]]],
    seed: int,
    out_specs: list[dict[str, Any]],
    got: list[torch.Tensor],
    want: list[torch.Tensor],
) -> str | None:
    """Proof that an output ignores the inputs: bit-identical for two seeds whose expected
    outputs clearly differ (by more than half their size, on at least a quarter of the sampled
    elements: more than any rounding of a legitimate lower precision explains)."""
    digests = [fingerprint(g) for g in got]
    samples = [_sample(w) for w in want]
    found = None
    for other_seed, other_digests, other_samples in history:
        if other_seed == seed:
            continue
        for spec, d, od, s, os_ in zip(out_specs, digests, other_digests, samples, other_samples):
            if d != od or s.numel() == 0:
                continue
            both = torch.isfinite(s) & torch.isfinite(os_)
            differ = (
                (s - os_).abs() > INDEPENDENT_REL_DIFF * torch.maximum(s.abs(), os_.abs())
            ) & both
            share = float(differ.sum()) / s.numel()
            if share >= INDEPENDENT_MIN_SHARE:
                found = (
                    f"output `{spec['name']}` is bit-identical for seeds {other_seed} and {seed}, whose expected outputs "
                    f"differ by more than {INDEPENDENT_REL_DIFF:.0%} on {share:.0%} of the sampled elements: it does not depend on the inputs"
                )
                break
        if found:
            break
    history.append((seed, digests, samples))
    return found
