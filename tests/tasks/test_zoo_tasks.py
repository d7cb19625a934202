"""The tasks the model zoo asked for (issue 43): gpt-oss's MXFP4 experts, local (sliding-window,
chunked) decode with sinks, MLA prefill, the fp8 KV cache's write and decode, and decode with
several query tokens. Each reduces to an older task where it should, and its formulas count the
work the drawn inputs hold. Plain torch on the CPU, tiny sizes (validate runs the starters)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.harness.compare import compare
from core.model.formulas import evaluate_formula
from core.tasks.discovery import find_task
from tests.task_files import task_file, task_inputs

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _mod(task: str, name: str):
    return task_file(TASKS / task, name)


def _inputs(task: str, axes: dict, seed: int = 0):
    return task_inputs(TASKS / task, axes, seed)


def _close(task: str, out: torch.Tensor, ref: torch.Tensor) -> bool:
    c = find_task(task).correctness
    return compare(out, ref, c.atol, c.rtol, c.min_match)["passed"]


# --- moe/mxfp4_moe -----------------------------------------------------------------------


def test_mxfp4_codes_decode_to_e2m1_values_times_the_group_scale():
    deq = _mod("moe/mxfp4_moe", "reference").dequantize
    packed = torch.tensor([[0x21, 0xF7] + [0] * 14], dtype=torch.uint8)  # 32 values
    scale = torch.tensor([[128]], dtype=torch.uint8)  # 2^(128 - 127) = 2
    values = deq(packed, scale)[0]
    assert values[:4].tolist() == [2 * 0.5, 2 * 1.0, 2 * 6.0, 2 * -6.0]  # low nibble first


def test_mxfp4_moe_clamps_gate_and_up_and_drops_no_slot():
    axes = {"T": 9, "H": 64, "I": 32, "E": 4, "K": 2, "S": 1}
    args = _inputs("moe/mxfp4_moe", axes)
    ref = _mod("moe/mxfp4_moe", "reference").run(*args)
    loose = _mod("moe/mxfp4_moe", "reference").run(*args[:-1], 1e9)  # no clamp
    assert not torch.allclose(ref, loose), "the inputs drive gate or up past the limit"
    base = _mod("moe/mxfp4_moe", "baseline")
    check = _mod("moe/mxfp4_moe", "check").check
    assert check([base.run(*args)], [ref], args)["out"]["passed"]
    few = dict(axes, T=1)  # T·K ≤ E: the per-slot path
    args1 = _inputs("moe/mxfp4_moe", few)
    assert check([base.run(*args1)], [_mod("moe/mxfp4_moe", "reference").run(*args1)], args1)[
        "out"
    ]["passed"]
    dropped = [*args]
    dropped[2] = args[2].clone()
    dropped[2][3, 1] = 0.0  # one slot of one token weighs nothing
    assert not check([base.run(*dropped)], [ref], args)["out"]["passed"]


# --- attention/decode_paged_local --------------------------------------------------------


def test_local_decode_without_sinks_over_the_whole_context_is_paged_decode():
    axes = {"B": 3, "L": 40, "P": 4, "HQ": 4, "HKV": 2, "D": 32, "W": 1000, "C": 1, "SK": 2}
    q, kc, vc, bt, lens, starts, sinks, span = _inputs("attention/decode_paged_local", axes)
    assert (starts == 0).all() and torch.isinf(sinks).all()
    local = _mod("attention/decode_paged_local", "reference").run(
        q, kc, vc, bt, lens, starts, sinks, span
    )
    plain = _mod("attention/decode_paged_gqa", "reference").run(q, kc, vc, bt, lens)
    torch.testing.assert_close(local, plain, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", [1, 2])
def test_local_decode_spans_and_formula_count_the_keys(mode):
    axes = {"B": 7, "L": 64, "P": 4, "HQ": 4, "HKV": 2, "D": 16, "W": 16, "C": mode, "SK": 1}
    q, kc, vc, bt, lens, starts, sinks, span = _inputs("attention/decode_paged_local", axes)
    keys = int((lens - starts).sum())
    t = find_task("attention/decode_paged_local")
    assert t.flops_for(type(t.cpu.visible[0])(axes)) == 4 * 4 * 16 * keys
    if mode == 2:
        assert (
            (starts % 16 == 0).all()
            and ((lens - starts) <= 16).all()
            and ((lens - starts) >= 1).all()
        )
    ref = _mod("attention/decode_paged_local", "reference").run(
        q, kc, vc, bt, lens, starts, sinks, span
    )
    base = _mod("attention/decode_paged_local", "baseline").run(
        q, kc, vc, bt, lens, starts, sinks, span
    )
    assert _close("attention/decode_paged_local", base, ref)
    no_sink = _mod("attention/decode_paged_local", "reference").run(
        q, kc, vc, bt, lens, starts, torch.full_like(sinks, float("-inf")), span
    )
    assert not torch.allclose(ref, no_sink), "a sink takes softmax mass"


# --- attention/mla_prefill ---------------------------------------------------------------


def test_mla_prefill_with_equal_head_sizes_is_prefill_at_that_scale():
    axes = {"B": 3, "L": 6, "K": 3, "H": 2, "DQK": 16, "DV": 16}
    q, k, v, cu, scale = _inputs("attention/mla_prefill", axes)
    got = _mod("attention/mla_prefill", "reference").run(q, k, v, cu, torch.tensor([16**-0.5]))
    want = _mod("attention/prefill_gqa", "reference").run(q, k, v, cu)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert 16**-0.5 <= float(scale) <= 2 * 16**-0.5


def test_mla_prefill_baseline_takes_the_given_scale():
    axes = {"B": 2, "L": 8, "K": 2, "H": 2, "DQK": 24, "DV": 16}
    q, k, v, cu, scale = _inputs("attention/mla_prefill", axes)
    ref = _mod("attention/mla_prefill", "reference").run(q, k, v, cu, scale)
    base = _mod("attention/mla_prefill", "baseline")
    assert _close("attention/mla_prefill", base.run(q, k, v, cu, scale), ref)
    assert not _close("attention/mla_prefill", base.run(q, k, v, cu, scale * 0.5), ref)


# --- elementwise/kv_cache_write_fp8 ------------------------------------------------------


def test_fp8_cache_write_check_allows_one_e4m3_step_and_no_stray_write():
    axes = {"T": 12, "Hkv": 2, "d": 16, "NB": 8, "BS": 4}
    args = _inputs("elementwise/kv_cache_write_fp8", axes)
    ref = _mod("elementwise/kv_cache_write_fp8", "reference").run(*[a.clone() for a in args])
    check = _mod("elementwise/kv_cache_write_fp8", "check").check
    base = _mod("elementwise/kv_cache_write_fp8", "baseline").run(*[a.clone() for a in args])
    assert all(v["passed"] for v in check(list(base), list(ref), args).values())
    slot = int(args[4][args[4] >= 0][0])
    for delta, passed in ((1, True), (2, False)):
        out = [c.clone() for c in ref]
        raw = out[0].view(torch.uint8).view(-1, 2 * 16)
        raw[slot] = torch.where(raw[slot] & 0x7F < 0x7E - 2, raw[slot] + delta, raw[slot] - delta)
        assert check(out, list(ref), args)["key_cache_out"]["passed"] is passed
    free = next(s for s in range(32) if s not in set(args[4].tolist()))
    out = [c.clone() for c in ref]
    out[1].view(torch.uint8).view(-1, 32)[free, 0] ^= 1
    verdict = check(out, list(ref), args)["value_cache_out"]
    assert not verdict["passed"] and "not in slot_mapping" in verdict["message"]


# --- attention/decode_paged_gqa_fp8kv and decode_paged_multi_query ------------------------


def test_fp8_cache_decode_is_decode_over_the_dequantized_cache():
    axes = {"B": 3, "L": 40, "P": 4, "HQ": 4, "HKV": 2, "D": 32}
    q, kc, vc, bt, lens, ks, vs = _inputs("attention/decode_paged_gqa_fp8kv", axes)
    got = _mod("attention/decode_paged_gqa_fp8kv", "reference").run(q, kc, vc, bt, lens, ks, vs)
    want = _mod("attention/decode_paged_gqa", "reference").run(
        q, kc.float() * ks, vc.float() * vs, bt, lens
    )
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    t = find_task("attention/decode_paged_gqa_fp8kv")
    bf16 = find_task("attention/decode_paged_gqa")
    w = t.gpu.visible[0]
    assert t.bytes_for(w) < 0.6 * bf16.bytes_for(w), "an fp8 cache is half the bytes"


def test_multi_query_decode_of_one_token_is_decode_and_queries_are_causal():
    axes = {"B": 3, "L": 40, "P": 4, "HQ": 4, "HKV": 2, "D": 32, "Q": 1}
    q, kc, vc, bt, lens = _inputs("attention/decode_paged_multi_query", axes)
    got = _mod("attention/decode_paged_multi_query", "reference").run(q, kc, vc, bt, lens)
    want = _mod("attention/decode_paged_gqa", "reference").run(q[:, 0], kc, vc, bt, lens)
    torch.testing.assert_close(got[:, 0], want, atol=1e-6, rtol=1e-6)
    axes["Q"] = 3
    q, kc, vc, bt, lens = _inputs("attention/decode_paged_multi_query", axes)
    ref = _mod("attention/decode_paged_multi_query", "reference").run(q, kc, vc, bt, lens)
    # query 0 must not see the two keys after it: changing them leaves its output alone
    kc2 = kc.clone()
    b, n = 0, int(lens[0])
    for t in (n - 2, n - 1):
        kc2[bt[b, t // 4], t % 4] = 0
    again = _mod("attention/decode_paged_multi_query", "reference").run(q, kc2, vc, bt, lens)
    torch.testing.assert_close(again[0, 0], ref[0, 0])
    assert not torch.allclose(again[0, 2], ref[0, 2])
    base = _mod("attention/decode_paged_multi_query", "baseline").run(q, kc, vc, bt, lens)
    assert _close("attention/decode_paged_multi_query", base, ref)
    t = find_task("attention/decode_paged_multi_query")
    assert evaluate_formula(t.flops, {**axes, "B": 3, "L": 40}) == 4 * 4 * 32 * int(
        sum(3 * int(n) - 3 for n in lens)
    ), "Q·n − Q(Q−1)/2 pairs per sequence, summed"
