"""vLLM's reshape_and_cache_flash with an fp8 (e4m3) cache: for every token t with
slot_mapping[t] = s ≥ 0, key_cache[s // BS, s % BS] = fp8(clamp(k[t] / k_scale, ±448)) and
value_cache likewise with v_scale (round to nearest even); tokens with s = -1 are skipped;
every other slot keeps its old contents. Returns new caches (copies)."""

import torch


def _fp8(x, scale):
    return (x.double() / scale.double()).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def run(k, v, key_cache, value_cache, slot_mapping, k_scale, v_scale):
    NB, BS, H, d = key_cache.shape
    kc = key_cache.clone().view(torch.uint8).view(NB * BS, H, d)
    vc = value_cache.clone().view(torch.uint8).view(NB * BS, H, d)
    valid = slot_mapping >= 0
    kc[slot_mapping[valid]] = _fp8(k[valid], k_scale).view(torch.uint8)
    vc[slot_mapping[valid]] = _fp8(v[valid], v_scale).view(torch.uint8)
    f8 = torch.float8_e4m3fn
    return kc.view(f8).view(NB, BS, H, d), vc.view(f8).view(NB, BS, H, d)


def bytes_share(axes, inputs):
    """The share of task.yaml's `bytes` these inputs need (a `sim:` device holds a counted call
    to it): a padding token moves nothing, so only the live tokens' k and v rows are read and
    written into the caches, while every token's slot and both scales are read."""
    T, H, d = axes["T"], axes["Hkv"], axes["d"]
    live = int((inputs[4] >= 0).sum())
    return (2 * (2 * live * H * d + live * H * d) + 8 * T + 8) / (
        2 * (2 * T * H * d + T * H * d) + 8 * T + 8
    )
