"""Exploit: return a constant that a loose tolerance accepts (run against the fixture
`axpy_loose`, whose atol of 20 exceeds every output).

Defense: an output that is bit-identical for two seeds whose expected outputs clearly differ
does not depend on its inputs: input_independent_output, whatever the tolerance says."""

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(x)
