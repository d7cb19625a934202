"""Exploit (GPU): behave in eager calls, but while a CUDA graph is being captured return the
last output without launching anything: the decode-sized workloads, timed as graph replays,
then replay an empty graph.

Defense: after each sampled replay the graph's output buffers are copied and checked against
the reference on that replay's fresh inputs (timed_output_mismatch)."""

import torch

_last = None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _last
    if torch.cuda.is_current_stream_capturing() and _last is not None and _last.shape == x.shape:
        return _last
    _last = x * 2 + b
    return _last
