"""Workspaces: exactly PROMPT.md, solution.py and (by variant) CHEATSHEET.md; the prompt says
what to do and how it is scored, and no hidden workload ever enters a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.agents.workspace import (
    VENDORS,
    Variant,
    cheatsheet,
    make_workspace,
    render_prompt,
    vendor_of,
)
from core.model.task import Task
from core.tasks.discovery import find_task
from tests.conftest import ROOT


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def hidden_markers(task: Task, cpu: bool) -> list[str]:
    """Strings that would betray a hidden workload: its label, and each `axis=value` or `axis: value`
    whose value no visible workload has."""
    sets = task.workloads(cpu=cpu)
    visible = {(k, v) for w in sets.visible for k, v in w.axes.items()}
    markers = []
    for w in sets.hidden.fixed:
        markers.append(w.label)
        markers += [
            f for k, v in w.axes.items() if (k, v) not in visible for f in (f"{k}={v}", f"{k}: {v}")
        ]
    if sets.hidden.draw:
        markers += [f"{list(r)}" for r in sets.hidden.draw.ranges.values()]
    return markers


@pytest.fixture
def axpy(fixture_tasks) -> Task:
    return find_task("elementwise/axpy", fixture_tasks)


def test_a_workspace_holds_the_prompt_and_the_starter_and_nothing_else(tmp_path, axpy):
    ws = make_workspace(tmp_path / "a", axpy, "cpu", Variant(), budget_s=600)
    assert files_in(ws.path) == {"PROMPT.md", "solution.py"}
    assert ws.solution.read_bytes() == axpy.file("starter.py").read_bytes()
    assert (ws.root / "bin" / "arena").is_file() and ws.home.is_dir(), (
        "the attempt's folder has the tools, outside the workspace"
    )


def test_the_cheatsheet_variant_adds_the_vendors_sheet(tmp_path, axpy):
    ws = make_workspace(
        tmp_path / "a",
        axpy,
        "cuda:0",
        Variant("sheet", cheatsheet=True, prompt="Use num_warps=8."),
        budget_s=600,
    )
    assert files_in(ws.path) == {"PROMPT.md", "solution.py", "CHEATSHEET.md"}
    assert (ws.path / "CHEATSHEET.md").read_text() == cheatsheet(vendor_of("cuda:0"))
    assert "Use num_warps=8." in ws.prompt and "CHEATSHEET.md" in ws.prompt


def test_every_vendor_has_a_short_cheatsheet():
    for vendor in VENDORS:
        text = cheatsheet(vendor)
        assert text.startswith("# ") and 200 < len(text) < 4000


def test_the_prompt_says_what_to_do_how_it_is_scored_and_how_to_check(axpy):
    prompt = render_prompt(
        axpy, "cpu", Variant(), budget_s=900, max_cost_usd=2.5, max_tokens=100_000
    )
    for needed in (
        "run(x, b)",
        "`x`: float32[N, D]",
        "`y`: float32[N, D]",
        "N=64,D=128",
        "N=16,D=256",
        "`cpu` (vendor: cpu)",
        "hidden workloads",
        "speedup",
        "speed of light",
        "15 min",
        "$2.5",
        "100,000",
        "`arena check`",
        "atol 1e-05",
    ):
        assert needed in prompt, needed


def test_the_prompt_says_an_in_place_output_is_written_into_its_input_and_a_scalar_is_a_scalar():
    from core.model.task import SpecKind
    from core.rl.env import signature

    rope, norm = find_task("elementwise/rope"), find_task("norm/add_rmsnorm")
    assert [o.kind for o in rope.outputs] == [
        SpecKind.INPLACE,
        SpecKind.INPLACE,
    ] and not rope.outputs[0].is_scalar
    assert [i.kind for i in norm.inputs] == [
        SpecKind.TENSOR,
        SpecKind.TENSOR,
        SpecKind.TENSOR,
        SpecKind.SCALAR,
    ]
    prompt = render_prompt(rope, "cuda:0", Variant(), budget_s=600)
    assert (
        "- `q_out`: bfloat16[T, Hq, d] (written in place into input `q`)" in prompt
        and "scalar" not in prompt
    )
    assert "- `eps`: scalar float32 = 1e-06" in render_prompt(
        norm, "cuda:0", Variant(), budget_s=600
    )
    # The RL environment's signature uses the same words (TensorSpec.describe: one renderer).
    assert "q_out: bfloat16[T, Hq, d] (written in place into input `q`)" in signature(rope)


@pytest.mark.parametrize("device", ["cpu", "cuda:0", "sim:h200", "box1/xpu:0"])
@pytest.mark.parametrize("task_id", ["elementwise/axpy", "activation/silu_mul", "norm/add_rmsnorm"])
def test_no_hidden_workload_enters_any_file(tmp_path, fixture_tasks, task_id, device):
    task = find_task(task_id, fixture_tasks if task_id == "elementwise/axpy" else ROOT / "tasks")
    ws = make_workspace(tmp_path / "a", task, device, Variant(cheatsheet=True), budget_s=600)
    text = "\n".join(p.read_text() for p in ws.path.iterdir())
    markers = hidden_markers(task, cpu=device == "cpu")
    assert markers
    for marker in markers:
        assert marker not in text, f"hidden workload marker {marker!r} is in the workspace"
    for w in task.workloads(cpu=device == "cpu").visible:
        assert w.label in text


def test_vendors_from_device_ids():
    assert [
        vendor_of(d) for d in ("cpu", "xpu:1", "sim:h200", "sim:mi300x", "box1/cuda:0", "box1/cpu")
    ] == ["cpu", "intel", "nvidia", "amd", "nvidia", "cpu"]
