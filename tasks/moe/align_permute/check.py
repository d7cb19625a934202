"""moe_align_block_size judged as a layout: the padded total and the expert of every used
block exactly, each expert's segment of sorted_token_ids as a multiset (order within a
segment is free), everything at or beyond the padded total ignored."""

import torch


def _ok():
    return {"passed": True, "max_abs_err": 0.0}


def _fail(message):
    return {"passed": False, "message": message}


def check(outputs, expected, inputs):
    sorted_ids, expert_ids, total = (t.cpu() for t in outputs)
    want_sorted, want_experts, want_total = (t.cpu() for t in expected[:3])
    topk_ids, E, BM = inputs
    n = topk_ids.numel()
    npad = int(want_total[0])
    got_total = int(total[0])
    result = {}
    if got_total != npad:
        result["num_tokens_post_padded"] = _fail(
            f"num_tokens_post_padded is {got_total}; expected {npad} (Σ_e ceil(n_e / {BM})·{BM})"
        )
        why = "not judged: num_tokens_post_padded is wrong"
        result["expert_ids"] = _fail(why)
        result["sorted_token_ids"] = _fail(why)
        return result
    result["num_tokens_post_padded"] = _ok()
    blocks = npad // BM
    bad = (expert_ids[:blocks] != want_experts[:blocks]).nonzero()
    if bad.numel():
        b = int(bad[0])
        result["expert_ids"] = _fail(
            f"block {b} (rows {b * BM}..{b * BM + BM - 1}): expert {int(expert_ids[b])}, expected {int(want_experts[b])}; "
            f"{bad.numel()} of {blocks} used blocks wrong"
        )
    else:
        result["expert_ids"] = _ok()
    got = sorted_ids[:npad].long()
    if ((got < 0) | (got > n)).any():
        i = int(((got < 0) | (got > n)).nonzero()[0])
        result["sorted_token_ids"] = _fail(
            f"position {i}: {int(got[i])} is neither a row index in [0, {n}) nor the sentinel {n}"
        )
        return result
    # Segment label of every position from the expected layout; compare (segment, value) multisets.
    label = want_experts[:blocks].long().repeat_interleave(BM)
    key_got = torch.sort(label * (n + 1) + got).values
    key_want = torch.sort(label * (n + 1) + want_sorted[:npad].long()).values
    diff = (key_got != key_want).nonzero()
    if diff.numel():
        i = int(diff[0])
        e = int(key_want[i]) // (n + 1)
        seg = label == e
        have = sorted(got[seg].tolist())
        need = sorted(want_sorted[:npad][seg].tolist())
        missing = sorted(set(need) - set(have))[:5]
        extra = sorted(set(have) - set(need))[:5]
        result["sorted_token_ids"] = _fail(
            f"expert {e}'s segment holds the wrong rows: missing {missing}, unexpected {extra} "
            f"(the sentinel is {n}; rows of an expert may be in any order within its segment)"
        )
    else:
        result["sorted_token_ids"] = _ok()
    return result
