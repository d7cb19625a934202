"""A candidate's torch work around its kernels is billed the way a GPU runs it
(core/harness/sim_torch.TorchCalls): a launch per torch call, however many ops the CPU
decomposes it into; gathers by the rows they read; views free; in-place tensors read and
written. Counted on fake tensors, so GPU sizes cost nothing here."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from core.harness.sim import torch_ops as sim_torch
from core.harness.sim.model import Constants, predict_side
from tests.sim_target import H200


def _count(fn, *make):
    return sim_torch.count_fake(fn, lambda: [m() for m in make])


def test_a_gather_from_a_large_table_is_billed_the_rows_it_reads():
    table = lambda: torch.empty(131072, 128, dtype=torch.bfloat16)
    index = lambda: torch.tensor([7], dtype=torch.int64)
    (op,) = _count(lambda t, i: t[i], table, index)
    assert op["bytes"] == 2 * 128 * 2 + 8, "a row read and written, and its index; not the table"


def test_views_and_reshapes_are_free_and_a_fused_call_is_one_launch():
    x = lambda: torch.empty(64, 4096, dtype=torch.bfloat16)
    w = lambda: torch.empty(4096, dtype=torch.bfloat16)
    ops = _count(
        lambda x, w: F.rms_norm(x.view(64, 1, 4096).reshape(64, 4096).t().t(), (4096,), w), x, w
    )
    assert [op["name"] for op in ops] == ["rms_norm"], (
        "the views cost nothing; rms_norm is one GPU kernel"
    )
    assert ops[0]["bytes"] == 2 * 64 * 4096 * 2 + 4096 * 2, (
        "its own inputs and output, not its CPU decomposition's"
    )


def test_an_in_place_op_reads_and_writes_its_tensor():
    x = lambda: torch.empty(1024, dtype=torch.float32)
    (op,) = _count(lambda x, y: x.add_(y), x, x)
    assert op["bytes"] == 3 * 4096, "x and y read, x written"


def test_each_torch_call_is_billed_a_launch_at_the_launch_cost():
    x = lambda: torch.empty(8, dtype=torch.float32)
    ops = _count(lambda x: (x * 2 + 1).exp(), x)
    assert len(ops) == 3 and all(op["glue"] for op in ops)
    c = Constants(glue_launch_us=4.0)
    side = predict_side([], ops, H200, c)
    assert abs(side["median_us"] - 3 * 4.0) < 0.01, "three tiny kernels: three launches"
    assert side["band"] == c.band, "the candidate's band, not the library formula's"
