"""`arena tasks add-model`: a model's config.json gives the operations it runs (with their layer
types, widths and variants), and each task that implements one of them gains that operation's
rows in `workloads.models`, written as text so comments survive, after the task's own
reference and baseline accepted them at a small size. The eleven configs are the zoo's
(tasks/models.yaml, as their authors publish them); what each must give is written here.

Every test that writes works on copies in tmp: the repository's tasks are never modified. Only
the tests named `..._small_run_...` run a task's code (tiny sizes); the others plan without it."""

from __future__ import annotations

import functools
import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from arena_tui.cli import main
from core.tasks.discovery import discover
from core.tasks.model_config import ModelConfigError, config_from_dict, read_config
from core.tasks.model_edit import remove_rows, set_model_listed
from core.tasks.model_rows import add_model, still_listed
from core.tasks.model_zoo import read_zoo, zoo_path
from core.tasks.spec import load_task

ROOT = Path(__file__).resolve().parent.parent
ZOO = {m.name: m for m in read_zoo().models}
RAW = {m["name"]: m["config"] for m in yaml.safe_load(zoo_path().read_text())["models"]}
ELEVEN = (
    "DeepSeek-V3",
    "Kimi-K2",
    "Qwen3-235B-A22B",
    "gpt-oss-120b",
    "Llama-4-Scout",
    "Gemma-3-27B",
    "Mistral-Small-3.1",
    "Ministral-8B",
    "Qwen3-Next-80B-A3B",
    "GLM-4.5-Air",
    "MiniCPM3-4B",
)


@functools.cache
def _bundled() -> tuple:
    return tuple(discover())


def _plan(name: str, config=None) -> dict:
    """What the model would add to each bundled task, planned without running any task code."""
    config = config or ZOO[name]
    # Planned as for the visible set: the rows the zoo already wrote to workloads.models (some
    # shared with other models) do not hide any.
    changes = add_model(config, list(_bundled()), dry_run=True, probe=False, into="visible")
    return {c.task_id: c for c in changes}


def _notes(change) -> set[str]:
    return {r.note for r in change.added}


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- reading the eleven configs ----------------------------------------------------------


def test_the_zoo_holds_the_eleven_models_the_catalogue_follows():
    assert set(ELEVEN) <= set(ZOO)


# (model, attention layers by type, dense MLP layers and width, MoE layers, experts, top-k,
# expert width, shared-expert width)
LAYERS = [
    ("DeepSeek-V3", {"mla": 61}, 3, 18432, 58, 256, 8, 2048, 2048),
    ("Kimi-K2", {"mla": 61}, 1, 18432, 60, 384, 8, 2048, 2048),
    ("Qwen3-235B-A22B", {"full": 94}, 0, None, 94, 128, 8, 1536, None),
    ("gpt-oss-120b", {"sliding": 18, "full": 18}, 0, None, 36, 128, 4, 2880, None),
    ("Llama-4-Scout", {"chunked": 36, "full": 12}, 0, None, 48, 16, 1, 8192, 8192),
    ("Gemma-3-27B", {"sliding": 52, "full": 10}, 62, 21504, 0, None, None, None, None),
    ("Mistral-Small-3.1", {"full": 40}, 40, 32768, 0, None, None, None, None),
    ("Ministral-8B", {"full": 36}, 36, 12288, 0, None, None, None, None),
    ("Qwen3-Next-80B-A3B", {"linear": 36, "full": 12}, 0, None, 48, 512, 10, 512, 512),
    ("GLM-4.5-Air", {"full": 46}, 1, 10944, 45, 128, 8, 1408, 1408),
    ("MiniCPM3-4B", {"mla": 62}, 62, 6400, 0, None, None, None, None),
]


