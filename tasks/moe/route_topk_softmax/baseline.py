"""What a serving stack runs, best first (task.yaml `baselines:`): vLLM's topk_softmax
CUDA/ROCm op (a warp/wavefront per row) when vllm is importable, else sgl_kernel's, else the
torch composition: torch.topk on float64 keys that break ties toward the lower index (each
logit lowered by less than half a float32 ulp times its index: the order of distinct float32
values is kept and equal ones are ordered by index, which torch.topk alone does not
promise), then the softmax of the chosen logits (the renormalised
softmax). `IMPL` names the one the last call used."""

import torch

IMPL = "torch"
_steps: dict = {}


def _tie_keys(x: torch.Tensor) -> torch.Tensor:
    """float64 keys whose descending order is (value descending, index ascending) for any
    finite float32 x: x - (|x| + 2^-900) · index · 2^-40 moves each value by under 2^-31 of
    itself (float32 neighbours are 2^-24 apart) and keeps zeros apart by index."""
    E = x.shape[-1]
    step = _steps.get((E, x.device))
    if step is None:
        step = _steps[(E, x.device)] = torch.arange(E, dtype=torch.float64, device=x.device) * 2.0**-40
    xd = x.double()
    return torch.addcmul(xd, xd.abs().add_(2.0**-900), step, value=-1.0)


def _vendor(x, top_k):
    T = x.shape[0]
    w = torch.empty((T, top_k), device=x.device, dtype=torch.float32)
    ids = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
    try:
        from vllm import _custom_ops as ops

        tei = torch.empty((T, top_k), device=x.device, dtype=torch.int32)
        try:
            ops.topk_softmax(w, ids, tei, x, True)  # newer vLLM: renormalize in the kernel
            return w, ids
        except TypeError:
            ops.topk_softmax(w, ids, tei, x)
            return w / w.sum(dim=-1, keepdim=True), ids
    except ImportError:
        pass
    try:
        from sgl_kernel import topk_softmax

        topk_softmax(w, ids, x, renormalize=True)
        return w, ids
    except (ImportError, TypeError):
        return None


def _torch(x, top_k):
    ids = _tie_keys(x).topk(top_k, dim=-1).indices
    # The renormalised softmax over the chosen experts is the softmax of their logits.
    return torch.softmax(x.gather(1, ids), dim=-1), ids.to(torch.int32)


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


IMPLS = {"vllm": _vendor if _importable("vllm") else None, "sgl-kernel": _vendor if _importable("sgl_kernel") else None, "torch": _torch}


def run(router_logits: torch.Tensor, top_k: int):
    global IMPL
    x = router_logits.contiguous()
    if x.is_cuda and (IMPLS["vllm"] or IMPLS["sgl-kernel"]):
        got = _vendor(x, top_k)
        if got is not None:
            IMPL = "vllm" if IMPLS["vllm"] else "sgl-kernel"
            return got
    IMPL = "torch"
    return _torch(x, top_k)
