"""A portable starting point: one Triton program per token; it reads the token's slot, returns
at once for slot -1, else quantizes its [Hkv, d] key and value tiles (divide by the scale,
clamp to ±448, round to the e4m3 grid) and stores them at row `slot` of the caches viewed as
[NB·BS, Hkv·d]. Correct for any T, Hkv, d and block size; not tuned (one token per program,
the whole token in one tile, default warps).

fp8 and the Triton CPU interpreter: its float32 -> float8_e4m3fn conversion is wrong at binade
edges, so the kernel rounds to the e4m3 grid itself (`_round_e4m3`, as norm/rmsnorm_fp8_quant's
starter: ties to even, bit-exact with torch's cast) and stores an exactly representable value.
On a GPU the plain `.to(tl.float8e4nv)` is enough and faster."""

import triton
import triton.language as tl


@triton.jit
def _round_e4m3(v):
    """Round float32 v (|v| ≤ 448) to the nearest float8_e4m3fn value, ties to even."""
    a = tl.abs(v)
    e = (a.to(tl.int32, bitcast=True) >> 23) & 0xFF  # biased float32 exponent of |v|
    e = tl.maximum(e, 127 - 6) - 3 + 23  # 2^23 · (e4m3 step at |v|); 2^-6 is the smallest normal
    m = (e << 23).to(tl.float32, bitcast=True)
    r = (a + m) - m  # float32 adds round to nearest even
    return tl.where(v < 0, -r, r)


@triton.jit
def _cache_write_fp8_kernel(
    k_ptr,
    v_ptr,
    kc_ptr,
    vc_ptr,
    slot_ptr,
    ks_ptr,
    vs_ptr,
    HD,
    stride_k,
    stride_v,
    BLOCK: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t)
    if slot >= 0:
        cols = tl.arange(0, BLOCK)
        mask = cols < HD
        k = tl.load(k_ptr + t * stride_k + cols, mask=mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + t * stride_v + cols, mask=mask, other=0.0).to(tl.float32)
        kq = _round_e4m3(tl.clamp(k / tl.load(ks_ptr), -448.0, 448.0))
        vq = _round_e4m3(tl.clamp(v / tl.load(vs_ptr), -448.0, 448.0))
        tl.store(kc_ptr + slot * HD + cols, kq.to(kc_ptr.dtype.element_ty), mask=mask)
        tl.store(vc_ptr + slot * HD + cols, vq.to(vc_ptr.dtype.element_ty), mask=mask)


def run(k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale):
    T, H, d = k.shape
    assert key_cache.is_contiguous() and value_cache.is_contiguous(), (
        "written in place: caches must be contiguous"
    )
    k, v = k.contiguous(), v.contiguous()
    _cache_write_fp8_kernel[(T,)](
        k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale, H * d, k.stride(0), v.stride(0),
        BLOCK=triton.next_power_of_2(H * d),
    )  # fmt: skip
    return key_cache, value_cache