@pytest.mark.parametrize(
    ("name", "attention", "dense", "width", "moe", "experts", "top_k", "expert", "shared"), LAYERS
)
def test_each_models_layer_types_and_widths(
    name, attention, dense, width, moe, experts, top_k, expert, shared
):
    a = ZOO[name].arch
    assert a.attention == attention
    assert (a.dense_layers, a.dense_width, a.moe_layers) == (dense, width, moe)
    assert (a.experts, a.top_k, a.expert_width, a.shared_width) == (experts, top_k, expert, shared)
    keys = ZOO[name].keys
    # `intermediate_size` is the dense MLP's width, and only where dense layers exist
    # (Qwen3-235B's 12288, Qwen3-Next's 5120 and gpt-oss's 2880 are no layer's width).
    assert keys.get("intermediate_size") == width


def test_variants_each_model_runs():
    k = {name: c.keys for name, c in ZOO.items()}
    assert "act_swiglu_oai" in k["gpt-oss-120b"] and "act_silu" not in k["gpt-oss-120b"]
    assert "act_gelu_tanh" in k["Gemma-3-27B"] and "act_silu" in k["GLM-4.5-Air"]
    assert k["Gemma-3-27B"]["vocab_size"] == 262208, "Gemma3TextConfig's default"
    assert k["Gemma-3-27B"]["sliding_window"] == 1024
    assert "sliding_window" not in k["Ministral-8B"], "a window as long as the context never slides"
    assert k["Llama-4-Scout"]["attention_chunk_size"] == 8192
    assert "qk_l2norm" in k["Llama-4-Scout"] and "qk_rmsnorm" not in k["Llama-4-Scout"]
    assert {"qk_rmsnorm"} <= set(k["Qwen3-235B-A22B"]) and "qk_rmsnorm" not in k["GLM-4.5-Air"]
    assert k["Qwen3-Next-80B-A3B"]["rotary_dim"] == 64 and k["GLM-4.5-Air"]["rotary_dim"] == 64
    assert "q_gate" in k["Qwen3-Next-80B-A3B"] and "attention_sinks" in k["gpt-oss-120b"]
    assert k["Qwen3-Next-80B-A3B"]["linear_num_value_heads"] == 32
    assert "router_softmax" in k["Qwen3-235B-A22B"] and "router_sigmoid_top1" in k["Llama-4-Scout"]
    grouped = {n for n in ZOO if "router_sigmoid_grouped" in k[n]}
    assert grouped == {"DeepSeek-V3", "Kimi-K2", "GLM-4.5-Air"}
    assert [k[n]["routed_scaling_factor"] for n in ("DeepSeek-V3", "Kimi-K2", "GLM-4.5-Air")] == [
        2.5,
        2.827,
        1.0,
    ]
    # MLA: the latent dims and the softmax scale (YaRN's mscale squared where the config has it).
    assert (k["MiniCPM3-4B"]["kv_lora_rank"], k["MiniCPM3-4B"]["qk_rope_head_dim"]) == (256, 32)
    assert k["MiniCPM3-4B"]["v_head_dim"] == 2560 // 40
    assert math.isclose(k["DeepSeek-V3"]["mla_softmax_scale"], 0.1352337788608801, rel_tol=1e-6)
    assert math.isclose(
        k["Kimi-K2"]["mla_softmax_scale"], 192**-0.5 * (0.1 * math.log(32) + 1) ** 2, rel_tol=1e-9
    )
    assert "head_dim" not in k["DeepSeek-V3"] and "weights_fp8_block" in k["DeepSeek-V3"]


def test_every_gemm_the_model_runs_is_an_operation():
    def gemms(name):
        return {
            o.note: (o.own["out_features"], o.own["in_features"])
            for o in ZOO[name].ops
            if o.kind == "linear"
        }

    assert gemms("Ministral-8B") == {
        "qkv_proj": ((32 + 2 * 8) * 128, 4096),
        "o_proj": (4096, 32 * 128),
        "gate_up_proj": (2 * 12288, 4096),
        "down_proj": (4096, 12288),
    }
    assert gemms("DeepSeek-V3") | {} == {
        "MLA fused_qkv_a_proj": (1536 + 512 + 64, 7168),
        "MLA q_b_proj": (128 * 192, 1536),
        "MLA kv_b_proj": (128 * 256, 512),
        "MLA o_proj": (7168, 128 * 128),
        "gate_up_proj": (2 * 18432, 7168),
        "down_proj": (7168, 18432),
        "router gate": (256, 7168),
        "shared expert gate_up_proj": (2 * 2048, 7168),
        "shared expert down_proj": (7168, 2048),
    }
    nxt = gemms("Qwen3-Next-80B-A3B")
    assert nxt["qkv_proj (+ the gate)"] == (2 * 16 * 256 + 2 * 2 * 256, 2048)
    assert nxt["linear attention in_proj_qkvz"] == (2 * 16 * 128 + 2 * 32 * 128, 2048)


