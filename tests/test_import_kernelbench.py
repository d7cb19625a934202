"""`arena import kernelbench`: KernelBench problems become arena tasks that load, validate and
evaluate like the bundled ones. The fixture folder holds problems in KernelBench's format
written for these tests (tests/fixtures/kernelbench/); nothing of KernelBench is bundled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from arena_tui.cli import main
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.importers.kernelbench import Options, import_kernelbench, level_of
from core.tasks.spec import load_task
from tests.task_files import load_module

FIXTURE = Path(__file__).parent / "fixtures" / "kernelbench"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("kb")
    return out, import_kernelbench(FIXTURE, out)


_module = load_module


def test_every_problem_is_converted_or_reported_with_its_reason(imported):
    out, report = imported
    assert sorted(c.task_id for c in report.converted) == [
        "kernelbench/l1_001_scaled_add",
        "kernelbench/l1_002_row_matmul",
        "kernelbench/l1_003_mean_loss",
        "kernelbench/l2_001_linear_relu_bias",
    ]
    why = {s.source.split("/")[-1]: (s.kind, s.reason) for s in report.skipped}
    assert (
        why["2_Fixed_sizes.py"][0] == "no_hidden"
        and "model's construction" in why["2_Fixed_sizes.py"][1]
    )
    assert why["1_Hub_model.py"] == (
        "dependency",
        "imports `transformers_for_tests_only`, which is not installed here: pip install transformers_for_tests_only",
    )
    assert report.by_group(level_of) == {"level 1": (3, 3), "level 2": (1, 2), "level 4": (0, 1)}


def test_a_converted_task_says_where_it_came_from_and_what_was_derived(imported):
    out, _ = imported
    task = load_task(out / "kernelbench" / "l2_001_linear_relu_bias")
    assert (
        task.provenance["source"] == "kernelbench"
        and task.provenance["file"] == "KernelBench/level2/1_Linear_ReLU_bias.py"
    )
    assert set(task.provenance["derived"]) >= {"hidden_workloads", "tolerance", "flops", "bytes"}
    # run(*inputs): the forward's argument, then the model's parameters; their sizes are the model's own.
    # (named_parameters() order: a module's own parameters before its children's)
    assert [(s.name, s.shape) for s in task.inputs] == [
        ("x", ("batch_size", 512)),
        ("p_bias", (384,)),
        ("p_linear_weight", (384, 512)),
        ("p_linear_bias", (384,)),
    ]
    assert (task.correctness.atol, task.correctness.rtol) == (
        1e-2,
        1e-2,
    )  # KernelBench v0.1's for fp32 (docs/interop.md says why)


def test_fp32_matmul_problems_are_bounded_by_the_tensor_core_peak(imported):
    # cuDNN convolutions and Triton's tl.dot run fp32 as TF32 by default: bounded by the vector
    # fp32 rate, an honest Model was flagged faster than light on the H200. Elementwise ones keep fp32.
    out, _ = imported
    matmul = load_task(out / "kernelbench" / "l2_001_linear_relu_bias")
    elementwise = load_task(out / "kernelbench" / "l1_001_scaled_add")
    assert (matmul.peak, elementwise.peak) == ("bf16", "fp32")
    assert "peak" in matmul.provenance["derived"]


def test_hidden_workloads_scale_only_the_sizes_that_do_not_build_the_model(imported):
    out, _ = imported
    task = load_task(out / "kernelbench" / "l1_003_mean_loss")
    visible = task.gpu.visible[0].axes
    assert (visible["batch_size"], visible["num_classes"]) == (4096, 1000)
    for w in task.gpu.hidden.fixed + task.cpu.hidden.fixed:
        assert w.axes != visible and not is_pow2(w.axes["batch_size"])
    matmul = load_task(out / "kernelbench" / "l1_002_row_matmul")
    assert [s.shape for s in matmul.inputs] == [("M", "K"), ("K", "N")]
    assert all(w.axes["M"] != 1024 for w in matmul.gpu.hidden.fixed)
    # the FLOPs are torch's count, per workload
    assert matmul.flops_for(matmul.gpu.visible[0]) == 2 * 1024 * 256 * 2048


def is_pow2(n: int) -> bool:
    return n & (n - 1) == 0


def test_inputs_follow_the_problem_and_never_carry_its_model(imported):
    out, _ = imported
    folder = out / "kernelbench" / "l1_003_mean_loss"
    assert "class Model" not in (folder / "inputs.py").read_text()
    make = _module(folder / "inputs.py", "kb_inputs_test").make_inputs
    axes = load_task(folder).cpu.visible[0].axes
    logits, targets = make(axes, torch.Generator("cpu").manual_seed(3))
    assert (
        logits.shape == (axes["batch_size"], axes["num_classes"]) and targets.dtype == torch.int64
    )
    assert int(targets.max()) < axes["num_classes"]  # get_inputs' own range, at the scaled size
    again = make(axes, torch.Generator("cpu").manual_seed(3))
    assert torch.equal(logits, again[0])  # the seed decides the inputs


def test_the_reference_is_the_model_in_float64_and_the_baseline_matches_it(imported):
    out, _ = imported
    folder = out / "kernelbench" / "l2_001_linear_relu_bias"
    axes = load_task(folder).cpu.visible[0].axes
    args = _module(folder / "inputs.py", "kb_inputs_lrb").make_inputs(
        axes, torch.Generator("cpu").manual_seed(0)
    )
    ref = _module(folder / "reference.py", "kb_ref_lrb").run(*args)
    base = _module(folder / "baseline.py", "kb_base_lrb").run(*args)
    assert ref.dtype == torch.float64 and base.dtype == torch.float32
    x, bias, w, b = args
    assert torch.allclose(base, torch.relu(x @ w.T + b) + bias, atol=1e-5)
    assert torch.allclose(ref.float(), base, atol=1e-4)


def test_converted_tasks_pass_validation_without_the_harness(imported):
    out, report = imported
    for c in report.converted:
        result = validate_task(Path(c.path), ValidateOptions(evaluate=False))
        assert result.passed, (c.task_id, [f"{x.name}: {x.message}" for x in result.failed])


def test_a_converted_task_evaluates_like_a_bundled_one(imported, capsys):
    out, _ = imported
    starter = out / "kernelbench" / "l1_001_scaled_add" / "starter.py"
    code = main(
        [
            "--tasks-dir",
            str(out),
            "eval",
            "--task",
            "kernelbench/l1_001_scaled_add",
            "--candidate",
            str(starter),
            "--json",
            "--no-store",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "passed", result.get("failed_stage")


def test_the_command_prints_a_line_per_problem_and_a_summary(tmp_path, capsys):
    code = main(["import", "kernelbench", str(FIXTURE), "--out", str(tmp_path), "--levels", "1,2"])
    text = capsys.readouterr().out
    assert code == 0
    assert (
        "[1/5] KernelBench/level1/1_Scaled_add.py" in text
        and "→ kernelbench/l1_001_scaled_add" in text
    )
    assert "level 2: 1 of 2 converted" in text and "not converted (no_hidden): 1" in text


def test_a_folder_without_problems_is_bad_input(tmp_path, capsys):
    assert main(["import", "kernelbench", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no KernelBench problems" in capsys.readouterr().err


@pytest.mark.skipif(
    not os.environ.get("KERNELBENCH_PATH"),
    reason="set KERNELBENCH_PATH to a KernelBench checkout to import the real set",
)
def test_the_real_kernelbench_level_1_converts(tmp_path):
    report = import_kernelbench(os.environ["KERNELBENCH_PATH"], tmp_path, Options(levels=(1,)))
    done, total = report.by_group(level_of)["level 1"]
    assert total == 100 and done >= 95
