"""Counting Triton kernels in the interpreter (core/harness/sim/count.py): the pieces that need
no interpreter. The kernels themselves are counted in tests/test_sim_model.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.harness.sim.count import MAX_SAMPLE, SECTOR, Counting, Launch, stratified, unique_sectors


@pytest.mark.parametrize(
    "addrs",
    [
        np.arange(1 << 16, dtype=np.uint64) * 2 + 1000,  # one row, in order
        (np.arange(64)[:, None] * 60000 + np.arange(512)[None, :] * 4)
        .reshape(-1)
        .astype(np.uint64),  # a row-major tile
        np.array([96, 64, 64, 0, 2**40], dtype=np.uint64),  # out of order: the sorting path
        np.array([0, 31, 32, 95], dtype=np.uint64),
        np.array([64], dtype=np.uint64),
        np.array([], dtype=np.uint64),
    ],
)
def test_the_sectors_an_access_touches_are_the_distinct_32_byte_blocks_in_order(addrs):
    assert np.array_equal(unique_sectors(addrs), np.unique(addrs // SECTOR))


def test_a_sample_spreads_over_every_axis_of_the_grid_even_when_the_stride_is_a_multiple_of_it():
    gx, gy = (
        64,
        128,
    )  # causal query blocks (x, fastest) of 128 sequence-heads; or experts × row tiles
    picks = stratified(gx * gy * 4, 8)
    assert len({i % gx for i in picks}) >= 6, (
        "picks landed on a few x: a causal kernel's work grows with x"
    )
    assert len({(i // gx) % gy for i in picks}) >= 6, (
        "picks landed on a few y: a worst-case MoE grid works only at y = 0"
    )
    assert max(picks) == gx * gy * 4 - 1, "the last program, where tails land, is always counted"
    assert stratified(1000, 8) == stratified(1000, 8), (
        "the same launch is sampled the same way every run"
    )


def _early_exit_launch(experts: int, row_tiles: int) -> Launch:
    """A worst-case grouped-GEMM grid: (expert, row tile, column tile); only row tile 0 of each
    expert has rows, every other program returns after reading its expert's offsets."""
    launch = Launch("grouped", lambda: None, (experts, row_tiles, 4), {}, {}, [])
    counting = Counting()  # not entered: that would patch the interpreter for this whole process

    def run_one(x: int, y: int, z: int) -> None:
        program = counting.program
        assert program is not None
        program.load_sectors += 2 if y else 2 + 64 * 32  # the offsets; the K loop's tiles
        program.dot_flops["bf16"] = 0.0 if y else 2.0 * 64 * 128 * 2048

    counting.run_programs(launch, run_one)
    return launch


def test_a_grid_whose_programs_mostly_return_early_is_sampled_until_the_busy_ones_are_seen():
    launch = _early_exit_launch(128, 128)
    truth = (
        128 * 4 * 2.0 * 64 * 128 * 2048 / launch.num_programs
    )  # busy programs' FLOPs over all of them
    counted = launch.summary()["per_program"]["dot_flops"]["bf16"]
    assert len(launch.programs) > MAX_SAMPLE, "the sample grew past 32: most programs were idle"
    assert 0.5 * truth < counted < 2 * truth
