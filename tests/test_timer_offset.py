"""The timer offset (docs/fidelity.md, "The timer offset"): an identity evaluation's two sides
run in two processes, whose medians on a small graph-replayed kernel can keep an additive offset
for the whole evaluation. bench/fidelity.py reads it from the identity results (the peaks
table's `timer_offset_us` is its 95th percentile) and re-scores stored results' intervals with
it, as the arena scores new ones (core/evaluation/scoring.py, `offset_widened`)."""

from __future__ import annotations

import pytest

from tests.bench_module import bench_module

bench_module("timer_check")  # fidelity.py imports it from beside itself
fidelity = bench_module("fidelity")


def _workload(candidate_us: float, baseline_us: float, mode: str = "graph") -> dict:
    ratio = baseline_us / candidate_us
    return {
        "mode": mode,
        "candidate_us": candidate_us,
        "baseline_us": baseline_us,
        "round_ratios": [ratio, ratio],
        "interval": [ratio * 0.995, ratio * 1.005],
    }


def _result(*workloads: dict) -> dict:
    return {
        "status": "passed",
        "speedup": 0.97,
        "interval": [0.96, 0.98],
        "workloads": list(workloads),
    }


def test_an_evaluations_offset_is_the_median_gap_of_its_small_graphed_workloads():
    entry = _result(
        _workload(4.16, 3.90),  # +0.26
        _workload(6.50, 6.24),  # +0.26
        _workload(5.38, 5.25),  # +0.13
        _workload(71.6, 71.4, mode="queued"),  # long and queued: not read
        _workload(50.9, 50.6),  # graphed, over 25 µs: not read
    )
    assert fidelity.evaluation_offset_us(entry) == pytest.approx(0.26)
    assert fidelity.evaluation_offset_us(_result(_workload(4.0, 3.9))) is None  # one is no median


def test_the_offsets_percentiles_come_from_every_named_call():
    raws = {
        f"ahead_{i}": {"identity": [_result(_workload(4.0 + d, 4.0), _workload(6.0 + d, 6.0))]}
        for i, d in enumerate([0.0, -0.1, 0.2, 0.05, -0.3])
    }
    raws["before_x"] = {"identity": [_result(_workload(9.0, 4.0), _workload(9.0, 6.0))]}
    got = fidelity.offsets(raws, ("ahead",))
    assert got["results"] == 5 and got["max_us"] == pytest.approx(0.3)
    assert got["median_us"] == pytest.approx(0.1)


def test_a_stored_result_is_rescored_with_the_devices_timer_offset():
    entry = _result(_workload(5.12, 5.0), _workload(6.40, 6.24))
    again = fidelity.rescored(entry, timer_offset_us=0.21)
    low, high = again["interval"]
    assert low < 1.0 < high, "the offset makes the identity's 2.4% a tie"
    assert again["interval_reported"] == [0.96, 0.98]
    assert fidelity.rescored(entry)["interval"] == [0.96, 0.98]  # no offset: as reported


def test_the_settings_table_gives_each_settings_runs_with_their_offsets(tmp_path):
    import json

    def run(arm: str, n: int, *entries: dict) -> None:
        folder = tmp_path / arm / f"run{n}"
        folder.mkdir(parents=True)
        (folder / "identity.json").write_text(json.dumps({"identity": list(entries)}))

    def task(name: str, speedup: float, gap_us: float) -> dict:
        small = [_workload(6.0 + gap_us, 6.0), _workload(9.0 + gap_us, 9.0)]
        return {**_result(*small), "task": name, "speedup": speedup}

    run("default", 1, task("norm/add_rmsnorm", 0.977, 0.128), task("activation/silu_mul", 1.0, 0))
    run("default", 2, task("norm/add_rmsnorm", 1.01, -0.064))
    run("inside", 1, {"task": "norm/add_rmsnorm", "status": "timeout"})
    table = fidelity.settings_table(tmp_path, ["default", "inside"]).splitlines()
    assert table[0] == (
        "| setting | activation/silu_mul: identity (offset, ns) "
        "| norm/add_rmsnorm: identity (offset, ns) |"
    )
    assert table[2] == "| default | 1.000 (0) | 0.977 (+128), 1.010 (-64) |"
    assert table[3] == "| inside |  | timeout |"
    with pytest.raises(SystemExit, match="new_stream: no run"):
        fidelity.settings_table(tmp_path, ["default", "new_stream"])


def test_each_machines_identity_table_is_its_own_section_of_the_page(tmp_path):
    """`report --doc PAGE --section identity-h100` rewrites that machine's generated part and
    leaves the H200's (`identity`) as it was; a page without the section says which is missing."""
    page = tmp_path / "fidelity.md"
    h200, h100 = fidelity.markers("identity"), fidelity.markers("identity-h100")
    page.write_text(
        f"top\n{h200[0]}\nH200 table\n{h200[1]}\nmiddle\n{h100[0]}\nold\n{h100[1]}\nend\n"
    )
    fidelity.write_doc(page, "H100 table", "identity-h100")
    assert page.read_text() == (
        f"top\n{h200[0]}\nH200 table\n{h200[1]}\nmiddle\n{h100[0]}\nH100 table\n{h100[1]}\nend\n"
    )
    with pytest.raises(SystemExit, match="identity-mi300x:begin"):
        fidelity.write_doc(page, "x", "identity-mi300x")
