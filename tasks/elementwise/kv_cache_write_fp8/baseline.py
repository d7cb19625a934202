"""Best first (task.yaml `baselines:`): vLLM's reshape_and_cache_flash CUDA op with
kv_cache_dtype "fp8" and the two scales where vLLM is importable on CUDA; else the torch
composition, free of host synchronisation: quantize k and v (divide by the scale, clamp to
±448, cast to float8_e4m3fn), send padding tokens (slot -1) to a slot no valid token writes
with that slot's own bytes, and one index_copy_ per cache viewed as uint8 rows [NB·BS, Hkv·d].
`IMPL` names the one the last call used."""

import torch

try:
    from vllm import _custom_ops as _vllm_ops
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _vllm_ops = None

IMPL = "torch"


def _vllm(k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale):
    _vllm_ops.reshape_and_cache_flash(
        k, v, key_cache, value_cache, slot_mapping, "fp8", k_scale, v_scale
    )
    return key_cache, value_cache


def _torch(k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale):
    NB, BS, H, d = key_cache.shape
    T = slot_mapping.shape[0]
    kc = key_cache.view(torch.uint8).view(NB * BS, H * d)
    vc = value_cache.view(torch.uint8).view(NB * BS, H * d)
    kq = (
        (k.float() / k_scale)
        .clamp_(-448.0, 448.0)
        .to(torch.float8_e4m3fn)
        .view(torch.uint8)
        .view(T, H * d)
    )
    vq = (
        (v.float() / v_scale)
        .clamp_(-448.0, 448.0)
        .to(torch.float8_e4m3fn)
        .view(torch.uint8)
        .view(T, H * d)
    )
    valid = slot_mapping >= 0
    if T + 1 > NB * BS:  # no slot is sure to be free: select the valid tokens (a host sync)
        slots = slot_mapping[valid]
        kc.index_copy_(0, slots, kq[valid])
        vc.index_copy_(0, slots, vq[valid])
        return key_cache, value_cache
    taken = torch.zeros(T + 2, dtype=torch.int32, device=slot_mapping.device)
    taken.index_fill_(0, torch.where(valid & (slot_mapping <= T), slot_mapping, T + 1), 1)
    free = taken[: T + 1].argmin().view(1)  # a tensor, never a Python int: no host sync
    slots = torch.where(valid, slot_mapping, free)
    keep = valid[:, None]
    kc.index_copy_(0, slots, torch.where(keep, kq, kc.index_select(0, free)))
    vc.index_copy_(0, slots, torch.where(keep, vq, vc.index_select(0, free)))
    return key_cache, value_cache


IMPLS = {"vllm": _vllm if _vllm_ops is not None else None, "torch": _torch}


def run(k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale):
    global IMPL
    IMPL = "vllm" if key_cache.is_cuda and _vllm_ops is not None else "torch"
    return IMPLS[IMPL](k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale)
