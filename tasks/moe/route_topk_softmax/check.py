"""Order-free judgement of top-k routing: the ids of a row form a valid top-K set (ties to
the lowest index), in any order, and each weight matches its own id."""

import torch

from core.harness.compare import compare

WEIGHT_ATOL, WEIGHT_RTOL = 1.0e-6, 1.0e-4
SELECT_RTOL = 1.0e-6  # a chosen logit may sit this far below an unchosen one (rounding)


def _fail(message):
    return {"passed": False, "message": message}


def _check_ids(ids, x, k):
    """(problem or None, chosen mask). x: float64 [T, E] selection scores."""
    T, E = x.shape
    if ((ids < 0) | (ids >= E)).any():
        t = int(((ids < 0) | (ids >= E)).any(1).nonzero()[0])
        return f"row {t}: expert id outside [0, {E}): {ids[t].tolist()}", None
    srt = ids.sort(dim=1).values
    dup = (
        (srt[:, 1:] == srt[:, :-1]).any(1)
        if k > 1
        else torch.zeros(T, dtype=torch.bool, device=x.device)
    )
    if dup.any():
        t = int(dup.nonzero()[0])
        return f"row {t}: an expert id repeats: {ids[t].tolist()}", None
    chosen = torch.zeros(T, E, dtype=torch.bool, device=x.device).scatter_(1, ids, True)
    if k == E:
        return None, chosen
    idx = torch.arange(E, device=x.device).expand(T, E)
    low = x.masked_fill(~chosen, float("inf")).min(1).values  # weakest chosen
    high = x.masked_fill(chosen, float("-inf")).max(1).values  # strongest left out
    wrong = low < high - SELECT_RTOL * (1 + high.abs())
    if wrong.any():
        t = int(wrong.nonzero()[0])
        best = torch.sort(x[t], descending=True, stable=True).indices[:k].tolist()
        return (
            f"row {t}: not a top-{k} set: chose {sorted(ids[t].tolist())}, expected {sorted(best)} "
            f"(weakest chosen {float(low[t]):.6g} < best left out {float(high[t]):.6g})"
        ), None
    # Exact ties at the boundary go to the lowest index.
    at_low = x == low[:, None]
    last_chosen = torch.where(chosen & at_low, idx, -1).max(1).values
    first_left = torch.where(~chosen & at_low, idx, E).min(1).values
    tie = first_left < last_chosen
    if tie.any():
        t = int(tie.nonzero()[0])
        return (
            f"row {t}: tie broken the wrong way: experts {int(first_left[t])} and {int(last_chosen[t])} have equal "
            f"logits {float(low[t]):.6g}; the lower index must be chosen"
        ), None
    return None, chosen


def check(outputs, expected, inputs):
    weights, ids = outputs
    logits, k = inputs[0], int(inputs[1])
    x = logits.double()
    ids = ids.to(x.device).long()
    weights = weights.to(x.device)
    problem, _ = _check_ids(ids, x, k)
    result = {"topk_ids": {"passed": problem is None}}
    if problem:
        result["topk_ids"]["message"] = problem
        result["topk_weights"] = _fail(f"not judged, topk_ids is wrong: {problem}")
        return result
    # The weights of the candidate's own ids, renormalised over its chosen set.
    xc = x.gather(1, ids)
    want = torch.softmax(xc, dim=1)
    result["topk_weights"] = compare(weights, want, WEIGHT_ATOL, WEIGHT_RTOL, 1.0)
    return result
