"""Cheat (norm/add_rmsnorm): two outputs that share one buffer: residual_out is returned as the
same tensor as out (a kernel that writes one of them and returns it twice). Defense: outputs
may not share storage with each other."""


def run(x, residual, weight, eps):
    r = x.float() + residual.float()
    out = r.to(x.dtype)
    return out, out
