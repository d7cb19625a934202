"""Counting Triton kernels in the interpreter (core/harness/sim_count.py): the pieces that need
no interpreter. The kernels themselves are counted in tests/test_sim_model.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.harness.sim_count import SECTOR, stratified, unique_sectors


@pytest.mark.parametrize("addrs", [
    np.arange(1 << 16, dtype=np.uint64) * 2 + 1000,  # one row, in order
    (np.arange(64)[:, None] * 60000 + np.arange(512)[None, :] * 4).reshape(-1).astype(np.uint64),  # a row-major tile
    np.array([96, 64, 64, 0, 2**40], dtype=np.uint64),  # out of order: the sorting path
    np.array([0, 31, 32, 95], dtype=np.uint64),
    np.array([64], dtype=np.uint64),
    np.array([], dtype=np.uint64),
])
def test_the_sectors_an_access_touches_are_the_distinct_32_byte_blocks_in_order(addrs):
    assert np.array_equal(unique_sectors(addrs), np.unique(addrs // SECTOR))


def test_a_sample_spreads_over_the_grids_x_axis_even_when_the_stride_is_a_multiple_of_it():
    gx = 64  # query blocks of a causal attention launch, x fastest; 4 x 32 sequences and heads
    picks = stratified(gx * 128, 8, gx=gx)
    xs = {i % gx for i in picks}
    assert len(xs) >= 8, "not every pick at x = 0: the causal kernel's work grows with x"
    assert max(picks) == gx * 128 - 1 and len(picks) >= 8
    assert stratified(100, 8) == stratified(100, 8, gx=1), "a 1-D grid is sampled as before"
