"""`arena import agentkernelarena`: AgentKernelArena's template Triton tasks become arena tasks;
HIP and off-template tasks are reported with their reason. The fixture folder holds tasks in
AgentKernelArena's format written for these tests (tests/fixtures/agentkernelarena/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.importers.agentkernelarena import Options, category_of, import_agentkernelarena
from core.tasks.spec import load_task

FIXTURE = Path(__file__).parent / "fixtures" / "agentkernelarena"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("aka")
    return out, import_agentkernelarena(FIXTURE, out)


def test_template_tasks_convert_and_the_rest_become_external_tasks(imported):
    _, report = imported
    modes = {c.task_id: c.mode for c in report.converted}
    assert modes == {
        "agentkernelarena/vllm_scale_rows": "native",
        "agentkernelarena/vllm_scale_cols": "native",
        "agentkernelarena/hip2hip_others_gelu": "external",
        "agentkernelarena/vllm_offtemplate": "external",
    }
    # a repository task clones an upstream repository at evaluation: reported, not copied
    assert [(s.source, s.kind) for s in report.skipped] == [
        ("tasks/repository/upstream/config.yaml".rsplit("/", 1)[0], "repository")
    ]
    assert report.by_group(category_of) == {
        "hip2hip/others": (1, 1),
        "repository/upstream": (0, 1),
        "triton2triton/vllm": (3, 3),
    }


def test_without_external_tasks_the_rest_say_why(tmp_path):
    report = import_agentkernelarena(FIXTURE, tmp_path, Options(external=False))
    assert [c.task_id for c in report.converted] == [
        "agentkernelarena/vllm_scale_cols",
        "agentkernelarena/vllm_scale_rows",
    ]
    why = {s.source.rsplit("/", 1)[-1]: s.kind for s in report.skipped}
    assert why == {
        "gelu": "hip2hip",
        "triton_offtemplate": "off_template",
        "upstream": "repository",
    }
    assert "AMD devices only" in next(s.reason for s in report.skipped if s.kind == "hip2hip")


def test_the_task_follows_the_runner(imported):
    out, _ = imported
    task = load_task(out / "agentkernelarena" / "vllm_scale_rows")
    # axes: the names run_correctness unpacks each TEST_SHAPES entry into; shapes found by replaying it
    assert task.axes.keys() == {"rows", "cols"}
    assert [(s.name, s.shape) for s in task.inputs] == [
        ("x", ("rows", "cols")),
        ("scale", ("rows",)),
    ]
    assert [w.axes for w in task.gpu.visible] == [
        {"rows": 8, "cols": 64},
        {"rows": 16, "cols": 128},
        {"rows": 32, "cols": 96},
        {"rows": 4, "cols": 256},
    ]
    assert all(
        w.axes["cols"] & (w.axes["cols"] - 1) for w in task.gpu.hidden.fixed
    )  # not powers of two
    assert (task.correctness.atol, task.correctness.rtol) == (
        1e-5,
        1e-5,
    )  # the runner's own allclose
    assert (
        task.provenance["source"] == "agentkernelarena"
        and task.provenance["license"] == "Apache-2.0"
    )
    assert task.provenance["derived"]["fixed_arguments"] == {
        "clamp": "False"
    }  # the flag every shape passes


def test_inputs_are_the_runners_own_and_the_reference_is_its_reference_function(imported):
    import importlib.util

    import torch

    folder = imported[0] / "agentkernelarena" / "vllm_scale_rows"

    def module(name: str):
        spec = importlib.util.spec_from_file_location(f"aka_{name}", folder / f"{name}.py")
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)  # type: ignore[union-attr]
        return m

    x, scale = module("inputs").make_inputs(
        {"rows": 5, "cols": 33}, torch.Generator("cpu").manual_seed(1)
    )
    assert (
        x.shape == (5, 33) and scale.shape == (5,) and float(scale.min()) >= 0.5
    )  # rand() + 0.5, as the runner draws it
    assert all(
        "@triton.jit" not in (folder / f).read_text() for f in ("inputs.py", "reference.py")
    )  # the kernel stays out of both
    assert torch.equal(module("reference").run(x, scale), x * scale[:, None])


def test_an_integer_argument_that_follows_a_tensors_shape_is_read_off_it(imported):
    # scale_cols(x, scale, width): width changes with the shape and is x.shape[1] at every one
    task = load_task(imported[0] / "agentkernelarena" / "vllm_scale_cols")
    assert [i.name for i in task.inputs] == ["x", "scale"]
    assert task.provenance["derived"]["arguments_from_shapes"] == {"width": "x.shape[1]"}
    assert "_ARENA_FROM_SHAPE = {'width': ('x', 1)}" in task.file("baseline.py").read_text()


def test_converted_tasks_validate(imported):
    out, report = imported
    for c in (
        report.converted
    ):  # external ones: their commands and the files they name (tests/test_external_tasks.py)
        result = validate_task(
            Path(c.path), ValidateOptions()
        )  # the harness too: baseline and starter pass on CPU
        assert result.passed, [f"{x.name}: {x.message}" for x in result.failed]


def test_the_command_reports_json(tmp_path, capsys):
    assert main(["import", "agentkernelarena", str(FIXTURE), "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (
        data["benchmark"] == "agentkernelarena"
        and len(data["converted"]) == 4
        and len(data["skipped"]) == 1
    )
    assert sorted(c["mode"] for c in data["converted"]) == [
        "external",
        "external",
        "native",
        "native",
    ]


@pytest.mark.skipif(
    not os.environ.get("AGENTKERNELARENA_PATH"),
    reason="set AGENTKERNELARENA_PATH to an AgentKernelArena checkout to import the real set",
)
def test_the_real_set_converts_most_vllm_triton_tasks(tmp_path):
    report = import_agentkernelarena(os.environ["AGENTKERNELARENA_PATH"], tmp_path)
    done, total = report.by_group(category_of)["triton2triton/vllm"]
    assert total >= 100 and done >= total // 3
