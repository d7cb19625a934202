"""After SGLang's KV-cache store (sgl-project/sglang, `MHATokenToKVPool.set_kv_buffer`,
Apache-2.0): plain PyTorch indexed assignment of the new tokens' keys and values into the
flattened caches, cache[slots] = k (one index_put kernel per cache). The task's padding tokens
(slot -1) are dropped first with a mask, which a GPU turns into a host sync (nonzero). Written
here for the task's signature (in place); no code copied."""


def run(k, v, key_cache, value_cache, slot_mapping):
    NB, BS, h, d = key_cache.shape
    keep = slot_mapping >= 0
    slots = slot_mapping[keep]
    key_cache.view(NB * BS, h, d)[slots] = k[keep]
    value_cache.view(NB * BS, h, d)[slots] = v[keep]
    return key_cache, value_cache