# --- which tasks each model enters -------------------------------------------------------


def test_a_model_enters_only_the_tasks_of_operations_it_runs():
    oss = _plan("gpt-oss-120b")
    assert not oss["activation/silu_mul"].added and not oss["moe/fused_moe"].added
    assert "clamped SwiGLU" in oss["moe/fused_moe"].reason
    assert "sinks" in oss["attention/decode_paged_gqa"].reason, "its full layers have sinks too"
    assert {r.axes["W"] for r in oss["attention/prefill_sliding_window_sinks"].added} == {128}
    assert not oss["elementwise/rope_qknorm"].added
    qwen = _plan("Qwen3-235B-A22B")
    assert qwen["activation/silu_mul"].reason == "the model runs no act_mul"
    assert not any(r.axes.get("N") == 2 * 12288 for r in qwen["gemm/bf16_gemm"].added)
    scout = _plan("Llama-4-Scout")
    assert not scout["elementwise/rope_qknorm"].added and not scout["elementwise/rope"].added
    assert "sigmoid" in scout["moe/route_topk_softmax"].reason
    assert {r.note for r in scout["attention/decode_paged_gqa"].added} == {"full attention"}
    glm = _plan("GLM-4.5-Air")
    assert "routed_scaling_factor is 1" in glm["moe/route_grouped_topk"].reason
    assert "rope_partial" in glm["elementwise/rope"].reason
    assert "scale" in _plan("Kimi-K2")["attention/mla_decode"].reason
    assert "kv_lora_rank is 256" in _plan("MiniCPM3-4B")["attention/mla_decode"].reason


def test_a_deepseek_config_that_carries_head_dim_stays_out_of_gqa_tasks():
    raw = {**RAW["DeepSeek-V3"], "head_dim": 64}
    plan = _plan("x", config_from_dict(raw, "DeepSeek-V3-head-dim"))
    for task in (
        "attention/decode_paged_gqa",
        "attention/prefill_gqa",
        "elementwise/kv_cache_write",
        "elementwise/rope",
    ):
        assert not plan[task].added, task
    assert _notes(plan["gemm/bf16_gemm"]) == {"router gate"}, "its other GEMMs are fp8"
    assert "MLA q_b_proj" in _notes(plan["gemm/fp8_blockscale_gemm"])


def test_every_gemm_becomes_rows_of_the_gemm_task_of_its_weight_format():
    assert _notes(_plan("Mistral-Small-3.1")["gemm/bf16_gemm"]) == {
        "qkv_proj",
        "o_proj",
        "gate_up_proj",
        "down_proj",
    }
    assert {"linear attention in_proj_qkvz", "shared expert down_proj"} <= _notes(
        _plan("Qwen3-Next-80B-A3B")["gemm/bf16_gemm"]
    )


