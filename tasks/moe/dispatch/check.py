"""Normal-mode dispatch judged as a layout: the handle (recv_rank_prefix, so the received
count n = recv_rank_prefix[W − 1]) and num_recv_tokens_per_expert exactly, then the first n
rows of every per-row output exactly (fp8 rows and scales bit for bit: dispatch is a copy),
in the canonical order (source rank ascending, then token index). Rows at or beyond n are
free."""

import torch

NAMES = ("recv_x", "recv_x_scale", "recv_topk_idx", "recv_topk_weights", "recv_src_idx")


def _ok():
    return {"passed": True, "max_abs_err": 0.0}


def _fail(message):
    return {"passed": False, "message": message}


def _bits(t: torch.Tensor) -> torch.Tensor:
    return (
        t.view(torch.uint8)
        if t.dtype.itemsize == 1
        else t.view(torch.int32)
        if t.dtype == torch.float32
        else t
    )


def check(outputs, expected, inputs):
    outs = [t.cpu() for t in outputs]
    exp = [t.cpu() for t in expected[:7]]
    exp[0] = exp[0].to(
        torch.float8_e4m3fn
    )  # the reference returns the fp8 values as bfloat16 (exact)
    prefix, want_prefix = outs[5].long(), exp[5].long()
    W = want_prefix.numel()
    result = {}
    if not torch.equal(prefix, want_prefix):
        result["recv_rank_prefix"] = _fail(
            f"recv_rank_prefix is {prefix.tolist()}; expected {want_prefix.tolist()} (inclusive prefix sums over source ranks "
            f"of the tokens this rank receives; a token counts once per destination rank however many of its experts live there)"
        )
        for name in NAMES:
            result[name] = _fail("not judged: recv_rank_prefix is wrong")
    else:
        result["recv_rank_prefix"] = _ok()
        n = int(want_prefix[-1])
        src_rank = torch.repeat_interleave(
            torch.arange(W), torch.diff(want_prefix, prepend=torch.zeros(1, dtype=torch.long))
        )
        want_src = exp[4][:n].long()
        for k, name in enumerate(NAMES):
            got, want = _bits(outs[k][:n]), _bits(exp[k][:n])
            bad = (
                (got != want).reshape(n, -1).any(dim=1).nonzero().flatten()
                if n
                else torch.zeros(0, dtype=torch.long)
            )
            if bad.numel():
                i = int(bad[0])
                result[name] = _fail(
                    f"{bad.numel()} of the {n} received rows differ; first at row {i} (source rank {int(src_rank[i])}, token "
                    f"{int(want_src[i])}): got {outs[k][i].flatten()[:6].tolist()}…, expected {exp[k][i].flatten()[:6].tolist()}… "
                    f"(rows are ordered by source rank, then token index)"
                )
            else:
                result[name] = _ok()
    per_expert, want_pe = outs[6].long(), exp[6].long()
    if torch.equal(per_expert, want_pe):
        result["num_recv_tokens_per_expert"] = _ok()
    else:
        e = int((per_expert != want_pe).nonzero()[0])
        result["num_recv_tokens_per_expert"] = _fail(
            f"local expert {e}: {int(per_expert[e])} tokens, expected {int(want_pe[e])} (received tokens with that local expert among their top-K)"
        )
    return result
