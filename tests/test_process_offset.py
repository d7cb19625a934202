"""The process-offset diagnostic (bench/process_offset.py, docs/fidelity.md): pairs of fresh
processes time one workload in alternating rounds on inputs they share, and a pair's offset is
the median of its rounds' ratios. Its protocol runs on the host; what it measures is the GPU's."""

from __future__ import annotations

import random

import pytest

from tests.bench_module import bench_module

po = bench_module("process_offset")


def _pair(offset: float, ratios: list[float], outputs: list[int]) -> dict:
    rounds = [{"median_us": 1.0, "outputs": outputs}]
    return {"offset": offset, "round_ratios": ratios, "rounds": {"a": rounds, "b": rounds}}


def test_offsets_that_spread_wider_than_a_pairs_rounds_show_in_the_summary():
    pairs = [
        _pair(0.95, [0.94, 0.95, 0.96], [0]),
        _pair(1.04, [1.03, 1.04, 1.05], [po.PAGE + 4096]),
    ]
    got = po.summary(pairs)
    assert got["offsets_spread"] == pytest.approx(1.04 / 0.95 - 1)
    assert got["offset_farthest"] == pytest.approx(0.05)
    assert got["rounds_spread_median"] == pytest.approx(((0.96 / 0.94 - 1) + (1.05 / 1.03 - 1)) / 2)
    assert got["pages"] == [0, 4096]  # where in its 2 MiB page each output began
    assert got["offsets_ns"] == [(None, None), (None, None)]  # pairs measured before null calls
    assert got["after_other"] == [None, None]  # ... and before after_other


def test_the_offset_following_the_other_process_leaves_out_the_rounds_after_a_sides_own():
    """The turns go a,b then b,a: a side's first round of a turn follows its own last one.
    Without MPS that round reads slower (step 63), so a pair whose two processes are alike
    zig-zags over all its rounds, and reads 1.0 only on the rounds that follow the other's."""
    # a slow in the rounds it runs twice in a row (2, 4), b in its (1, 3)
    a = [{"median_us": us} for us in (6.8, 6.8, 7.1, 6.8, 7.1, 6.8)]
    b = [{"median_us": us} for us in (6.8, 7.1, 6.8, 7.1, 6.8, 7.1)]
    assert po.after_other({"a": a, "b": b}) == pytest.approx(1.0)
    assert po.after_other({"a": a[:1], "b": b[:1]}) is None


@pytest.mark.parametrize("variant", ["arena", "read_flush", "warm_pages", "no_flush"])
def test_a_pair_of_processes_alternates_rounds_on_the_parents_inputs(variant: str):
    import torch.multiprocessing

    from core.harness import timing

    plan = po.Plan("norm/add_rmsnorm", "T=16,H=256", "cpu", rounds=2, calls=3, cpu=None)
    task = po.fidelity._tasks([plan.task])[0]
    _, fresh = po.fidelity.baseline_and_inputs(
        task, po.workload_of(task, plan.workload, "cpu"), "cpu"
    )
    static = list(fresh(0))
    sources = [[a.clone() if hasattr(a, "clone") else a for a in fresh(1)]]
    flush = timing.flush_buffer(static[0].device)
    ctx = torch.multiprocessing.get_context("spawn")
    got = po.pair(ctx, plan, variant, static, sources, flush, random.Random(0))
    assert len(got["pids"]) == 2 and got["pids"][0] != got["pids"][1]
    assert len(got["round_ratios"]) == 2
    for side in ("a", "b"):
        assert [r["mode"] for r in got["rounds"][side]] == ["wall", "wall"]
        assert all(len(r["outputs"]) == 2 for r in got["rounds"][side])  # out and residual_out
        assert all(r["null_us"] > 0 for r in got["rounds"][side]), "each round times a null call"
    assert isinstance(got["offset_ns"], float) and isinstance(got["null_offset_ns"], float)


def test_an_unknown_workload_names_the_ones_there_are():
    task = po.fidelity._tasks(["norm/add_rmsnorm"])[0]
    with pytest.raises(SystemExit, match="T=16,H=256"):
        po.workload_of(task, "T=3,H=3", "cpu")


def test_warm_pages_touches_each_output_once_and_reads_one_byte_a_stride():
    import torch

    out, residual = torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4)
    sink: list[int] = []
    touched: list = []
    po._kept((out, residual), sink, touched, warm_pages=True)
    po._kept((out, residual), sink, touched, warm_pages=True)  # the same graph outputs again
    assert sink == [out.data_ptr(), residual.data_ptr()] * 2
    assert len(touched) == 2 and touched[0] is out and touched[1] is residual
    po._kept((out,), [], quiet := [], warm_pages=False)
    assert quiet == [], "only the warm_pages variant touches anything"
    big = torch.arange(3 * po.TOUCH_STRIDE, dtype=torch.uint8)
    po._touch(big)  # one byte of every stride: runs on a contiguous tensor of any dtype
    po._touch(torch.zeros(8, 8).t())  # a transposed one is left alone rather than copied
