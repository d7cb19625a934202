"""The candidate's side of a `sim:` device's performance stage (core/harness/sim/predict.py):
GPU-sized inputs made at memory speed, and one AOT compile per kernel configuration."""

from __future__ import annotations

import torch

from core.harness.sim import predict as sim_predict
from core.harness.sim.gpu_inputs import TILE, UNTOUCHED_BYTES

BIG = UNTOUCHED_BYTES // 4 + 4 * TILE  # float32 elements: just above the unwritten threshold


def quantizing_generator(axes: dict[str, int], gen: torch.Generator) -> list:
    """A task generator in the style of the fp8 GEMMs': large weights drawn, scaled and
    quantized per block, plus routing structure derived from small random draws."""
    n = axes["n"]
    w = torch.randn((n // 128, 128), generator=gen) * 0.02
    scale = w.abs().amax(dim=-1).clamp_min(1e-4) / 448.0
    q = (w / scale[:, None]).to(torch.bfloat16)
    experts = torch.rand(64, generator=gen).topk(8).indices.to(torch.int32)
    return [q, scale, experts]


def test_a_generators_large_floats_are_left_unwritten_and_its_structure_is_real():
    workload = {"axes": {"n": BIG}, "shapes": {}}
    q, scale, experts = sim_predict.gpu_inputs([], workload, seed=1, custom=quantizing_generator)
    assert q.shape == (BIG // 128, 128) and q.dtype == torch.bfloat16 and q.is_contiguous()
    assert scale.shape == (BIG // 128,) and scale.dtype == torch.float32
    # the scale derived from unwritten weights is computed from zeros: the clamp ran for real
    assert torch.all(scale == torch.tensor(1e-4) / 448.0)
    assert not torch.any(q.view(-1)[-TILE:].float()), "the quantized weights were never computed"
    # integer structure derived from small draws is real: eight distinct experts of 64
    assert (
        experts.dtype == torch.int32
        and len(set(experts.tolist())) == 8
        and 0 <= experts.min()
        and experts.max() < 64
    )


def test_a_large_random_fill_keeps_random_values_in_its_first_block_only():
    def generator(axes: dict[str, int], gen: torch.Generator) -> list:
        return [
            torch.empty(axes["n"]).normal_(generator=gen),
            torch.randn(axes["n"], generator=gen),
        ]

    filled, drawn = sim_predict.gpu_inputs(
        [], {"axes": {"n": BIG}, "shapes": {}}, seed=1, custom=generator
    )
    for t in (filled, drawn):
        assert t.shape == (BIG,) and t[:TILE].std() > 0.5
        assert not torch.any(t[TILE:])


def test_integers_derived_from_unwritten_floats_are_computed_and_in_range():
    def generator(axes: dict[str, int], gen: torch.Generator) -> list:
        logits = torch.randn((axes["n"] // 1024, 1024), generator=gen) * 2.0
        return [logits, logits.argmax(dim=-1)]

    logits, best = sim_predict.gpu_inputs(
        [], {"axes": {"n": BIG}, "shapes": {}}, seed=1, custom=generator
    )
    assert best.dtype == torch.int64 and best.shape == (BIG // 1024,)
    assert 0 <= int(best.min()) and int(best.max()) < 1024


def test_small_tensors_are_generated_as_written():
    def generator(axes: dict[str, int], gen: torch.Generator) -> list:
        x = torch.randn(axes["n"], generator=gen)
        return [x, x * 2.0]

    gen = torch.Generator().manual_seed(1)
    expected = generator({"n": 1000}, gen)
    got = sim_predict.gpu_inputs([], {"axes": {"n": 1000}, "shapes": {}}, seed=1, custom=generator)
    for e, g in zip(expected, got):
        assert torch.equal(e, g)
