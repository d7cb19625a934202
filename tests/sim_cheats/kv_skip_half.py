"""Cheat: a data-dependent kernel that skips half its work when counted. kv_cache_write's
starter (one program per token, padding tokens return at once), except that at sizes only a GPU
workload has (the counted pass of a `sim:` device; correctness runs caches of a few hundred
slots) the odd tokens return too: their slots keep their old contents, every checked call is
right, and the prediction halves.
Defense: the counted call is held to the bytes its drawn inputs need (the live tokens': the
task's `bytes_share`), at its samples' error bound after a recount with more programs: half of
them is `sim_less_work`, however the padding fell."""

import triton
import triton.language as tl


@triton.jit
def _cache_write_kernel(
    k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, HD, SKIP_ODD: tl.constexpr, BLOCK: tl.constexpr
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    if SKIP_ODD:
        slot = tl.where(t % 2 == 0, slot, -1)
    if slot >= 0:
        cols = tl.arange(0, BLOCK)
        mask = cols < HD
        tl.store(kc_ptr + slot * HD + cols, tl.load(k_ptr + t * HD + cols, mask=mask), mask=mask)
        tl.store(vc_ptr + slot * HD + cols, tl.load(v_ptr + t * HD + cols, mask=mask), mask=mask)


def run(k, v, key_cache, value_cache, slot_mapping):
    T, H, d = k.shape
    NB, BS = key_cache.shape[:2]
    k, v = k.contiguous(), v.contiguous()
    counted = NB * BS >= 4096  # GPU-sized caches: the counted pass
    _cache_write_kernel[(T,)](
        k, v, key_cache, value_cache, slot_mapping, H * d,
        SKIP_ODD=counted, BLOCK=triton.next_power_of_2(H * d),
    )  # fmt: skip
    return key_cache, value_cache
