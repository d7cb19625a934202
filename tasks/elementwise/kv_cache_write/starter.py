"""A portable starting point: one Triton program per token; it reads the token's slot, returns
at once for slot -1, else copies its [Hkv, d] key and value tiles into the caches at
(slot // BS, slot % BS), which for a contiguous [NB, BS, Hkv, d] cache is row `slot` of the
cache viewed as [NB·BS, Hkv·d]. Correct for any T, Hkv, d and block size; not tuned (one
token per program, the whole token in one tile, default warps)."""

import triton
import triton.language as tl


@triton.jit
def _cache_write_kernel(
    k_ptr,
    v_ptr,
    kc_ptr,
    vc_ptr,
    slot_ptr,
    HD,
    stride_k,
    stride_v,
    stride_kc,
    stride_vc,
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        cols = tl.arange(0, BLOCK)
        mask = cols < HD
        kv = tl.load(k_ptr + t * stride_k + cols, mask=mask)
        vv = tl.load(v_ptr + t * stride_v + cols, mask=mask)
        tl.store(kc_ptr + slot * stride_kc + cols, kv, mask=mask)
        tl.store(vc_ptr + slot * stride_vc + cols, vv, mask=mask)


def run(k, v, key_cache, value_cache, slot_mapping):
    T, H, d = k.shape
    NB, BS = key_cache.shape[:2]
    assert key_cache.is_contiguous() and value_cache.is_contiguous(), (
        "written in place: caches must be contiguous"
    )
    k, v = k.contiguous(), v.contiguous()
    HD = H * d
    _cache_write_kernel[(T,)](
        k,
        v,
        key_cache,
        value_cache,
        slot_mapping,
        HD,
        k.stride(0),
        v.stride(0),
        HD,
        HD,
        BLOCK=triton.next_power_of_2(HD),
    )
    return key_cache, value_cache
