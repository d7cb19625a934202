"""Routed expert ids, K distinct per token: the top-K of random keys, uniform (S = 1) or with
E/16 hot experts whose keys get +0.5 (S = 2: each hot expert is then chosen by about half
the tokens at K/E = 1/16), vectorised for the timed refills."""

import torch


def make_inputs(axes, generator):
    T, K, E, BM, S = axes["T"], axes["K"], axes["E"], axes["BM"], axes["S"]
    dev = generator.device
    keys = torch.rand(T, E, generator=generator, device=dev)
    if S == 2:
        hot = torch.rand(E, generator=generator, device=dev).argsort()[: max(1, E // 16)]
        keys[:, hot] += 0.5
    ids = keys.topk(K, dim=1).indices.to(torch.int32)
    return [ids, E, BM]
