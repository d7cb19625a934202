"""Best first (task.yaml `baselines:`): vLLM's reshape_and_cache_flash CUDA op
(kv_cache_dtype "auto", unit scales) where vLLM is importable on CUDA; else the torch
composition, free of host synchronisation (so it is captured in a CUDA graph like a
kernel): padding tokens (slot -1) are sent to a slot no valid token writes — one of the
first T + 1 slots is always free — with that slot's own contents as their value, then one
index_copy_ per cache viewed as [NB·BS, Hkv, d] (several writes of one identical value to
one slot leave it unchanged). `IMPL` names the one the last call used."""

import torch

try:
    from vllm import _custom_ops as _vllm_ops
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _vllm_ops = None

IMPL = "torch"
_scale: dict = {}


def _vllm(k, v, key_cache, value_cache, slot_mapping):
    one = _scale.get(key_cache.device)
    if one is None:
        one = _scale[key_cache.device] = torch.ones(
            (), dtype=torch.float32, device=key_cache.device
        )
    _vllm_ops.reshape_and_cache_flash(k, v, key_cache, value_cache, slot_mapping, "auto", one, one)
    return key_cache, value_cache


def _torch(k, v, key_cache, value_cache, slot_mapping):
    NB, BS, H, d = key_cache.shape
    T = slot_mapping.shape[0]
    kc, vc = key_cache.view(NB * BS, H, d), value_cache.view(NB * BS, H, d)
    valid = slot_mapping >= 0
    if T + 1 > NB * BS:  # no slot is sure to be free: select the valid tokens (a host sync)
        slots = slot_mapping[valid]
        kc.index_copy_(0, slots, k[valid])
        vc.index_copy_(0, slots, v[valid])
        return key_cache, value_cache
    # Which of slots 0..T the valid tokens write (index T + 1 collects the rest); the first
    # unwritten one takes the padding tokens' writes.
    taken = torch.zeros(T + 2, dtype=torch.int32, device=slot_mapping.device)
    taken.index_fill_(0, torch.where(valid & (slot_mapping <= T), slot_mapping, T + 1), 1)
    free = taken[: T + 1].argmin().view(1)  # a tensor, never a Python int: no host sync
    slots = torch.where(valid, slot_mapping, free)
    keep = valid[:, None, None]
    kc.index_copy_(0, slots, torch.where(keep, k, kc.index_select(0, free)))
    vc.index_copy_(0, slots, torch.where(keep, v, vc.index_select(0, free)))
    return key_cache, value_cache


IMPLS = {"vllm": _vllm if _vllm_ops is not None else None, "torch": _torch}


def run(k, v, key_cache, value_cache, slot_mapping):
    global IMPL
    IMPL = "vllm" if key_cache.is_cuda and _vllm_ops is not None else "torch"
    return IMPLS[IMPL](k, v, key_cache, value_cache, slot_mapping)
