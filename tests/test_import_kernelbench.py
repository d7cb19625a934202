"""`arena import kernelbench`: KernelBench problems become arena tasks that a KernelBench user
recognises: its parameters (the Model built under seed 42), its tolerance, its ModelNew files
accepted as they are, its eager and torch.compile baselines, its fast_p. Every workload's
reference is run at import, and a task a lazy candidate passes is reported, not written. The
fixture folder holds problems in KernelBench's format written for these tests
(tests/fixtures/kernelbench/); nothing of KernelBench is bundled."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from arena_tui.cli import main
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.importers.kernelbench import Options, import_kernelbench, level_of
from core.importers.kernelbench_problem import Problem
from core.tasks.spec import load_task
from tests.task_files import load_module

FIXTURE = Path(__file__).parent / "fixtures" / "kernelbench"
PROBLEMS = FIXTURE / "KernelBench"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("kb")
    return out, import_kernelbench(FIXTURE, out, Options(workers=2))


def _inputs(folder: Path, seed: int = 0, cpu: bool = True) -> list[torch.Tensor]:
    task = load_task(folder)
    axes = (task.cpu if cpu else task.gpu).visible[0].axes
    make = load_module(folder / "inputs.py", f"kb_inputs_{folder.name}_{seed}").make_inputs
    return make(axes, torch.Generator("cpu").manual_seed(seed))


def test_every_problem_is_converted_or_reported_with_its_reason(imported):
    out, report = imported
    assert sorted(c.task_id for c in report.converted) == [
        "kernelbench/l1_001_scaled_add",
        "kernelbench/l1_002_row_matmul",
        "kernelbench/l1_003_mean_loss",
        "kernelbench/l1_004_layer_norm",
        "kernelbench/l2_001_linear_relu_bias",
        "kernelbench/l2_003_sequence_linear",
    ]
    why = {s.source.split("/")[-1]: (s.kind, s.reason) for s in report.skipped}
    assert why["2_Fixed_sizes.py"][0] == "no_hidden"
    assert "model's construction" in why["2_Fixed_sizes.py"][1]
    assert why["1_Hub_model.py"] == (
        "dependency",
        "imports `transformers_for_tests_only`, which is not installed here: pip install transformers_for_tests_only",
    )
    assert report.by_group(level_of) == {
        "level 1": (4, 5),
        "level 2": (2, 3),
        "level 4": (0, 1),
    }


def test_a_task_a_lazy_candidate_passes_is_reported_not_written(imported):
    # ReLU of torch.rand (all in [0, 1)) is the identity: handing the input back passes.
    out, report = imported
    skipped = {s.source.split("/")[-1]: s for s in report.skipped}
    relu = skipped["5_Relu_of_rand.py"]
    assert relu.kind == "degenerate" and "input 0 handed back passes" in relu.reason
    assert not (out / "kernelbench" / "l1_005_relu_of_rand").exists()


def test_parameters_are_kernelbenchs_own_the_model_built_under_seed_42(imported):
    out, _ = imported
    # a LayerNorm keeps its own initialisation: weight 1, bias 0 (not a redrawn uniform)
    x, weight, bias = _inputs(out / "kernelbench" / "l1_004_layer_norm")
    assert torch.equal(weight, torch.ones(256)) and torch.equal(bias, torch.zeros(256))
    # a Linear's and an nn.Parameter(torch.randn) are exactly what KernelBench's eval builds
    problem = Problem.load(PROBLEMS / "level2" / "1_Linear_ReLU_bias.py").module({})
    torch.manual_seed(42)
    init = problem["get_init_inputs"]()
    torch.manual_seed(42)
    model = problem["Model"](*init)
    given = _inputs(out / "kernelbench" / "l2_001_linear_relu_bias")[1:]
    assert all(torch.equal(p, q) for (_, p), q in zip(model.named_parameters(), given))
    # ... at every seed: the parameters are the problem's, the seed draws the forward's inputs
    again = _inputs(out / "kernelbench" / "l2_001_linear_relu_bias", seed=7)
    assert torch.equal(again[1], given[0]) and not torch.equal(
        again[0], _inputs(out / "kernelbench" / "l2_001_linear_relu_bias")[0]
    )


def test_the_tolerance_is_kernelbenchs_for_the_precision_and_the_reference_runs_in_it(imported):
    out, _ = imported
    task = load_task(out / "kernelbench" / "l2_001_linear_relu_bias")
    # src/kernelbench/eval.py, get_tolerance_for_precision: 1e-4 for fp32 since November 2025
    assert (task.correctness.atol, task.correctness.rtol) == (1e-4, 1e-4)
    assert "get_tolerance_for_precision" in task.provenance["derived"]["tolerance"]
    folder = out / "kernelbench" / "l2_001_linear_relu_bias"
    args = _inputs(folder)
    ref = load_module(folder / "reference.py", "kb_ref_lrb").run(*args)
    base = load_module(folder / "baseline.py", "kb_base_lrb").run(*args)
    x, bias, w, b = args
    assert ref.dtype == torch.float32 and torch.equal(ref, base)
    assert torch.allclose(base, torch.relu(x @ w.T + b) + bias, atol=1e-5)


def test_bf16_problems_take_kernelbenchs_bf16_tolerance(tmp_path):
    import_kernelbench(
        FIXTURE, tmp_path, Options(precision="bf16", levels=(1,), only=("level1/1_*",))
    )
    task = load_task(tmp_path / "kernelbench" / "l1_001_scaled_add")
    assert (task.correctness.atol, task.inputs[0].dtype) == (1e-2, "bfloat16")


def test_fp32_matmul_problems_are_bounded_by_the_tensor_core_peak(imported):
    # cuDNN convolutions and Triton's tl.dot run fp32 as TF32 by default: bounded by the vector
    # fp32 rate, an honest Model was flagged faster than light on the H200. Elementwise ones keep fp32.
    out, _ = imported
    matmul = load_task(out / "kernelbench" / "l2_001_linear_relu_bias")
    elementwise = load_task(out / "kernelbench" / "l1_001_scaled_add")
    assert (matmul.peak, elementwise.peak) == ("bf16", "fp32")


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
    assert matmul.flops_for(matmul.gpu.visible[0]) == 2 * 1024 * 256 * 2048  # torch's count


def is_pow2(n: int) -> bool:
    return n & (n - 1) == 0


def test_hidden_workloads_fit_the_target_device(tmp_path):
    # 11.5 MB at KernelBench's sizes; a 0.05 GB device holds workloads of 1/8 of that: the
    # hidden ones are scaled down (0.6, 0.5) instead of up (1.3), and the cap is stated.
    import_kernelbench(
        FIXTURE, tmp_path, Options(levels=(1,), only=("level1/2_*",), device_gb=0.05)
    )
    task = load_task(tmp_path / "kernelbench" / "l1_002_row_matmul")
    assert task.gpu.hidden.fixed and all(
        w.axes["byte_count"] <= 0.05e9 / 8 for w in task.gpu.hidden.fixed
    )
    assert "1/8 of a 0.05 GB device" in task.provenance["derived"]["sizes"]


def test_cpu_workloads_stay_small_and_keep_no_size_below_8(imported):
    out, _ = imported
    # the model's own weight (4 MB) keeps the CPU's 2 MB aim out of reach: the sizes stop at 8,
    # never at a sequence of one (where a missing causal mask would pass)
    task = load_task(out / "kernelbench" / "l2_003_sequence_linear")
    cpu = task.cpu.visible[0].axes
    assert (cpu["batch_size"], cpu["seq_len"]) == (8, 8)
    for t in (load_task(c) for c in sorted((out / "kernelbench").iterdir())):
        assert all(w.axes["byte_count"] < 100e6 for w in t.cpu.visible + t.cpu.hidden.fixed)


def test_inputs_follow_the_problem(imported):
    out, _ = imported
    folder = out / "kernelbench" / "l1_003_mean_loss"
    axes = load_task(folder).cpu.visible[0].axes
    logits, targets = _inputs(folder, seed=3)
    assert logits.shape == (axes["batch_size"], axes["num_classes"])
    assert targets.dtype == torch.int64 and int(targets.max()) < axes["num_classes"]
    assert torch.equal(logits, _inputs(folder, seed=3)[0])  # the seed decides the inputs


def test_converted_tasks_pass_validation_without_the_harness(imported):
    out, report = imported
    for c in report.converted:
        result = validate_task(Path(c.path), ValidateOptions(evaluate=False))
        assert result.passed, (c.task_id, [f"{x.name}: {x.message}" for x in result.failed])


MODELNEW = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(torch.addmm(self.linear.bias, x, self.linear.weight.t())) + self.bias{tail}
"""


