"""Exploit (sampling): pure greedy decoding, the argmax of every row. At the GPU workloads'
B = 1 and 3 one call holds one or three draws: the per-call distribution test cannot tell them
from samples, so greedy passed there.

Defense: evidence pooled over the workload's checked calls (the argmax hit count), and at least
64 rows' worth of seeds per workload (`correctness.samples` in task.yaml: 64 seeds at B = 1):
correctness fails."""

import torch


def run(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    return logits.argmax(dim=-1)
