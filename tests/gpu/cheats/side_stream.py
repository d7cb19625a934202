"""Exploit (GPU): launch the work on a side stream and return without joining it: the timing
events on the current stream see nothing.

Defense: the sampled timed call's output is copied on the timed stream the moment the call
returns (the copy does not wait for the side stream: timed_output_mismatch), and a time below
90% of the roofline is impossible (faster_than_speed_of_light). In correctness the harness
synchronizes the whole device first, so the outputs there are right."""

import torch

_side = None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _side
    if _side is None:
        _side = torch.cuda.Stream()
    y = torch.empty_like(x)
    _side.wait_stream(
        torch.cuda.current_stream()
    )  # the inputs are ready; the output is not waited for
    with torch.cuda.stream(_side):
        for _ in range(4):  # make the hidden work long enough to show
            torch.add(b, x, alpha=2, out=y)
    return y
