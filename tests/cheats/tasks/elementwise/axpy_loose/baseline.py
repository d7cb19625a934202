import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.add(b, x, alpha=2)
