"""task.yaml's `model_workloads` (how a model's operations give a task's rows) and
`workloads.models` (the rows written): the loader reads every key and rejects a bad one naming
the file, the field and the fix; and the coverage table add-model --zoo writes from them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.tasks.discovery import discover
from core.tasks.fields import TaskError
from core.tasks.model_coverage import BEGIN, END, coverage, h200_peaks, table, write_table
from core.tasks.model_zoo import Serving, read_zoo
from core.tasks.spec import load_task


def _axpy(tmp_path: Path, fixture_tasks: Path, section: str) -> Path:
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text() + section)
    return folder


@pytest.mark.parametrize(
    ("section", "field", "fix"),
    [
        (
            "  requires: [num_expert]\n  axes: {N: 4, D: 8}\n",
            "model_workloads.requires",
            "use one of hidden_size",
        ),
        (
            "  requires: []\n  axes: {N: hidden_size / 2, D: 8}\n",
            "model_workloads.axes.N",
            "+ - * //",
        ),
        (
            "  requires: []\n  axes: {N: hiden_size, D: 8}\n",
            "model_workloads.axes.N",
            "over hidden_size",
        ),
        (
            "  requires: []\n  axes: {N: 4, D: 8, Q: 2}\n",
            "model_workloads.axes.Q",
            "declared under `axes:`",
        ),
        ("  requires: []\n  axes: {N: [1, 0], D: 8}\n", "model_workloads.axes.N", "token buckets"),
        ("  requires: []\n  axes: {N: 4}\n", "model_workloads.axes", "every declared axis"),
        ("  requires: []\n  axes: {N: 4, D: 8}\n  tokens: [1]\n", "model_workloads", "use only op"),
        (
            "  requires: []\n  excludes: [ngroup]\n  axes: {N: 4, D: 8}\n",
            "model_workloads.excludes",
            "use one of",
        ),
        ("  op: mlp\n  axes: {N: 4, D: 8}\n", "model_workloads.op", "use one of model, linear"),
        (
            "  op: moe\n  axes: {N: local_experts, D: 8}\n",
            "model_workloads.axes",
            "expert_parallel: 8",
        ),
        (
            "  op: moe\n  axes: {N: 4, D: 8}\n  probe: {Q: 1}\n",
            "model_workloads.probe.Q",
            "probe only declared axes",
        ),
        (
            "  op: moe\n  axes: {N: 4, D: 8}\n  probe: {N: E}\n",
            "model_workloads.probe.N",
            "over the task's axes",
        ),
        (
            "  op: moe\n  axes: {N: 4, D: 8}\n  phases: [train]\n",
            "model_workloads.phases",
            "decode, prefill",
        ),
        (
            "  op: router\n  only: {routed_scaling_factor: fast}\n  axes: {N: 4, D: 8}\n",
            "model_workloads.only.routed_scaling_factor",
            "2.827",
        ),
    ],
)
def test_a_bad_section_names_file_field_and_fix(
    tmp_path: Path, fixture_tasks: Path, section, field, fix
):
    folder = _axpy(tmp_path, fixture_tasks, "model_workloads:\n" + section)
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    assert caught.value.path.endswith("task.yaml") and caught.value.field == field
    assert fix in str(caught.value) and "\n" not in str(caught.value)


def test_sections_load_as_a_list_with_every_key(tmp_path: Path, fixture_tasks: Path):
    folder = _axpy(
        tmp_path,
        fixture_tasks,
        "model_workloads:\n"
        "  - op: moe\n    note: W13\n    requires: [num_experts]\n    expert_parallel: 8\n"
        "    axes: {N: [1, 64], D: 2 * local_experts}\n    probe: {N: D - 1}\n    phases: [decode]\n"
        "  - {requires: [num_heads], axes: {N: num_heads, D: num_heads // num_kv_heads * (head_dim + 1)}}\n",
    )
    first, second = load_task(folder).model_workloads
    assert (first.op, first.note, first.expert_parallel, first.phases) == (
        "moe",
        "W13",
        8,
        ("decode",),
    )
    assert first.workloads({"num_experts": 256, "local_experts": 32}) == [
        {"N": 1, "D": 64},
        {"N": 64, "D": 64},
    ]
    assert first.probe_axes({"N": 64, "D": 64}) == {"N": 63, "D": 64}
    assert second.op == "model" and second.workloads(
        {"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}
    ) == [{"N": 32, "D": 516}]


def test_model_rows_name_their_model_and_never_repeat_a_hidden_workload(
    tmp_path: Path, fixture_tasks: Path
):
    folder = _axpy(tmp_path, fixture_tasks, "")
    spec = folder / "task.yaml"
    text = spec.read_text()
    hidden = load_task(folder).gpu.hidden.fixed[0].axes
    for row, says in (
        ("{N: 7, D: 9}", "names no model"),
        (
            "{" + ", ".join(f"{k}: {v}" for k, v in hidden.items()) + ", model: m}",
            "is a hidden workload",
        ),
    ):
        spec.write_text(text.replace("  cpu:\n", f"  models:\n    - {row}\n  cpu:\n", 1))
        with pytest.raises(TaskError, match=says):
            load_task(folder)


def test_every_bundled_section_derives_rows_for_some_zoo_model():
    from core.tasks.model_rows import add_model

    tasks = discover()
    gained = {t.id: False for t in tasks if t.model_workloads}
    for config in read_zoo().models:
        for change in add_model(config, tasks, dry_run=True, probe=False):
            gained[change.task_id] = (
                gained.get(change.task_id, False)
                or bool(change.added)
                or any("already visible" in s for s in change.skipped)
            )
    assert [t for t, ok in gained.items() if not ok] == []


def test_the_coverage_table_shares_and_markers(tmp_path: Path):
    zoo = read_zoo()
    covs = [coverage(m, discover(), zoo.serving, h200_peaks()) for m in zoo.models[:3]]
    for c in covs:
        for phase in ("decode", "prefill"):
            assert 0.0 <= c.share(phase) <= 1.0
            assert all(o.seconds[phase] >= 0 for o in c.ops)
    deepseek = covs[0]
    experts = next(o for o in deepseek.ops if o.op.kind == "moe")
    assert experts.seconds["prefill"] > 0 and experts.tasks.get("prefill"), (
        "fp8 grouped GEMM rows exist"
    )
    text = table(covs, Serving())
    assert text.count("\n| ") == 2 + len(covs) and "DeepSeek-V3" in text
    doc = tmp_path / "tasks.md"
    doc.write_text(f"# Tasks\n\n{BEGIN}\nold\n{END}\n\nafter\n")
    assert write_table(doc, text)
    assert doc.read_text() == f"# Tasks\n\n{BEGIN}\n{text}{END}\n\nafter\n"
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not write_table(plain, text) and plain.read_text() == "no markers\n"
