"""Counting Triton kernels in the interpreter (core/harness/sim_count.py): the pieces that need
no interpreter. The kernels themselves are counted in tests/test_sim_model.py."""

from __future__ import annotations

import numpy as np
import pytest

from core.harness.sim_count import SECTOR, unique_sectors


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
