import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 2 * x.double() + b.double()