def _eval(out: Path, task: str, candidate: Path, *extra: str, capsys) -> tuple[int, dict]:
    code = main(
        [
            "--tasks-dir",
            str(out),
            "eval",
            "--task",
            task,
            "--candidate",
            str(candidate),
            "--json",
            "--no-store",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_a_kernelbench_modelnew_file_is_accepted_as_it_is(imported, tmp_path, capsys):
    # KernelBench builds ModelNew(*get_init_inputs()) under seed 42 and calls it with
    # get_inputs(): the task's adapter.py does the same, so the user's file needs no `run`
    out, _ = imported
    good, wrong = tmp_path / "good" / "solution.py", tmp_path / "wrong" / "solution.py"
    for path, tail in ((good, ""), (wrong, " * 1.001")):
        path.parent.mkdir()
        path.write_text(MODELNEW.replace("{tail}", tail))
    code, result = _eval(
        out, "kernelbench/l2_001_linear_relu_bias", good, "--profile", "train", capsys=capsys
    )
    assert code == 0 and result["status"] == "passed", result.get("failed_stage")
    code, result = _eval(
        out, "kernelbench/l2_001_linear_relu_bias", wrong, "--profile", "train", capsys=capsys
    )
    assert code == 1 and result["failed_stage"] == "correctness"  # 0.1% off: over 1e-4


def test_the_baseline_is_chosen_per_run_and_recorded(imported, capsys):
    out, _ = imported
    task = load_task(out / "kernelbench" / "l1_001_scaled_add")
    assert [b.impl for b in task.baselines] == ["eager", "torch_compile"]
    starter = out / "kernelbench" / "l1_001_scaled_add" / "starter.py"
    code, result = _eval(
        out, task.id, starter, "--baseline-impl", "eager", "--profile", "train", capsys=capsys
    )
    assert code == 0 and result["baseline_impl"] == "eager"
    assert (
        main(
            [
                "--tasks-dir",
                str(out),
                "eval",
                "--task",
                task.id,
                "--candidate",
                str(starter),
                "--baseline-impl",
                "nope",
            ]
        )
        == 2
    )
    assert "its baselines: eager, torch_compile" in capsys.readouterr().err


def test_the_trusted_worker_times_the_baseline_the_run_names(imported):
    # The job's baseline_impl picks baseline.py's IMPLS[name] and reports that name; one it
    # cannot run is an error that says which it has (never a silent fall back). Compiling for
    # real takes minutes on a 2-core CPU: the H200 script runs torch_compile (bench/interop_gpu.py).
    from core.harness.trusted_task import baseline_impl, chosen_impl

    out, _ = imported
    module = load_module(out / "kernelbench" / "l1_001_scaled_add" / "baseline.py", "kb_impls")
    assert callable(module.IMPLS["torch_compile"]) and module.IMPL == "eager"
    args = _inputs(out / "kernelbench" / "l1_001_scaled_add")
    module.IMPLS["torch_compile"] = module.IMPLS["eager"]  # the same Model, without the compile
    out_ = chosen_impl(module, "torch_compile")(*args)
    assert baseline_impl(module) == "torch_compile" and out_.shape == args[0].shape
    with pytest.raises(RuntimeError, match="its IMPLS that import here: eager, torch_compile"):
        chosen_impl(module, "cudnn")


def test_the_command_prints_a_line_per_problem_and_a_summary(tmp_path, capsys):
    code = main(
        [
            "import",
            "kernelbench",
            str(FIXTURE),
            "--out",
            str(tmp_path),
            "--levels",
            "1,2",
            "--only",
            "level1/1_*,level2/2_*",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    # one line per problem as each finishes (two at once: in the order they finish)
    assert "/2] KernelBench/level1/1_Scaled_add.py" in text
    assert "→ kernelbench/l1_001_scaled_add" in text
    assert "/2] KernelBench/level2/2_Fixed_sizes.py" in text
    assert "level 2: 0 of 1 converted" in text and "not converted (no_hidden): 1" in text


def test_a_folder_without_problems_is_bad_input(tmp_path, capsys):
    assert main(["import", "kernelbench", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no KernelBench problems" in capsys.readouterr().err


@pytest.mark.skipif(
    not os.environ.get("KERNELBENCH_PATH"),
    reason="set KERNELBENCH_PATH to a KernelBench checkout to import the real set",
)
def test_the_real_kernelbench_level_1_converts(tmp_path):
    report = import_kernelbench(
        os.environ["KERNELBENCH_PATH"], tmp_path, Options(levels=(1,), workers=2)
    )
    done, total = report.by_group(level_of)["level 1"]
    assert total == 100 and done >= 85
    shutil.rmtree(tmp_path, ignore_errors=True)


def _spin(source: str) -> None:
    while True:
        pass


def _wait(source: str) -> None:
    import time

    time.sleep(60)


def test_a_conversion_is_limited_by_cpu_time_and_a_blocked_one_is_a_hang():
    # CPU seconds, not a wall clock: a busy machine slows a child down but gives it the same
    # CPU seconds for the same work, so the outcome does not change with the load
    from core.importers.isolate import Budget, isolated_all

    outcomes = isolated_all(
        [(_spin, ("spin.py",), "spin.py"), (_wait, ("wait.py",), "wait.py")],
        Budget(cpu_s=1, idle_s=3),
        workers=2,
    )
    assert [(o.source, o.kind) for o in outcomes] == [("spin.py", "cpu_limit"), ("wait.py", "hang")]


def test_a_run_file_names_the_baseline_for_its_whole_run(imported, tmp_path):
    from core.orchestration.pool import EvaluatorPool
    from core.orchestration.runfile import RunFileError, load_run_file

    out, _ = imported
    run = tmp_path / "run.yaml"
    run.write_text("tasks: [kernelbench/l1_001_scaled_add]\nbaseline_impl: torch_compile\n")
    spec = load_run_file(run, tasks_dir=out)
    assert spec.baseline_impl == "torch_compile"
    pool = EvaluatorPool(
        lambda device, folder: None, lambda: tmp_path, baseline_impl=spec.baseline_impl
    )
    assert pool.baseline_impl == "torch_compile"  # every evaluator the run makes gets it
    run.write_text("tasks: [kernelbench/l1_001_scaled_add]\nbaseline_impl: [a, b]\n")
    with pytest.raises(RunFileError, match="baseline_impl"):
        load_run_file(run, tasks_dir=out)
