"""An fp8 cache write judged code by code: every slot slot_mapping does not name must keep its
old byte exactly; a written value may be the reference's e4m3 value or one of its two
neighbours on the e4m3 grid (dividing by the scale or multiplying by its reciprocal in
float32 moves a value across a rounding boundary now and then; ±1 code is that, and no more)."""

import torch


def _index(codes):
    """e4m3fn codes as a signed position on the grid: magnitude code, negated for negatives
    (+0 and -0 are both 0)."""
    c = codes.to(torch.int32)
    mag = c & 0x7F
    return torch.where(c >= 0x80, -mag, mag)


def check(outputs, expected, inputs):
    slot_mapping = inputs[4].to(expected[0].device)
    verdicts = {}
    for name, got, want in zip(("key_cache_out", "value_cache_out"), outputs, expected):
        NB, BS, H, d = want.shape
        g = got.to(want.device).view(torch.uint8).view(NB * BS, H * d)
        w = want.view(torch.uint8).view(NB * BS, H * d)
        written = torch.zeros(NB * BS, dtype=torch.bool, device=w.device)
        written[slot_mapping[slot_mapping >= 0]] = True
        untouched = (g[~written] != w[~written]).any(dim=1)
        off = (_index(g[written]) - _index(w[written])).abs()
        if bool(untouched.any()):
            slot = int((~written).nonzero()[untouched.nonzero()[0]].item())
            verdicts[name] = {
                "passed": False,
                "message": f"slot {slot} is not in slot_mapping but changed ({int(untouched.sum())} such slots): only the named slots may be written",
            }
        elif off.numel() and int(off.max()) > 1:
            verdicts[name] = {
                "passed": False,
                "message": f"{int((off > 1).sum())} written value(s) more than one e4m3 step from x / scale (worst {int(off.max())} steps)",
                "max_abs_err": float(off.max()),
            }
        else:
            verdicts[name] = {"passed": True}
    return verdicts
