"""All-gather in one process: every rank's output is the concatenation of all ranks' x in
rank order, out[r·T:(r + 1)·T] = x_r. A copy: exact."""

import torch


def run_all(inputs_by_rank: list[list]) -> list:
    out = torch.cat([inp[0] for inp in inputs_by_rank], dim=0)
    return [out for _ in inputs_by_rank]
