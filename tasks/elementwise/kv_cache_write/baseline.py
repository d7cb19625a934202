"""vLLM's reshape_and_cache_flash CUDA op (kv_cache_dtype "auto", unit scales) where vLLM is
importable on CUDA; otherwise the torch composition: select the valid tokens, index_copy_
them into the caches viewed as [NB·BS, Hkv, d] (the boolean selection synchronises with the
host)."""

import torch

try:
    from vllm import _custom_ops as _vllm_ops
except Exception:  # noqa: BLE001 - not installed, or no GPU build
    _vllm_ops = None

_scale: dict = {}


def run(k, v, key_cache, value_cache, slot_mapping):
    NB, BS, H, d = key_cache.shape
    if key_cache.device.type == "cuda" and _vllm_ops is not None:
        one = _scale.get(key_cache.device)
        if one is None:
            one = _scale[key_cache.device] = torch.ones((), dtype=torch.float32, device=key_cache.device)
        _vllm_ops.reshape_and_cache_flash(k, v, key_cache, value_cache, slot_mapping, "auto", one, one)
        return key_cache, value_cache
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    key_cache.view(NB * BS, H, d).index_copy_(0, slots, k[valid])
    value_cache.view(NB * BS, H, d).index_copy_(0, slots, v[valid])
    return key_cache, value_cache