def test_one_expert_parallel_convention_across_tasks():
    sections = [s for t in _bundled() for s in t.model_workloads if s.expert_parallel]
    assert sections and {s.expert_parallel for s in sections} == {8}
    uses = {
        t.id
        for t in _bundled()
        for s in t.model_workloads
        if any("local_experts" in str(r) for r in s.axes.values())
    }
    assert uses == {
        "moe/fused_moe",
        "moe/mxfp4_moe",
        "gemm/bf16_grouped_gemm",
        "gemm/fp8_blockscale_grouped_gemm",
    }
    fused = _plan("Qwen3-235B-A22B")["moe/fused_moe"].added
    assert {r.axes["E"] for r in fused} == {128 // 8}
    kimi = _plan("Kimi-K2")["gemm/fp8_blockscale_grouped_gemm"].added
    assert {r.axes["E"] for r in kimi} == {384 // 8}


# --- names ----------------------------------------------------------------------------------


def test_the_name_comes_from_a_cache_path_then_name_or_path_then_the_folder(tmp_path: Path):
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "_name_or_path": "/scratch/ckpt-7"}
    snap = (
        tmp_path / "hub" / "models--openbmb--MiniCPM3-4B" / "snapshots" / "a1b2c3" / "config.json"
    )
    snap.parent.mkdir(parents=True)
    snap.write_text(json.dumps(cfg))
    named = read_config(snap)
    assert (named.name, named.repo) == ("MiniCPM3-4B", "openbmb/MiniCPM3-4B")
    plain = tmp_path / "my-model" / "config.json"
    plain.parent.mkdir()
    plain.write_text(json.dumps(cfg))
    assert read_config(plain).name == "ckpt-7"
    plain.write_text(json.dumps({"hidden_size": 64}))
    assert read_config(plain).name == "my-model"
    assert read_config(plain, "Mine").name == "Mine"
    with pytest.raises(ModelConfigError, match="--name"):
        read_config(plain, "a: b")


# --- writing rows ---------------------------------------------------------------------------


@pytest.fixture()
def tasks_dir(tmp_path: Path) -> Path:
    """Copies of three bundled tasks without the rows the zoo wrote."""
    root = tmp_path / "tasks"
    for task_id in ("norm/add_rmsnorm", "gemm/bf16_gemm", "norm/rmsnorm_fp8_quant"):
        shutil.copytree(ROOT / "tasks" / task_id, root / task_id)
        spec = root / task_id / "task.yaml"
        text = spec.read_text()
        for name in {w.model for w in load_task(spec.parent).model_rows}:
            text = remove_rows(text, name)[0]
            text = set_model_listed(text, name, still_listed(text, name))
        spec.write_text(text)
    return root


def _added(changes, task_id):
    return next(c for c in changes if c.task_id == task_id)


def test_rows_go_to_workloads_models_as_text_and_regenerate(tasks_dir: Path):
    spec = tasks_dir / "gemm" / "bf16_gemm" / "task.yaml"
    before = spec.read_text()
    config = ZOO["Ministral-8B"]
    changes = add_model(config, discover(tasks_dir), probe=False)
    text = spec.read_text()
    old = [line for line in before.splitlines() if not line.startswith("models:")]
    new = text.splitlines()
    assert [line for line in new if line in old] == old, "every original line kept, in order"
    assert "models: [Llama-3.1-8B, Qwen3-30B-A3B, DeepSeek-V3, Ministral-8B]" in new
    rows = yaml.safe_load(text)["workloads"]["models"]
    assert len(rows) == len(_added(changes, "gemm/bf16_gemm").added) == 8
    assert rows[0] == {"M": 16, "N": 6144, "K": 4096, "model": "Ministral-8B", "note": "qkv_proj"}
    task = load_task(spec.parent)
    assert "Ministral-8B" in task.models and len(task.model_rows) == 8
    assert len(task.gpu.visible) == len(yaml.safe_load(before)["workloads"]["visible"])
    again = add_model(config, discover(tasks_dir), probe=False)
    assert spec.read_text() == text and _added(again, "gemm/bf16_gemm").removed == 8
    shrunk = config_from_dict({**RAW["Ministral-8B"], "intermediate_size": 8192}, "Ministral-8B")
    add_model(shrunk, discover(tasks_dir), probe=False)
    widths = {r["N"] for r in yaml.safe_load(spec.read_text())["workloads"]["models"]}
    assert 2 * 8192 in widths and 2 * 12288 not in widths, "the model's old rows are replaced"


def test_visible_writes_the_old_way_and_an_edit_that_breaks_the_task_is_restored(
    tasks_dir: Path, monkeypatch
):
    from core.tasks import model_rows

    spec = tasks_dir / "norm" / "add_rmsnorm" / "task.yaml"
    (change,) = add_model(ZOO["Gemma-3-27B"], [load_task(spec.parent)], into="visible", probe=False)
    assert yaml.safe_load(spec.read_text())["workloads"]["visible"][-1]["model"] == "Gemma-3-27B"
    before = spec.read_text()
    monkeypatch.setattr(model_rows, "workload_line", lambda axes, model, note: "{T: 0, H: 1}")
    (change,) = add_model(ZOO["Mistral-Small-3.1"], [load_task(spec.parent)], probe=False)
    assert change.error and "restored" in change.error and not change.added
    assert spec.read_text() == before


def test_a_row_the_task_rejects_in_its_small_run_is_reported_and_not_written(tasks_dir: Path):
    # Were gpt-oss fp8-quantized, its H = 2880 (not a multiple of the 128-wide quantization
    # group) would reach rmsnorm_fp8_quant, whose reference cannot split it.
    spec = tasks_dir / "norm" / "rmsnorm_fp8_quant" / "task.yaml"
    spec.write_text(
        spec.read_text().replace(
            "requires: [hidden_size, weights_fp8_block]", "requires: [hidden_size]"
        )
    )
    before = spec.read_text()
    (change,) = add_model(ZOO["gpt-oss-120b"], [load_task(spec.parent)])
    assert not change.added and spec.read_text() == before
    assert all("small size" in s and "2880" in s for s in change.skipped if "H=2880" in s)
    assert any("H=2880" in s for s in change.skipped)


def test_a_row_whose_formulas_fail_is_reported_and_not_written(tmp_path: Path):
    folder = tmp_path / "attention" / "prefill_sliding_window_sinks"
    shutil.copytree(ROOT / "tasks" / "attention" / "prefill_sliding_window_sinks", folder)
    spec = folder / "task.yaml"
    spec.write_text(
        spec.read_text().replace(
            "requires: [sliding_window, attention_sinks,", "requires: [sliding_window,"
        )
    )
    # A 32k window on a 128k context slides, and is longer than the task's 2048-token prompts:
    # the task's FLOP formula (which assumes W <= S) goes negative.
    raw = {**RAW["Ministral-8B"], "max_position_embeddings": 131072}
    mistral = config_from_dict(raw, "Windowed")
    (change,) = add_model(mistral, [load_task(folder)], probe=False)
    assert not change.added
    assert any("W=32768" in s and "flops" in s and "is -" in s for s in change.skipped)


# --- the command line -------------------------------------------------------------------------


def test_cli_json_over_a_folder_of_configs(capsys, tmp_path: Path, tasks_dir: Path):
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in ("Ministral-8B", "GLM-4.5-Air"):
        (folder / f"{name}.json").write_text(json.dumps(RAW[name]))
    code, out, err = _run(
        capsys,
        "tasks",
        "add-model",
        str(folder),
        "--dry-run",
        "--no-probe",
        "--json",
        "--tasks-dir",
        str(tasks_dir),
    )
    assert code == 0, err
    report = json.loads(out)
    assert [m["name"] for m in report["models"]] == ["GLM-4.5-Air", "Ministral-8B"]
    glm = report["models"][0]
    assert glm["layers"] == {"attention": {"full": 46}, "dense_mlp": 1, "moe": 45}
    gemm = next(t for t in glm["tasks"] if t["task"] == "gemm/bf16_gemm")
    assert {"N": 2 * 1408, "K": 4096, "M": 16} in [r["axes"] for r in gemm["added"]]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nope.json"], "no such file"),
        (["x.json", "--zoo"], "not both"),
        (["x.json", "--no-probe"], "only with --dry-run"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_code_2(capsys, tmp_path: Path, args, says):
    if "x.json" in args:
        (tmp_path / "x.json").write_text("{}")
    args = [str(tmp_path / a) if a.endswith(".json") else a for a in args]
    code, out, err = _run(capsys, "tasks", "add-model", *args)
    assert code == 2 and says in err and "Traceback" not in err


def test_cli_bad_config_names_the_file(capsys, tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"vocab_size": 10}))
    code, out, err = _run(capsys, "tasks", "add-model", str(path), "--dry-run", "--no-probe")
    assert code == 2 and "`hidden_size`: missing" in err and str(path) in err
