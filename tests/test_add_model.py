"""`arena tasks add-model CONFIG.json`: a model's config gives each task it uses new visible
workloads, written into task.yaml as text so that comments survive; and the `model_workloads`
section those come from is validated by the loader. Every test works on copies in tmp: the
repository's tasks are never modified."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from arena_tui.cli import main
from core.tasks import model_config
from core.tasks.discovery import discover
from core.tasks.fields import TaskError
from core.tasks.model_config import add_model, normalize, read_config
from core.tasks.spec import load_task

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path(__file__).resolve().parent / "fixtures" / "models"

# The sections the three bundled tasks would carry: how their axes derive from a config.
SECTIONS = {
    "norm/add_rmsnorm": "model_workloads:\n  requires: [hidden_size]\n  axes:\n    T: [1, 2048]\n    H: hidden_size\n",
    "activation/silu_mul": "model_workloads:\n  requires: [intermediate_size]\n  axes:\n    T: [1, 2048]\n    I: intermediate_size\n",
    "gemm/bf16_gemm": (
        "model_workloads:\n  requires: [hidden_size, intermediate_size]\n  axes:\n    M: [1, 2048]\n"
        "    N: 2 * intermediate_size   # gate_up_proj\n    K: hidden_size\n"
    ),
}
# A MoE task's section: it applies only to models with experts.
MOE_SECTION = "model_workloads:\n  requires: [num_experts]\n  axes:\n    N: num_experts * top_k\n    D: expert_intermediate_size\n"


@pytest.fixture()
def tasks_dir(tmp_path: Path, fixture_tasks: Path) -> Path:
    root = tmp_path / "tasks"
    for task_id, section in SECTIONS.items():
        folder = root / task_id
        shutil.copytree(ROOT / "tasks" / task_id, folder)
        spec = folder / "task.yaml"
        spec.write_text(
            spec.read_text() + "\n# How a model's config gives this task's shapes.\n" + section
        )
    moe = root / "moe" / "toy_experts"  # the axpy fixture, its axes read as experts x width
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", moe)
    (moe / "task.yaml").write_text((moe / "task.yaml").read_text() + MOE_SECTION)
    return root


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_hugging_face_names_map_onto_the_normalized_keys():
    llama = read_config(MODELS / "Llama-3.1-8B.json").keys
    assert (
        llama["num_heads"] == 32 and llama["num_kv_heads"] == 8 and llama["head_dim"] == 4096 // 32
    )
    assert "num_experts" not in llama
    qwen = read_config(MODELS / "Qwen3-30B-A3B.json").keys
    assert (
        qwen["num_experts"],
        qwen["top_k"],
        qwen["expert_intermediate_size"],
        qwen["head_dim"],
    ) == (128, 8, 768, 128)
    assert "sliding_window" not in qwen, "use_sliding_window: false"
    dsv3 = read_config(MODELS / "DeepSeek-V3.json").keys
    assert (dsv3["num_experts"], dsv3["n_group"], dsv3["topk_group"], dsv3["kv_lora_rank"]) == (
        256,
        8,
        4,
        512,
    )
    assert (dsv3["qk_rope_head_dim"], dsv3["v_head_dim"]) == (64, 128)
    assert "head_dim" not in dsv3, (
        "MLA has no single head size: GQA tasks must not take hidden_size // num_heads = 56"
    )
    oss = read_config(MODELS / "gpt-oss-20b.json")
    assert oss.name == "gpt-oss-20b"
    assert (
        oss.keys["num_experts"],
        oss.keys["top_k"],
        oss.keys["sliding_window"],
        oss.keys["head_dim"],
    ) == (32, 4, 128, 64)
    assert oss.keys["expert_intermediate_size"] == 2880, (
        "gpt-oss gives the expert width as intermediate_size"
    )


def test_a_multimodal_config_is_read_through_its_text_config():
    keys = normalize(
        {
            "model_type": "vlm",
            "vision_config": {"hidden_size": 1152},
            "text_config": {"hidden_size": 5120, "num_attention_heads": 40},
        }
    )
    assert keys["hidden_size"] == 5120 and keys["num_heads"] == 40 and keys["head_dim"] == 128


def test_a_model_adds_its_workloads_as_text_and_keeps_every_comment(tasks_dir: Path):
    before = {t.id: t.file("task.yaml").read_text() for t in discover(tasks_dir)}
    changes = {
        c.task_id: c
        for c in add_model(read_config(MODELS / "Qwen3-30B-A3B.json"), discover(tasks_dir))
    }
    gemm = changes["gemm/bf16_gemm"]
    assert gemm.added == [{"M": 1, "N": 12288, "K": 2048}, {"M": 2048, "N": 12288, "K": 2048}]
    text = (tasks_dir / "gemm" / "bf16_gemm" / "task.yaml").read_text()
    old = before["gemm/bf16_gemm"].splitlines()
    new = text.splitlines()
    assert [line for line in new if line in old] == old, (
        "every original line (comments too) kept, in order"
    )
    added = [line for line in new if line not in old]
    assert added == [
        "    - {M: 1, N: 12288, K: 2048, model: Qwen3-30B-A3B, note: add-model}",
        "    - {M: 2048, N: 12288, K: 2048, model: Qwen3-30B-A3B, note: add-model}",
    ]
    spec = yaml.safe_load(text)
    assert spec["workloads"]["visible"][-1]["model"] == "Qwen3-30B-A3B", (
        "appended after the last GPU visible entry"
    )
    assert len(spec["workloads"]["cpu"]["visible"]) == len(
        yaml.safe_load(before["gemm/bf16_gemm"])["workloads"]["cpu"]["visible"]
    )
    task = load_task(tasks_dir / "gemm" / "bf16_gemm")
    assert "Qwen3-30B-A3B" in task.models, "the model joins the task's models list"
    assert changes["moe/toy_experts"].added == [{"N": 128 * 8, "D": 768}]


def test_a_task_the_model_does_not_use_is_skipped_with_the_reason(tasks_dir: Path):
    changes = {
        c.task_id: c
        for c in add_model(read_config(MODELS / "Llama-3.1-8B.json"), discover(tasks_dir))
    }
    assert changes["moe/toy_experts"].reason == "the model has no num_experts"
    assert not changes["moe/toy_experts"].added
    norm = changes["norm/add_rmsnorm"]  # Llama's T=1 and T=2048 at H=4096 are visible already
    assert not norm.added and norm.skipped == [
        "T=1,H=4096: already visible",
        "T=2048,H=4096: already visible",
    ]
    assert changes["activation/silu_mul"].added or changes["activation/silu_mul"].skipped


def test_a_task_can_exclude_models_by_a_key_they_have(tasks_dir: Path):
    # Softmax top-k routing is not DeepSeek-V3's: it routes by sigmoid over expert groups.
    spec = tasks_dir / "moe" / "toy_experts" / "task.yaml"
    spec.write_text(
        spec.read_text().replace(
            "  requires: [num_experts]\n", "  requires: [num_experts]\n  excludes: [n_group]\n"
        )
    )
    deepseek = {
        c.task_id: c
        for c in add_model(
            read_config(MODELS / "DeepSeek-V3.json"), discover(tasks_dir), dry_run=True
        )
    }
    assert (
        deepseek["moe/toy_experts"].reason == "the task excludes models with n_group"
        and not deepseek["moe/toy_experts"].added
    )
    qwen = {
        c.task_id: c
        for c in add_model(
            read_config(MODELS / "Qwen3-30B-A3B.json"), discover(tasks_dir), dry_run=True
        )
    }
    assert qwen["moe/toy_experts"].added


def test_adding_the_same_model_twice_adds_nothing_the_second_time(tasks_dir: Path):
    config = read_config(MODELS / "DeepSeek-V3.json")
    first = add_model(config, discover(tasks_dir))
    assert sum(len(c.added) for c in first) > 0
    text = {t.id: t.file("task.yaml").read_text() for t in discover(tasks_dir)}
    second = add_model(config, discover(tasks_dir))
    assert sum(len(c.added) for c in second) == 0
    assert text == {t.id: t.file("task.yaml").read_text() for t in discover(tasks_dir)}
    moe = next(c for c in first if c.task_id == "moe/toy_experts")
    assert moe.added == [{"N": 256 * 8, "D": 2048}]


def test_dry_run_writes_nothing(tasks_dir: Path):
    text = {t.id: t.file("task.yaml").read_text() for t in discover(tasks_dir)}
    changes = add_model(read_config(MODELS / "gpt-oss-20b.json"), discover(tasks_dir), dry_run=True)
    assert any(c.added for c in changes)
    assert text == {t.id: t.file("task.yaml").read_text() for t in discover(tasks_dir)}


def test_an_edit_that_breaks_the_task_is_rolled_back(tasks_dir: Path, monkeypatch):
    monkeypatch.setattr(model_config, "workload_line", lambda axes, model: "{T: 0, H: 1}")
    task = load_task(tasks_dir / "norm" / "add_rmsnorm")
    before = task.file("task.yaml").read_text()
    (change,) = add_model(read_config(MODELS / "gpt-oss-20b.json"), [task])
    assert change.error and "rolled back" in change.error and not change.added
    assert task.file("task.yaml").read_text() == before


def test_cli_prints_a_table_of_added_workloads_and_the_skips(capsys, tasks_dir: Path):
    code, out, err = _run(
        capsys,
        "tasks",
        "add-model",
        str(MODELS / "gpt-oss-20b.json"),
        "--tasks-dir",
        str(tasks_dir),
    )
    assert code == 0, err
    assert "added" in out and "moe/toy_experts" in out and "N=128,D=2880" in out
    assert "gpt-oss-20b" in load_task(tasks_dir / "moe" / "toy_experts").models
    code, out, err = _run(
        capsys,
        "tasks",
        "add-model",
        str(MODELS / "Llama-3.1-8B.json"),
        "--tasks-dir",
        str(tasks_dir),
        "--dry-run",
    )
    assert code == 0 and "skipped moe/toy_experts: the model has no num_experts" in out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        (json.dumps({"vocab_size": 10}), "`hidden_size`: missing"),
    ],
)
def test_cli_bad_config_is_one_line_and_exit_code_2(
    capsys, tmp_path: Path, tasks_dir: Path, content, says
):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    code, out, err = _run(capsys, "tasks", "add-model", str(path), "--tasks-dir", str(tasks_dir))
    assert code == 2 and says in err and str(path) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


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
        ("  requires: []\n  axes: {N: [], D: 8}\n", "model_workloads.axes.N", "token buckets"),
        ("  requires: []\n  axes: {N: 4}\n", "model_workloads.axes", "every declared axis"),
        (
            "  requires: []\n  axes: {N: 4, D: 8}\n  tokens: [1]\n",
            "model_workloads",
            "use only requires, excludes, axes",
        ),
        (
            "  requires: []\n  excludes: [ngroup]\n  axes: {N: 4, D: 8}\n",
            "model_workloads.excludes",
            "use one of hidden_size",
        ),
    ],
)
def test_a_bad_model_workloads_section_names_file_field_and_fix(
    tmp_path: Path, fixture_tasks: Path, section, field, fix
):
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    (folder / "task.yaml").write_text(
        (folder / "task.yaml").read_text() + "model_workloads:\n" + section
    )
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    assert caught.value.path.endswith("task.yaml") and caught.value.field == field
    assert fix in str(caught.value) and "\n" not in str(caught.value)


def test_a_valid_section_loads_and_gives_the_cross_product(tmp_path: Path, fixture_tasks: Path):
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    (folder / "task.yaml").write_text(
        (folder / "task.yaml").read_text()
        + "model_workloads:\n  requires: [num_heads]\n  axes:\n    N: [1, 64]\n    D: num_heads // num_kv_heads * (head_dim + 1)\n"
    )
    mw = load_task(folder).model_workloads
    assert mw is not None and mw.requires == ("num_heads",)
    assert mw.workloads({"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}) == [
        {"N": 1, "D": 516},
        {"N": 64, "D": 516},
    ]
