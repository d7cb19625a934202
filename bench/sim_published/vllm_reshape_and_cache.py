"""After vLLM's Triton reshape_and_cache_flash (vllm-project/vllm,
vllm/attention/ops/triton_reshape_and_cache_flash.py, Apache-2.0): one program per token reads
its slot, returns at once for a padding token (slot < 0), and otherwise copies the token's
Hkv · d keys and values into page slot // BS, offset slot % BS, in blocks of the flattened head
dimension. Written here for the task's signature (in place); no code copied."""

import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache(
    k_ptr, v_ptr, kc_ptr, vc_ptr, slot_ptr, block_size, n: tl.constexpr, BLOCK: tl.constexpr
):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + t).to(tl.int64)
    if slot < 0:
        return
    page = slot // block_size
    off = slot % block_size
    dst = (page * block_size + off) * n
    for start in range(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        keep = i < n
        tl.store(kc_ptr + dst + i, tl.load(k_ptr + t * n + i, mask=keep), mask=keep)
        tl.store(vc_ptr + dst + i, tl.load(v_ptr + t * n + i, mask=keep), mask=keep)


def run(k, v, key_cache, value_cache, slot_mapping):
    T, h, d = k.shape
    block_size = key_cache.shape[1]
    n = h * d
    block = min(triton.next_power_of_2(n), 2048)
    _reshape_and_cache[(T,)](
        k,
        v,
        key_cache,
        value_cache,
        slot_mapping,
        block_size,
        n=n,
        BLOCK=block,
        num_warps=4 if block >= 512 else 1,
    )
    return key_cache, value_cache
