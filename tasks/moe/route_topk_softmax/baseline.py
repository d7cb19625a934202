"""What a serving stack runs: vLLM's topk_softmax CUDA/ROCm op (a warp/wavefront per row)
when vllm is importable, else sgl_kernel's, else the torch composition softmax + stable sort
+ renormalise (the sort, not torch.topk, because torch.topk does not promise the lowest
index on ties)."""

import torch


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


def run(router_logits: torch.Tensor, top_k: int):
    x = router_logits.contiguous()
    if x.device.type == "cuda":
        got = _vendor(x, top_k)
        if got is not None:
            return got
    ids = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :top_k]
    w = torch.softmax(x, dim=-1).gather(1, ids)
    return w / w.sum(dim=-1, keepdim=True), ids.to(torch.int32)
