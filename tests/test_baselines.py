"""Production baselines: task.yaml's `baselines:` lists the implementations a baseline.py
tries (best first), the baseline's process reports which one ran, every result records it
(`baseline_impl`, `baseline_kind`), and the speed of light includes the launch floor."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from core.devices.device import DeviceInfo, Peaks
from core.evaluation import scoring
from core.evaluation.verdict import assemble, baseline_ran
from core.model import events
from core.tasks.discovery import discover
from core.tasks.fields import TaskError
from core.tasks.spec import load_task
from tests.task_files import load_module

_module = load_module


@pytest.mark.parametrize("task", [t for t in discover() if not t.multi_rank], ids=lambda t: t.id)
def test_baseline_py_offers_exactly_the_declared_implementations_in_order(task):
    """A baseline.py with IMPLS names task.yaml's `baselines:` in the same order (None where
    a library does not import here), ends with one that needs only torch, and reports IMPL;
    one without IMPLS has a single declared implementation."""
    module = _module(task.file("baseline.py"))
    declared = [b.impl for b in task.baselines]
    impls = getattr(module, "IMPLS", None)
    if impls is None:
        assert len(declared) == 1
        return
    assert list(impls) == declared
    assert impls[declared[-1]] is not None, (
        "the last implementation is the torch fallback: it always imports"
    )
    assert module.IMPL in declared


def _task_copy(tmp_path: Path, fixture_tasks: Path, edit) -> Path:
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    edit(spec, folder)
    (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def _two_impls(spec: dict, folder: Path) -> None:
    spec["baseline_kind"] = "vendor_kernel_library"
    spec["baselines"] = [
        {
            "impl": "fastlib",
            "kind": "vendor_kernel_library",
            "calls": "fastlib.axpy (never importable here)",
        },
        {"impl": "torch", "kind": "torch_composition", "calls": "torch.add(b, x, alpha=2)"},
    ]
    (folder / "baseline.py").write_text(
        "import torch\n"
        "IMPL = 'torch'\n"
        "IMPLS = {'fastlib': None, 'torch': lambda x, b: torch.add(b, x, alpha=2)}\n"
        "def run(x, b):\n"
        "    global IMPL\n"
        "    IMPL = 'torch'\n"
        "    return IMPLS['torch'](x, b)\n"
    )


def test_tasks_show_order_and_a_result_records_the_implementation_that_ran(
    tmp_path, fixture_tasks, cpu_evaluator, candidates
):
    task = load_task(_task_copy(tmp_path, fixture_tasks, _two_impls))
    assert [(b.impl, b.kind) for b in task.baselines] == [
        ("fastlib", "vendor_kernel_library"),
        ("torch", "torch_composition"),
    ]
    result = cpu_evaluator.evaluate(task, candidates / "axpy_torch.py")
    assert result.status == "passed", result.stages
    # The library did not import: the fallback ran, and the result says so, with its kind.
    assert result.baseline_impl == "torch" and result.baseline_kind == "torch_composition"
    assert {w.baseline["impl"] for w in result.workloads} == {"torch"}
    assert result.to_json()["baseline_impl"] == "torch"


def test_a_task_without_baselines_has_one_named_torch(fixture_tasks):
    task = load_task(fixture_tasks / "elementwise" / "axpy")
    assert [(b.impl, b.kind, b.calls) for b in task.baselines] == [
        ("torch", "torch_composition", "torch.add(b, x, alpha=2)")
    ]
    assert baseline_ran(task, [None, None]) == ("torch", "torch_composition")


@pytest.mark.parametrize(
    "edit, field",
    [
        (
            lambda s: s.update(
                baselines=[{"impl": "a", "kind": "torch_composition", "calls": "x"}] * 2
            ),
            "baselines",
        ),
        (
            lambda s: s.update(baselines=[{"impl": "a", "kind": "fast", "calls": "x"}]),
            "baselines[0].kind",
        ),
        (
            lambda s: s.update(
                baselines=[{"impl": "lib", "kind": "vendor_kernel_library", "calls": "x"}]
            ),
            "baseline_kind",
        ),
        (
            lambda s: s.update(
                baselines=[{"impl": "Has Space", "kind": "torch_composition", "calls": "x"}]
            ),
            "baselines[0].impl",
        ),
        (lambda s: s.update(baselines=[]), "baselines"),
    ],
)
def test_bad_baselines_name_the_field(tmp_path, fixture_tasks, edit, field):
    folder = _task_copy(tmp_path, fixture_tasks, lambda s, _f: edit(s))
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert err.value.field == field


def test_several_implementations_are_reported_in_order_of_preference(tmp_path, fixture_tasks):
    task = load_task(_task_copy(tmp_path, fixture_tasks, _two_impls))
    assert baseline_ran(task, ["torch", "fastlib", "torch"]) == ("fastlib+torch", None)
    assert baseline_ran(task, [None]) == (None, None)  # two declared, none reported: unknown


def _gpu(measured: Peaks) -> DeviceInfo:
    """A CUDA device whose peaks entry measured `measured`."""
    return DeviceInfo(
        id="cuda:0",
        type="cuda",
        vendor="nvidia",
        model="GPU",
        arch="sm_90",
        memory_gb=1,
        units=1,
        versions={},
        measured=measured,
    )


def test_launch_floor_is_the_speed_of_light_of_decode_sized_work():
    peaks = Peaks(
        source="measured",
        hbm_tbps=4.0,
        launch_graph_us=2.0,
        launch_eager_us=5.0,
        launch_overhead_us=3.3,
    )
    assert scoring.launch_floor_us(peaks, graph=True) == 2.0
    assert scoring.launch_floor_us(peaks, graph=False) == 5.0
    assert (
        scoring.launch_floor_us(Peaks(source="spec", launch_overhead_us=3.7), graph=True) == 3.7
    )  # unmeasured: the table's estimate
    assert scoring.reachable_us(0.01, 2.0) == 2.0 and scoring.reachable_us(40.0, 2.0) == 40.0
    assert scoring.reachable_us(None, 2.0) is None


def test_a_result_keeps_the_roofline_with_and_without_the_launch_floor(fixture_tasks):
    task = load_task(fixture_tasks / "elementwise" / "axpy")
    measured = Peaks(
        source="measured", fp32_tflops=50.0, hbm_tbps=4.0, launch_graph_us=2.5, launch_eager_us=4.0
    )
    info = _gpu(measured)
    w = {"label": "N=64,D=128", "axes": {"N": 64, "D": 128}, "hidden": False}
    job = {"stages": {"performance": [w], "generalization": [{}]}}
    side = {"median_us": 5.0, "n": 10, "rounds": []}
    seen = [
        events.StageFinished(s, "passed", 0.1)
        for s in ("compile", "correctness", "generalization", "performance")
    ]
    seen.insert(
        3,
        events.WorkloadTimed(
            w["label"], w["axes"], "graph", 1, side, {**side, "median_us": 10.0, "impl": "torch"}
        ),
    )
    seen.append(events.EvaluationFinished("passed"))
    result = assemble(task, job, info, "sha", seen)
    fig = result.workloads[0]
    roof = 12 * 64 * 128 / 4e12 * 1e6  # bytes / bandwidth: 0.025 µs
    assert (
        fig.roofline_us == pytest.approx(roof) and fig.launch_floor_us == 2.5 and fig.sol_us == 2.5
    )
    assert fig.sol_fraction == pytest.approx(0.5) and fig.roofline_fraction == pytest.approx(
        roof / 5.0
    )
    assert result.sol_fraction == pytest.approx(0.5) and result.roofline_fraction == pytest.approx(
        roof / 5.0
    )
    assert result.baseline_impl == "torch"


def test_the_devices_timer_offset_widens_a_measured_results_interval(fixture_tasks):
    """A device whose peaks carry a measured timer offset (the H200: 0.21 µs, the additive
    offset two processes can keep for a whole evaluation) widens each measured workload's
    interval by it: the same kernel read 5.12 and 5.00 µs in every alternation is a tie there,
    and is not on a device without one (docs/fidelity.md, "The timer offset")."""
    task = load_task(fixture_tasks / "elementwise" / "axpy")
    w = {"label": "N=64,D=128", "axes": {"N": 64, "D": 128}, "hidden": False}
    job = {"stages": {"performance": [w], "generalization": [{}]}}

    def side(us: float) -> dict:
        return {
            "median_us": us,
            "ci_low_us": us * 0.999,
            "ci_high_us": us * 1.001,
            "n": 10,
            "rounds": [{"median_us": us, "reported_s": 0.001, "wall_s": 0.002, "calls": 32}] * 3,
        }

    seen = [
        events.StageFinished(s, "passed", 0.1)
        for s in ("compile", "correctness", "generalization", "performance")
    ]
    seen.insert(3, events.WorkloadTimed(w["label"], w["axes"], "graph", 1, side(5.12), side(5.0)))
    seen.append(events.EvaluationFinished("passed"))

    def interval(offset: float | None) -> list[float]:
        info = _gpu(Peaks(source="measured", hbm_tbps=4.0, timer_offset_us=offset))
        result = assemble(task, job, info, "sha", seen)
        assert result.speedup_interval is not None
        return result.speedup_interval

    low, high = interval(None)
    assert high < 1.0  # every alternation agrees: from them alone, a loss
    low, high = interval(0.21)
    assert low < 1.0 < high


def test_the_prompt_names_the_baseline_that_runs_and_its_recorded_figures():
    from core.agents.workspace import Variant, recorded_baselines, render_prompt
    from core.tasks.discovery import find_task

    rope = find_task("elementwise/rope")
    recorded = recorded_baselines("h200")["elementwise/rope"]
    label = rope.gpu.visible[0].label
    prompt = render_prompt(rope, "sim:h200", Variant(), budget_s=600)
    impl = recorded[label]["impl"]
    assert f"`{impl}` ({rope.baseline_impl(impl).kind.replace('_', ' ')}" in prompt
    assert f"- {label}: {recorded[label]['median_us']:.2f} µs" in prompt
    # A GPU named by its probed model gets the same figures; the CPU device runs the torch fallback.
    assert f"- {label}:" in render_prompt(
        rope, "cuda:0", Variant(), budget_s=600, device_model="NVIDIA H200"
    )
    cpu = render_prompt(rope, "cpu", Variant(), budget_s=600)
    assert "on the CPU device: `torch`" in cpu and "µs (" not in cpu
    # An unknown GPU: the candidates in order of preference, no figures.
    other = render_prompt(rope, "cuda:0", Variant(), budget_s=600)
    assert "1. `flashinfer`" in other and "2. `liger`" in other and "µs (" not in other


def test_the_leaderboard_never_ranks_results_against_different_baselines_together():
    from core.store.leaderboard import build
    from core.store.standings import Scored

    def row(agent: str, impl: str | None, speedup: float) -> Scored:
        return Scored(
            run_id="r",
            job_id=1,
            task_id="elementwise/rope",
            family="elementwise",
            agent=agent,
            model=None,
            device_id="cuda:0",
            device_model="NVIDIA H200",
            device_vendor="nvidia",
            timing_kind="measured",
            status="passed",
            speedup=speedup,
            sol_fraction=0.5,
            baseline_impl=impl,
        )

    board = build(
        [row("a", "liger", 1.2), row("b", "torch", 8.0), row("c", "liger", 1.5)],
        timing_kind="measured",
    )
    groups = {device: [e.agent for e in entries] for _family, device, entries in board.groups()}
    assert groups == {"NVIDIA H200 · vs liger": ["c", "a"], "NVIDIA H200 · vs torch": ["b"]}


def test_an_attempt_with_nothing_to_score_sits_with_its_task_results_baseline():
    # a failure has no result, so no baseline of its own: it joins the group its task's results are in
    from core.store.leaderboard import build
    from core.store.standings import Failure, Scored

    scored = Scored(
        run_id="r",
        job_id=1,
        task_id="elementwise/rope",
        family="elementwise",
        agent="a",
        model=None,
        device_id="cuda:0",
        device_model="NVIDIA H200",
        device_vendor="nvidia",
        timing_kind="measured",
        status="passed",
        speedup=1.2,
        sol_fraction=0.5,
        baseline_impl="liger",
    )
    lost = Failure(
        run_id="r",
        attempt_id="t1",
        task_id="elementwise/rope",
        family="elementwise",
        agent="a",
        model=None,
        device_id="cuda:0",
        device_model="NVIDIA H200",
        device_vendor="nvidia",
        timing_kind="measured",
        outcome="agent_error",
        reason="crashed",
    )
    [(_family, device, [entry])] = list(
        build([scored], timing_kind="measured", failed=[lost]).groups()
    )
    assert device == "NVIDIA H200 · vs liger" and (entry.results, entry.failures) == (1, 1)
