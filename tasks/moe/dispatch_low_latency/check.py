"""Low-latency dispatch judged on the valid slots only, in any order within an expert.

recv_count exactly; for each local expert e, recv_src[e, :count_e] must be exactly the set of
tokens s·T + t that chose e (any order: DeepEP's slots follow atomic arrival order); then
every valid slot's row is matched with its token's expected row and judged as fp8 group
quantization after dequantization (core/harness/fp8_check.py: scales within 1% of
max(absmax, 1e-4)/448, out·scale within half an e4m3 step of x plus 1%), so a kernel that
multiplies by 448/amax where the reference divides may differ by one fp8 step at rounding
boundaries. Slots ≥ count_e are free."""

import torch

from core.harness.fp8_check import check_group_quant


def _fail(message):
    return {"passed": False, "message": message}


def check(outputs, expected, inputs):
    recv_x, recv_scale, recv_count, recv_src = (t.cpu() for t in outputs)
    want_count, want_src = expected[2].cpu(), expected[3].cpu()
    q_ref, s_ref = expected[4].cpu(), expected[5].cpu()
    El, slots = want_src.shape
    result = {}
    if not torch.equal(recv_count.long(), want_count.long()):
        e = int((recv_count.long() != want_count.long()).nonzero()[0])
        result["recv_count"] = _fail(
            f"local expert {e}: count {int(recv_count[e])}, expected {int(want_count[e])} "
            f"(tokens, over all source ranks, with that expert among their top-K)"
        )
        for name in ("recv_x", "recv_x_scale", "recv_src"):
            result[name] = _fail("not judged: recv_count is wrong")
        return result
    result["recv_count"] = {"passed": True, "max_abs_err": 0.0}
    valid = torch.arange(slots).unsqueeze(0) < want_count.long().unsqueeze(1)  # [El, slots]
    expert = torch.arange(El).unsqueeze(1).expand(El, slots)[valid]
    n_tok = slots + 1
    key_got = expert * n_tok + recv_src[valid].long().clamp(-1, slots)
    key_want = expert * n_tok + want_src[valid].long()
    order_got = torch.argsort(key_got, stable=True)
    sorted_got, sorted_want = key_got[order_got], torch.sort(key_want).values
    if not torch.equal(sorted_got, sorted_want):
        i = int((sorted_got != sorted_want).nonzero()[0])
        e = int(sorted_want[i]) // n_tok
        seg = expert == e
        have = set(recv_src[valid][seg].tolist())
        need = set(want_src[valid][seg].tolist())
        result["recv_src"] = _fail(
            f"local expert {e} holds the wrong tokens: missing {sorted(need - have)[:5]}, unexpected {sorted(have - need)[:5]} "
            f"(recv_src = source_rank·T + token index; each token that chose the expert exactly once, any order)"
        )
        result["recv_x"] = _fail("not judged: recv_src is wrong")
        result["recv_x_scale"] = _fail("not judged: recv_src is wrong")
        return result
    result["recv_src"] = {"passed": True, "max_abs_err": 0.0}
    # expected valid rows are expert-major in ascending key order, so sorted_want's order is theirs
    got_x = recv_x.view(torch.uint8)[valid][order_got].view(torch.float8_e4m3fn)
    got_s = recv_scale[valid][order_got]
    v = check_group_quant([got_x, got_s], [q_ref, s_ref], [])
    result["recv_x"], result["recv_x_scale"] = v["out"], v["scales"]
    for name in ("recv_x", "recv_x_scale"):
        if not result[name]["passed"]:
            result[name]["message"] = (
                f"valid slots (matched by recv_src): {result[name].get('message', '')}"
            )
    return result
