"""Anchoring a `sim:` prediction to the measured baseline (core/devices/sim/anchors.py): the
candidate's predicted time is model(candidate) × measured(baseline) / model(baseline), so the
predicted speedup is model(baseline) / model(candidate). A task's baseline.py submitted as the
candidate is predicted at exactly its measured time (1.00×) whatever the model's error on it,
and an anchor counted from other code than today's is not used. docs/simulation.md, "The
identity"."""

from __future__ import annotations

import pytest

from core.devices.sim import anchors
from core.evaluation.evaluator import Evaluator
from core.harness.sim.model import Constants, predict_side
from core.harness.sim.stage import anchor_candidate
from core.tasks.discovery import find_task
from tests.sim_target import H200


@pytest.fixture(scope="module")
def sim_h200():
    """One warm `sim:h200` harness for every task below (each evaluation forks its own workers)."""
    with Evaluator("sim:h200") as evaluator:
        yield evaluator


@pytest.mark.parametrize(
    "task_id,impl",
    [
        ("activation/silu_mul", "liger"),  # Liger's Triton kernel, counted in the interpreter
        # Liger's fused add + RMSNorm binds libdevice's rsqrt at import, before the worker's
        # interpreter (the harness preloads it): it failed correctness here until the patch
        # reached names bound earlier (triton_libdevice._rebind_imported)
        ("norm/add_rmsnorm", "liger"),
        ("norm/rmsnorm_fp8_quant", "liger"),
        ("elementwise/rope", "liger"),
        ("elementwise/rope_qknorm", "liger"),
        ("activation/silu_mul_fp8_quant", "liger"),
        ("moe/route_topk_softmax", "torch"),  # a torch composition, priced by the library model
    ],
)
def test_the_baseline_as_the_candidate_scores_exactly_1x_on_sim_h200(sim_h200, task_id, impl):
    if impl == "liger":
        pytest.importorskip("liger_kernel")
    task = find_task(task_id)
    result = sim_h200.evaluate(task, task.file("baseline.py"))
    assert result.status == "passed", [s.message for s in result.stages]
    measured = [w for w in result.workloads if w.baseline.get("source") == "measured"]
    assert measured, "the task's workloads have measured H200 baselines"
    for w in measured:
        assert w.candidate["anchor"]["impl"] == impl, w.notes
        assert any(n.startswith("anchored:") for n in w.notes or []), w.notes
        # the same implementation on both sides: predicted at exactly its measured time
        assert w.candidate["median_us"] == pytest.approx(w.baseline["median_us"], rel=1e-9)
    # a prediction has no noise to tie inside: its band stays on the workloads (docs/rl.md)
    assert result.speedup_interval is None
    assert all(w.band is not None for w in result.workloads)


def test_the_anchored_speedup_is_the_models_baseline_over_its_candidate():
    c = Constants()
    cand_ops = [{"name": "mul", "flops": 0.0, "bytes": 4e8, "dtype": "bf16", "glue": True}]
    base_ops = [
        {"name": "mul", "flops": 0.0, "bytes": 6e8, "dtype": "bf16", "glue": True},
        {"name": "add", "flops": 0.0, "bytes": 3e8, "dtype": "bf16", "glue": True},
    ]
    candidate = predict_side([], cand_ops, H200, c)
    model_c = candidate["median_us"]
    model_b = predict_side([], base_ops, H200, c)["median_us"]
    measured_b = 3.7 * model_b  # the model is far off the baseline: that error cancels
    baseline = {"median_us": measured_b, "impl": "torch", "band": 0.02}
    anchor = {"impl": "torch", "launches": [], "torch_ops": base_ops, "measured_us": measured_b}
    note = anchor_candidate(candidate, anchor, baseline, H200, c, False, {"anchored_band": 0.1})
    assert note and note.startswith("anchored:")
    assert baseline["median_us"] / candidate["median_us"] == pytest.approx(model_b / model_c)
    assert candidate["band"] == pytest.approx(0.1), "the anchored fit's band"
    # divided by another implementation than the anchor's: the anchor's own band compounds
    other = predict_side([], cand_ops, H200, c)
    anchor_bmm = {**anchor, "band": 0.05}
    anchor_candidate(
        other, anchor_bmm, {**baseline, "impl": "torch-bmm"}, H200, c, False, {"anchored_band": 0.1}
    )
    assert other["band"] == pytest.approx(1.1 * 1.05 - 1)


def test_an_anchor_counted_from_other_code_is_not_used_and_says_how_to_recount(monkeypatch):
    table = {
        "gpus": {
            "h200": {
                "norm/add_rmsnorm": {
                    "impl": "liger",
                    "code_sha256": "a" * 64,
                    "counter_sha256": anchors.counter_code(),
                    "workloads": {"H=4096,T=2048": {"launches": [], "torch_ops": []}},
                }
            }
        }
    }
    monkeypatch.setattr(anchors, "load_anchors", lambda: table)
    axes = {"T": 2048, "H": 4096}
    stale = anchors.anchor_for("h200", "norm/add_rmsnorm", axes, "b" * 64)
    assert stale and stale["stale"] and "the task's baseline" in stale["note"]
    assert anchors.RECOUNT in stale["note"]
    table["gpus"]["h200"]["norm/add_rmsnorm"]["code_sha256"] = "b" * 64
    table["gpus"]["h200"]["norm/add_rmsnorm"]["counter_sha256"] = "c" * 64
    stale = anchors.anchor_for("h200", "norm/add_rmsnorm", axes, "b" * 64)
    assert stale and stale["stale"] and "counting code" in stale["note"]


def test_every_bundled_anchor_is_of_todays_baseline_and_counting_code():
    """Fails, naming the command, once a baseline or the sim's counting code changes: the
    anchors are recounted with it (or the evaluation silently loses its anchor)."""
    from core.devices.sim.provenance import task_code

    table = anchors.load_anchors()["gpus"].get("h200", {})
    assert table, "core/data/sim_anchors.json has the H200's anchors"
    stale = {
        task_id: entry["code_sha256"] != task_code(find_task(task_id).path).code_sha256
        or entry["counter_sha256"] != anchors.counter_code()
        for task_id, entry in table.items()
    }
    assert not any(stale.values()), (
        f"stale anchors {sorted(t for t, s in stale.items() if s)}: `{anchors.RECOUNT}`"
    )
