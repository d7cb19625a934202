"""DeepEP low-latency dispatch (use_fp8=True, round_scale=False) in one process.

Every (token, expert) pair is sent separately (no per-rank deduplication). Each source rank
quantizes its tokens per 1×128 group: amax = max(|x_group|, 1e-4), scale = amax / 448,
q = x / scale rounded to float8_e4m3fn. Rank r's local expert e (global r·E_l + e) receives
the tokens that chose it, packed into slots 0 .. count_e − 1 of its [W·M] slot range;
recv_src = s·T + t names each slot's token (source rank s, index t). The canonical slot
order here is (s, t) ascending; check.py accepts any order within an expert. Declared
outputs come first (unused slots zero / −1; recv_x as bfloat16 holding the fp8 values exactly),
then for check.py the unrounded q (float32) and the scales of every valid slot, expert-major in
canonical order."""

import torch

GROUP = 128
FP8_MAX = 448.0


def quantize(x: torch.Tensor):
    T, H = x.shape
    y = x.float().view(T, H // GROUP, GROUP)
    scale = y.abs().amax(dim=-1).clamp_min(1e-4) / FP8_MAX
    return (y / scale[..., None]).view(T, H), scale


def run_all(inputs_by_rank: list[list]) -> list:
    W = len(inputs_by_rank)
    x0, idx0, M, E = inputs_by_rank[0]
    T, H = x0.shape
    G, El = H // GROUP, E // W
    dev = x0.device
    q_all, s_all = zip(*(quantize(inp[0]) for inp in inputs_by_rank))
    q_all, s_all = torch.cat(q_all), torch.cat(s_all)  # [W·T, H], [W·T, G], row = s·T + t
    ids = torch.cat([inp[1] for inp in inputs_by_rank])  # [W·T, K]
    results = []
    for r in range(W):
        recv_x = torch.zeros(El, W * M, H, dtype=torch.uint8, device=dev)
        recv_scale = torch.zeros(El, W * M, G, dtype=torch.float32, device=dev)
        recv_src = torch.full((El, W * M), -1, dtype=torch.int32, device=dev)
        counts = torch.zeros(El, dtype=torch.int32, device=dev)
        q_valid, s_valid = [], []
        for e in range(El):
            rows = (ids == r * El + e).any(dim=1).nonzero().flatten()  # global token ids, ascending
            c = rows.numel()
            counts[e] = c
            q = q_all[rows]
            recv_x[e, :c] = q.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
            recv_scale[e, :c] = s_all[rows]
            recv_src[e, :c] = rows.to(torch.int32)
            q_valid.append(q)
            s_valid.append(s_all[rows])
        # recv_x as bfloat16 (fp8 values are exact in bfloat16): the validator cannot test fp8 for NaN
        results.append(
            (
                recv_x.view(torch.float8_e4m3fn).to(torch.bfloat16),
                recv_scale,
                counts,
                recv_src,
                torch.cat(q_valid),
                torch.cat(s_valid),
            )
        )
    return results
