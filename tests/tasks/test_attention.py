"""The attention tasks: ragged batches built by inputs.py, paged caches read through a block
table, sinks that only take softmax mass, and FLOP formulas that match the drawn lengths.
Everything runs on CPU in plain torch (the Triton starters are exercised by `arena eval`)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from core.harness.compare import compare
from core.model.formulas import evaluate_formula
from core.tasks.discovery import find_task
from tests.task_files import task_file, task_inputs

ROOT = Path(__file__).resolve().parents[2] / "tasks" / "attention"
TASKS = ["prefill_gqa", "decode_paged_gqa", "mla_decode", "prefill_sliding_window_sinks"]


def _mod(task: str, name: str):
    return task_file(ROOT / task, name)


def _inputs(task: str, axes: dict, seed: int = 0):
    return task_inputs(ROOT / task, axes, seed)


def _passes(task: str, out: torch.Tensor, ref: torch.Tensor) -> bool:
    c = find_task(f"attention/{task}").correctness
    return compare(out, ref, c.atol, c.rtol, c.min_match)["passed"]


@pytest.mark.parametrize("task", TASKS)
def test_inputs_match_declared_shapes_and_are_deterministic(task):
    t = find_task(f"attention/{task}")
    w = t.cpu.visible[0]
    a, b = _inputs(task, w.axes, 3), _inputs(task, w.axes, 3)
    for spec, x, y in zip(t.inputs, a, b):
        if spec.is_scalar:
            continue
        assert tuple(x.shape) == spec.concrete_shape(w.axes), spec.name
        assert str(x.dtype) == f"torch.{spec.dtype}", spec.name
        assert torch.equal(x, y), f"{spec.name} is not deterministic per seed"


@pytest.mark.parametrize("task", TASKS)
def test_baseline_passes_and_zeros_fail(task):
    t = find_task(f"attention/{task}")
    for w in t.cpu.visible:
        ins = _inputs(task, w.axes)
        ref = _mod(task, "reference").run(*ins)
        assert _passes(task, _mod(task, "baseline").run(*ins), ref)
        assert not _passes(task, torch.zeros_like(ref, dtype=torch.bfloat16), ref)
        assert not _passes(task, torch.full_like(ref, ref.mean().item(), dtype=torch.bfloat16), ref)


def test_prefill_ladder_lengths_are_shuffled_and_flops_count_causal_pairs():
    axes = {"B": 7, "L": 5, "K": 3, "HQ": 2, "HKV": 1, "D": 16}
    cu = _inputs("prefill_gqa", axes)[3]
    lengths = (cu[1:] - cu[:-1]).tolist()
    assert sorted(lengths) == sorted(5 * (1 + i % 3) for i in range(7))
    orders = {
        tuple((c[1:] - c[:-1]).tolist())
        for c in (_inputs("prefill_gqa", axes, s)[3] for s in range(6))
    }
    assert len(orders) > 1, "the order of the lengths is drawn per seed"
    t = find_task("attention/prefill_gqa")
    pairs = sum(s * (s + 1) // 2 for s in lengths)
    assert t.flops_for(type(t.cpu.visible[0])(axes)) == 4 * 2 * 16 * pairs


def test_prefill_attention_never_crosses_sequences():
    axes = {"B": 2, "L": 8, "K": 2, "HQ": 2, "HKV": 1, "D": 16}
    q, k, v, cu = _inputs("prefill_gqa", axes)
    ref = _mod("prefill_gqa", "reference").run(q, k, v, cu)
    first = int(cu[1])
    k2, v2 = k.clone(), v.clone()
    k2[first:] += 3.0
    v2[first:] -= 2.0
    ref2 = _mod("prefill_gqa", "reference").run(q, k2, v2, cu)
    assert torch.equal(ref[:first], ref2[:first])
    assert not torch.allclose(ref[first:], ref2[first:])


@pytest.mark.parametrize("task", ["decode_paged_gqa", "mla_decode"])
def test_paged_lengths_sum_exactly_and_garbage_pages_are_ignored(task):
    axes = (
        {"B": 5, "L": 20, "P": 4, "HQ": 4, "HKV": 2, "D": 16}
        if task == "decode_paged_gqa"
        else {"B": 5, "L": 20, "P": 4, "H": 4}
    )
    ins = _inputs(task, axes)
    table, lens = (ins[3], ins[4]) if task == "decode_paged_gqa" else (ins[2], ins[3])
    assert int(lens.sum()) == 5 * 20 and int(lens.min()) >= 20 - 15 and int(lens.max()) <= 20 + 15
    assert torch.equal(
        torch.sort(table.flatten()).values, torch.arange(table.numel(), dtype=torch.int32)
    )
    ref = _mod(task, "reference").run(*ins)
    # Overwrite every page slot past each sequence's length: the output must not move.
    caches = [1, 2] if task == "decode_paged_gqa" else [1]
    P = axes["P"]
    changed = list(ins)
    for i in caches:
        changed[i] = ins[i].clone()
    for b, n in enumerate(lens.tolist()):
        for j in range(table.shape[1]):
            for slot in range(P):
                if j * P + slot >= n:
                    for i in caches:
                        changed[i][int(table[b, j]), slot] = 100.0
    assert torch.equal(_mod(task, "reference").run(*changed), ref)
    assert _passes(task, _mod(task, "baseline").run(*changed), ref)
    # A kernel that ignores seq_lens and reads the whole table is wrong.
    full = list(changed)
    full[4 if task == "decode_paged_gqa" else 3] = torch.full_like(lens, table.shape[1] * P)
    assert not _passes(task, _mod(task, "reference").run(*full).to(torch.bfloat16), ref)


def test_mla_scale_is_deepseek_yarn_corrected():
    mscale = 0.1 * math.log(40) + 1
    assert math.isclose(
        _mod("mla_decode", "inputs").SCALE, mscale**2 / math.sqrt(192), rel_tol=1e-12
    )
    t = find_task("attention/mla_decode")
    assert math.isclose(
        [s for s in t.inputs if s.name == "scale"][0].value,
        mscale**2 / math.sqrt(192),
        rel_tol=1e-9,
    )


def test_sinks_take_mass_only_and_window_is_inclusive():
    axes = {"B": 1, "S": 24, "W": 8, "HQ": 2, "HKV": 1, "D": 16}
    q, k, v, sinks, cu, window = _inputs("prefill_sliding_window_sinks", axes)
    assert window == 8
    ref = _mod("prefill_sliding_window_sinks", "reference").run(q, k, v, sinks, cu, window)
    # A sink of -inf is plain sliding-window attention; any finite sink shrinks |o| uniformly per row.
    none = _mod("prefill_sliding_window_sinks", "reference").run(
        q, k, v, torch.full_like(sinks, -float("inf")), cu, window
    )
    ratio = ref.norm(dim=-1, keepdim=True) / none.norm(dim=-1, keepdim=True)
    assert torch.allclose(ref, none * ratio, atol=1e-5)
    assert bool((ratio < 1).all())
    assert not _passes("prefill_sliding_window_sinks", none.to(torch.bfloat16), ref), (
        "dropping the sinks must fail"
    )
    # Query 10 sees keys 3 .. 10 (window 8 including itself): key 2 must not matter, key 3 must.
    for j, matters in ((2, False), (3, True)):
        k2 = k.clone()
        k2[j] += 5.0
        out = _mod("prefill_sliding_window_sinks", "reference").run(q, k2, v, sinks, cu, window)
        assert (not torch.allclose(out[10], ref[10])) == matters
    # Every length is at least W, so the FLOP formula counts the attended pairs exactly.
    lengths = (cu[1:] - cu[:-1]).tolist()
    t = find_task("attention/prefill_sliding_window_sinks")
    w = type(t.cpu.visible[0])(axes)
    assert t.flops_for(w) == 4 * 2 * 16 * sum(sum(min(i + 1, 8) for i in range(s)) for s in lengths)


@pytest.mark.parametrize("task", TASKS)
def test_model_workloads_derive_every_axis(task):
    t = find_task(f"attention/{task}")
    assert t.model_workloads
    config = {
        "num_heads": 64,
        "num_kv_heads": 8,
        "head_dim": 64,
        "sliding_window": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    for section in t.model_workloads:
        for axes in section.workloads(config):
            assert set(axes) == set(t.axes)
            assert evaluate_formula(t.flops, axes) > 0
