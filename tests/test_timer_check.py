"""The timer check's verdicts (bench/timer_check.py, docs/fidelity.md): a workload where the
arena's timer and do_bench differ by more than 3% counts as explained only where a control that
changes one thing closes the gap; anything else stays unexplained."""

from __future__ import annotations

from tests.bench_module import bench_module

tc = bench_module("timer_check")


def test_within_three_percent_agrees():
    assert tc.explain({"queued": 100.0, "do_bench": 102.0}) == ("0.980", "agrees", "")


def test_a_launch_bound_gap_is_explained_when_do_bench_with_lead_flushes_reads_as_the_arena():
    ratio, verdict, why = tc.explain({"queued": 80.0, "do_bench": 300.0, "do_bench_led": 81.0})
    assert (ratio, verdict) == ("0.267", "explained")
    assert why.startswith("do_bench times the host's launch")


def test_fresh_inputs_explain_a_gap_when_the_arena_on_fixed_inputs_reads_as_do_bench():
    med = {"queued": 90.0, "do_bench": 100.0, "do_bench_led": 100.0, "queued_fixed": 99.0}
    assert tc.explain(med)[2].startswith("the arena's fresh inputs (")


def test_both_differences_together_count_only_when_both_controls_meet():
    med = {"queued": 120.0, "do_bench": 100.0, "do_bench_led": 108.0, "queued_fixed": 109.0}
    assert tc.explain(med)[2].startswith("the arena's fresh inputs and do_bench's launch")
    med["queued_fixed"] = 115.0
    assert tc.explain(med)[1] == "unexplained"


def test_a_lower_clock_under_do_bench_is_named():
    med = {"queued": 88.0, "do_bench": 100.0, "clock_queued": 1980.0, "clock_do_bench": 1700.0}
    assert tc.explain(med)[1:] == ("explained", "the SM clock: 1980 against 1700 MHz")


def test_a_clock_explains_only_the_side_it_slowed_and_only_as_much_as_it_fell():
    # the arena slower at the higher clock: not the clock
    med = {"queued": 113.0, "do_bench": 100.0, "clock_queued": 1980.0, "clock_do_bench": 1900.0}
    assert tc.explain(med)[1] == "unexplained"
    # a gap larger than the clocks' ratio allows
    med = {"queued": 70.0, "do_bench": 100.0, "clock_queued": 1980.0, "clock_do_bench": 1800.0}
    assert tc.explain(med)[1] == "unexplained"


def test_a_reference_noisier_than_the_gap_is_inconclusive_not_explained():
    med = {"queued": 87.0, "do_bench": 100.0, "do_bench_led": 100.0}
    assert tc.explain(med, {"queued": 0.01, "do_bench": 0.32})[1:] == (
        "inconclusive",
        "do_bench's own two rounds differ by 32%",
    )
    assert tc.explain(med, {"queued": 0.01, "do_bench": 0.05})[1] == "unexplained"


def test_a_graphed_workload_is_compared_with_do_bench_cudagraph():
    med = {"queued": 9.0, "do_bench": 80.0, "graph": 6.0, "do_bench_cudagraph": 3.0}
    assert tc.explain(med) == ("2.000", "unexplained", "")
    # warm L2 and fixed inputs, less the replay's own cost, read as do_bench_cudagraph
    med.update(graph_warm=4.5, graph_floor=1.5)
    assert tc.explain(med)[2].startswith("cold L2 and fresh inputs, and a replay's own 1.5 µs")
    # a residual within two events' resolution (two medians subtracted) still counts
    med.update(graph_warm=5.3)
    assert tc.explain(med)[1] == "explained"
    med.update(graph_warm=6.0)
    assert tc.explain(med)[1] == "unexplained"


def test_the_table_counts_each_verdict():
    entries = [
        {"task": "t", "label": "a", "rounds_us": {"queued": [100.0], "do_bench": [101.0]}},
        {
            "task": "t",
            "label": "b",
            "rounds_us": {"queued": [80.0], "do_bench": [300.0], "do_bench_led": [80.5]},
        },
        {"task": "t", "label": "c", "rounds_us": {"queued": [80.0], "do_bench": [100.0]}},
        {"task": "t", "label": "d", "error": "RuntimeError: out of memory"},
    ]
    lines, counts = tc.timer_table(entries)
    assert counts == {"agrees": 1, "explained": 1, "inconclusive": 0, "unexplained": 1}
    assert "out of memory" in lines[-1]


def test_each_task_gets_its_workloads_verdicts_for_the_identity_table():
    entries = [
        {"task": "a", "label": "x", "rounds_us": {"queued": [100.0], "do_bench": [101.0]}},
        {"task": "a", "label": "y", "rounds_us": {"queued": [80.0], "do_bench": [100.0]}},
        {"task": "b", "label": "z", "error": "RuntimeError: out of memory"},
    ]
    assert tc.per_task(entries) == {"a": "1 within 3%, 1 unexplained"}
