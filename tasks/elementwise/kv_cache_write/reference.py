"""vLLM's reshape_and_cache_flash: for every token t with slot_mapping[t] = s ≥ 0,
key_cache[s // BS, s % BS] = k[t] and value_cache[s // BS, s % BS] = v[t] (all Hkv heads);
tokens with s = -1 are skipped; every other slot keeps its old contents. The valid slots are
distinct. Returns new caches (copies; the candidate writes the given caches in place)."""


def run(k, v, key_cache, value_cache, slot_mapping):
    NB, BS, H, d = key_cache.shape
    kc = key_cache.clone().view(NB * BS, H, d)
    vc = value_cache.clone().view(NB * BS, H, d)
    valid = slot_mapping >= 0
    kc[slot_mapping[valid]] = k[valid]
    vc[slot_mapping[valid]] = v[valid]
    return kc.view(NB, BS, H, d), vc.view(NB, BS, H, d)


def bytes_share(axes, inputs):
    """The share of task.yaml's `bytes` these inputs need (a `sim:` device holds a counted call
    to it): a padding token moves nothing, so only the live tokens' k and v rows are read and
    written into the caches, while every token's slot is read."""
    T, H, d = axes["T"], axes["Hkv"], axes["d"]
    live = int((inputs[4] >= 0).sum())
    return (2 * (2 * 2 * live * H * d) + 8 * T) / (2 * (2 * 2 * T * H * d) + 8 * T)
