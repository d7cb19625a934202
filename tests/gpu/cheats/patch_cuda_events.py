"""Exploit (GPU): a slow kernel (the addition done 20 times) that makes the CUDA timer lie:
torch.cuda.Event.elapsed_time divided by 100 (on the class, so every event is affected), its
record and torch.cuda.synchronize replaced, torch._C's synchronize made a no-op.

Defense: the timer creates, records and reads its events through the C base class's own
functions, and synchronizes through torch._C's, all bound when the harness was imported,
before the candidate: the patches do not reach it (the true, slow time is measured). The
runtime patches are noted."""

import torch

_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 100
torch.cuda.Event.record = lambda self, stream=None: _record(self, stream)
torch.cuda.synchronize = lambda device=None: None
torch._C._cuda_synchronize = lambda: None
try:
    torch._C._CudaEventBase.elapsed_time = lambda self, end: (
        0.001
    )  # refused where the type is immutable
except (TypeError, AttributeError):
    pass


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    for _ in range(20):
        torch.add(b, x, alpha=2, out=y)
    return y
