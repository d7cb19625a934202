"""The task format: every bundled task loads, and a bad task gets one error naming the file,
the field and the fix."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from core.evaluation.job import DRAWN_BYTES_FACTOR, within_declared_bytes
from core.model.formulas import evaluate_formula
from core.model.task import TensorSpec
from core.model.workload import Workload
from core.tasks.discovery import discover, find_task
from core.tasks.fields import TaskError, UnknownTaskError
from core.tasks.spec import load_task

BUNDLED = ["activation/silu_mul", "gemm/bf16_gemm", "norm/add_rmsnorm"]


def test_bundled_tasks_load_and_validate():
    ids = [t.id for t in discover()]
    for task_id in BUNDLED:
        assert task_id in ids
    for task in discover():
        assert task.correctness.seeds >= 3
        for sets in (task.gpu, task.cpu):
            assert sets.visible and sets.hidden.fixed
            assert any(v & (v - 1) for w in sets.hidden.fixed for v in w.axes.values()), (
                "a non-power-of-two hidden size"
            )
            for w in sets.visible:
                # a multi-rank task's formulas may use W, the world size: check every size it supports
                for at in (
                    [task.at_world(w, n) for n in task.world_size.sizes] if task.multi_rank else [w]
                ):
                    assert (
                        task.flops_for(at) >= 0 and task.bytes_for(at) > 0
                    )  # a cache write does no arithmetic


def test_find_task_by_id_and_unknown_id_suggests():
    assert find_task("gemm/bf16_gemm").name == "bf16_gemm"
    with pytest.raises(UnknownTaskError, match="did you mean gemm/bf16_gemm"):
        find_task("bf16_gemm")


def _broken(tmp_path: Path, fixture_tasks: Path, edit) -> Path:
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    edit(spec)
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return folder


@pytest.mark.parametrize(
    ("edit", "field", "fix"),
    [
        (lambda s: s.pop("flops"), "flops", "arithmetic over the axes"),
        (lambda s: s.update(flops="2 * N * Q"), "flops", "declare them under `axes:`"),
        (lambda s: s.update(flops="__import__('os')"), "flops", "use + - * /"),
        (lambda s: s["inputs"][0].update(dtype="bf16"), "inputs[0].dtype", "bfloat16"),
        (
            lambda s: s["inputs"][0].update(shape=["N", "Z"]),
            "inputs[0].shape",
            "declare it under `axes:`",
        ),
        (lambda s: s["correctness"].update(seeds=1), "correctness.seeds", "at least 3"),
        (
            lambda s: s["workloads"]["visible"][0].pop("D"),
            "workloads.visible[0].D",
            "positive integer",
        ),
        (lambda s: s["workloads"]["visible"][0].update(E=3), "workloads.visible[0]", "use only"),
        (
            lambda s: s["workloads"]["hidden"].update(fixed=[{"N": 64, "D": 128}]),
            "workloads.hidden.fixed[0]",
            "differ from visible",
        ),
        (
            lambda s: s["workloads"]["cpu"]["hidden"].update(fixed=[{"N": 32, "D": 64}]),
            "workloads.cpu.hidden.fixed",
            "not a power of two",
        ),
        (
            lambda s: s["workloads"]["hidden"]["draw"].update(ranges={"N": [5, 1]}),
            "workloads.hidden.draw.ranges",
            "low < high",
        ),
        (lambda s: s.update(peak="tf32"), "peak", "bf16"),
        (lambda s: s.update(bytes_hold=1.5), "bytes_hold", "a share in (0, 1]"),
        (lambda s: s.update(bytes_hold="most"), "bytes_hold", "moves on every input"),
        (lambda s: s.update(colour="red"), "(top level)", "use only"),
    ],
)
def test_bad_task_names_file_field_and_fix(tmp_path, fixture_tasks, edit, field, fix):
    folder = _broken(tmp_path, fixture_tasks, edit)
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    err = caught.value
    assert err.path.endswith("task.yaml")
    assert err.field == field
    assert fix in str(err)
    assert "\n" not in str(err), "one line"


def test_missing_file_and_bad_yaml(tmp_path, fixture_tasks):
    folder = _broken(tmp_path, fixture_tasks, lambda s: None)
    (folder / "baseline.py").unlink()
    with pytest.raises(TaskError, match=r"baseline\.py.*file is missing"):
        load_task(folder)
    folder = _broken(tmp_path / "b", fixture_tasks, lambda s: None)
    (folder / "task.yaml").write_text("axes: [unclosed\n")
    with pytest.raises(TaskError, match="not valid YAML"):
        load_task(folder)


def test_formulas_are_plain_arithmetic():
    assert evaluate_formula("2 * M * N * K", {"M": 2, "N": 3, "K": 4}) == 48
    assert evaluate_formula("max(M, 8) * ceil(N / 2)", {"M": 2, "N": 3}) == 16
    with pytest.raises(ValueError):
        evaluate_formula("M.__class__", {"M": 1})


def test_hidden_draws_are_secret_seeded_and_new(fixture_tasks):
    task = load_task(fixture_tasks / "elementwise" / "axpy")
    first = task.gpu.hidden.resolve(random.Random(7))
    assert first == task.gpu.hidden.resolve(random.Random(7))
    assert len(first) == 2 and first[-1].note == "drawn"
    labels = {w.label for w in task.gpu.visible} | {w.label for w in task.gpu.hidden.fixed}
    assert first[-1].label not in labels
    draws = {tuple(task.gpu.hidden.resolve(random.Random(s))[-1].axes.items()) for s in range(20)}
    assert len(draws) > 5, "different seeds draw different shapes"


def test_a_drawn_workload_takes_at_most_twice_the_largest_declared_ones_bytes() -> None:
    """A draw re-picks the ranged axes on a fixed workload's others: decode_paged_local drew 245
    sequences on its 20,000-token base, two 16 GiB KV caches, 17 times its largest declared
    workload, and its trusted worker ran out of an H200's memory. Every bundled task still
    draws its full count within the bound (at least half of a hidden set is drawn)."""
    for task in discover():
        for cpu in (False, True):
            sets = task.workloads(cpu=cpu)
            if sets.hidden.draw is None:
                continue
            declared = [*sets.visible, *sets.hidden.fixed]
            largest = max(task.tensor_bytes(w.axes) or 0 for w in declared)
            fits = within_declared_bytes(task, declared)
            for seed in range(6):
                hidden = sets.hidden.resolve(random.Random(seed), fits)
                drawn = hidden[len(sets.hidden.fixed) :]
                assert len(drawn) == sets.hidden.drawn_count, (task.id, cpu, seed)
                for w in drawn:
                    size = task.tensor_bytes(w.axes)
                    assert size is None or size <= DRAWN_BYTES_FACTOR * largest, (task.id, w.label)
    local = find_task("attention/decode_paged_local")
    sets = local.workloads(cpu=False)
    fits = within_declared_bytes(local, [*sets.visible, *sets.hidden.fixed])
    too_large = {"B": 245, "L": 20000, "P": 64, "HQ": 40, "HKV": 8, "D": 128, "W": 8192}
    assert not fits(Workload({**too_large, "C": 2, "SK": 2}, None, "drawn"))


def test_a_tensors_bytes_come_from_its_declared_shape_and_dtype(fixture_tasks) -> None:
    task = load_task(fixture_tasks / "elementwise" / "axpy")  # x, b, y: [N, D] float32
    assert task.tensor_bytes({"N": 64, "D": 128}) == 3 * 64 * 128 * 4
    assert task.tensor_bytes({"N": 64}) is None  # D unknown: not sized
    assert [
        TensorSpec("t", d).itemsize for d in ("bfloat16", "float8_e4m3fn", "int64", "bool")
    ] == [
        2,
        1,
        8,
        1,
    ]


def test_a_routed_task_declares_how_much_of_its_byte_formula_every_call_moves() -> None:
    """`bytes` of a routed MoE task counts the experts uniform routing touches: an expectation
    over the drawn routing. With skewed routing at a few tokens a correct call touches fewer
    (mxfp4_moe at T = 3: 8 of 11.6 on average), so the task says what share every call moves
    (`bytes_hold`), which a `sim:` device's count is held to; every other task keeps 0.8."""
    from core.model.task import DEFAULT_BYTES_HOLD
    from core.tasks.discovery import discover

    holds = {t.id: t.bytes_hold for t in discover()}
    assert holds["moe/mxfp4_moe"] == 0.4 and holds["moe/fused_moe"] == 0.6
    assert {h for tid, h in holds.items() if tid not in ("moe/mxfp4_moe", "moe/fused_moe")} == {
        DEFAULT_BYTES_HOLD
    }


def test_the_sim_holds_a_count_to_the_tasks_own_share_of_its_byte_formula() -> None:
    from core.harness.sim.judge import formula_problem

    launch = ({"dram_bytes": 0.5e6, "programs": 1, "per_program": {}}, None)
    formula = {"bytes": 1e6, "flops": 0.0, "dtype": "bf16"}
    assert "sim_less_work" in (formula_problem(formula, [launch], []) or "")
    assert formula_problem({**formula, "bytes_hold": 0.4}, [launch], []) is None
    assert "at least 80%" in (formula_problem({**formula, "bytes_hold": 0.0}, [launch], []) or "")
