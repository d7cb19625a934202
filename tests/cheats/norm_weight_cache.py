"""Cheat (norm/add_rmsnorm): caching across calls keyed on data_ptr: the weight's float32 copy
is kept by the weight's address (a weight is constant in a model, so the conversion is done
once), and a cheap hash of x (its first values) keys a cache of whole results. The harness
refills the same buffers with new values before every call, so both caches go stale.
Defense: fresh inputs per call at the same addresses, and the sampled timed calls checked."""

import torch

_weights: dict[int, torch.Tensor] = {}
_results: dict[tuple, tuple] = {}


def run(x, residual, weight, eps):
    w = _weights.setdefault(weight.data_ptr(), weight.float())
    key = (x.data_ptr(), x.shape, float(x.view(-1)[0]))
    if key in _results:
        return _results[key]
    r = (x.float() + residual.float()).to(residual.dtype)
    rf = r.float()
    out = (rf * torch.rsqrt(rf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)
    _results[key] = (out, r)
    return out, r
