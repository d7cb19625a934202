"""A `sim:` speedup divides by the baseline's *measured* time on the target where the arena has
one (core/data/sim_baselines.json), and by a per-task model fitted to those measurements for a
shape it lacks; the job and the result say which. Every figure carries its provenance: the
code of the baseline it was measured with. Figures of another baseline than today's are not
divided by: the baseline is predicted and the result names the command that re-measures it."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path

import pytest

from core.devices.device import sim_info
from core.devices.sim.baselines import (
    TABLE_FILE,
    axes_key,
    baseline_for,
    baseline_on,
    fit_task_model,
    load_table,
)
from core.devices.sim.provenance import code_digest, remeasure_command, task_code
from core.evaluation.job import build_job
from core.tasks.discovery import discover, find_task

ROOT = Path(__file__).resolve().parent.parent
CURRENT = "gemm/bf16_gemm"  # a task whose shipped figures are of today's baseline


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_a_measured_workload_gets_its_measured_time_and_its_own_uncertainty_as_band():
    table = load_table()["gpus"]["h200"][CURRENT]["torch"]["workloads"]
    axes = {"N": 6144, "M": 1, "K": 4096}
    known = baseline_for("h200", CURRENT, None, axes, roofline_us=1.0)
    assert known is not None and known["source"] == "measured"
    assert known["median_us"] == table[axes_key(axes)]["median_us"]  # axes order does not matter
    assert 0.02 <= known["band"] < 0.1, "its runs' spread, at least the run-to-run floor"
    assert "torch" in known["versions"], "the library versions it was measured with"


def test_a_shape_the_table_lacks_gets_the_task_model_with_its_error_as_band():
    modelled = baseline_for("h200", CURRENT, "torch", {"M": 5, "N": 5, "K": 5}, roofline_us=10.0)
    assert modelled is not None and modelled["source"] == "model" and 0 < modelled["band"] < 1
    bigger = baseline_for("h200", CURRENT, "torch", {"M": 5, "N": 5, "K": 5}, roofline_us=100.0)
    assert bigger["median_us"] > modelled["median_us"]
    assert baseline_for("h200", CURRENT, "a-library-never-measured", {"M": 1}, 1.0) is None
    assert baseline_for("b200", CURRENT, None, {"M": 1, "N": 6144, "K": 4096}, 1.0) is None


def test_the_fit_recovers_a_launch_floor_and_a_slope():
    points = [(r, 6.0 + 1.5 * r) for r in (0.01, 0.1, 1, 5, 20, 80, 200)]
    model = fit_task_model(points)
    assert model is not None and model.points == 7
    assert math.isclose(model.intercept_us, 6.0, rel_tol=0.1)
    assert math.isclose(model.slope, 1.5, rel_tol=0.1)
    assert model.error < 0.05


def test_the_code_hash_ignores_layout_comments_and_docstrings_but_not_code():
    a = 'def run(x):\n    """Doubles."""\n    return x * 2  # twice\n'
    b = '"""A module."""\n\n\ndef run(x):\n    return (\n        x * 2\n    )\n'
    assert code_digest(a) == code_digest(b)
    assert code_digest(a) != code_digest(a.replace("x * 2", "x * 3"))


def test_the_code_hash_is_the_same_on_every_python():
    """The H200's Python 3.12 once hashed every file otherwise than this 3.11 (its `ast.dump`
    has `type_params=[]` on each function), so every figure measured there read as another
    baseline's. The hash is of a canonical text that leaves empty fields out: this value is the
    one every Python must give (the H200's run checks it against the table)."""
    import ast

    source = 'def run(x, *, scale: float = 2.0):\n    """doc"""\n    return x * scale\n'
    assert code_digest(source) == "a551137e817af6e3584a1e8b84d0add4081f414c049f9467789e0bbbc660da33"
    tree = ast.parse(source)
    tree.body[0].type_params = []  # what 3.12 adds, empty
    tree.body[0]._fields = (*tree.body[0]._fields, "type_params")
    from core.devices.sim.provenance import _canonical

    assert _canonical(tree) == _canonical(ast.parse(source))


def test_the_code_hash_covers_what_the_baseline_imports_from_its_folder_and_its_inputs(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(find_task(CURRENT).path, folder)
    before = task_code(folder)
    assert set(before.files) == {"baseline.py"}
    (folder / "helper.py").write_text("SCALE = 1\n")
    source = (folder / "baseline.py").read_text()
    (folder / "baseline.py").write_text("from helper import SCALE  # noqa\n" + source)
    with_helper = task_code(folder)
    assert set(with_helper.files) == {"baseline.py", "helper.py"}
    (folder / "helper.py").write_text("SCALE = 2\n")
    assert task_code(folder).code_sha256 != with_helper.code_sha256, "an imported file changed"
    (folder / "inputs.py").write_text("def make_inputs(*a):\n    return None\n")
    assert "inputs.py" in task_code(folder).files, "the values a baseline is timed on"


def test_figures_of_another_baseline_are_stale_and_name_the_command_that_re_measures_them():
    axes = {"M": 1, "N": 6144, "K": 4096}
    today = task_code(find_task(CURRENT).path).code_sha256
    assert baseline_on("h200", CURRENT, ["torch"], axes, 1.0, today)["source"] == "measured"
    stale = baseline_on("h200", CURRENT, ["torch"], axes, 1.0, "0" * 64)
    assert stale is not None and stale["stale"] and "median_us" not in stale
    assert (
        remeasure_command(CURRENT) in stale["note"] and "predicted, not measured" in stale["note"]
    )


def test_a_sim_job_divides_by_todays_figures_and_predicts_a_changed_baseline(tmp_path):
    task = find_task(CURRENT)
    job = build_job(task, task.file("starter.py"), sim_info("sim:h200"), "cpu", 1, tmp_path)
    performance = job["stages"]["performance"]
    visible = [w for w in performance if not w["hidden"]]
    assert visible and all(w["measured_baseline"]["source"] == "measured" for w in visible)
    assert all(w["measured_baseline"]["median_us"] > 0 for w in performance)
    # the same task with its baseline changed (a user's copy): its figures are not divided by
    copy = tmp_path / "tasks" / "gemm" / "bf16_gemm"
    shutil.copytree(task.path, copy)
    (copy / "baseline.py").write_text(
        (copy / "baseline.py")
        .read_text()
        .replace("def run(", "def _unused():\n    pass\n\n\ndef run(")
    )
    changed = find_task(CURRENT, tmp_path / "tasks")
    job = build_job(changed, changed.file("starter.py"), sim_info("sim:h200"), "cpu", 1, tmp_path)
    for w in job["stages"]["performance"]:
        assert "measured_baseline" not in w and remeasure_command(CURRENT) in w["baseline_note"]
    # an uncalibrated GPU has no measurements: its baseline is predicted from counts, as before
    b200 = build_job(task, task.file("starter.py"), sim_info("sim:b200"), "cpu", 1, tmp_path)
    assert not any("measured_baseline" in w for w in b200["stages"]["performance"])


def test_a_sim_gpu_divides_by_the_implementation_that_gpu_runs():
    table = load_table()["gpus"]["h200"]
    # task.yaml's order of preference: the first measured on the H200; a library never measured
    # there is skipped; no `baselines:` means the torch composition
    order = [b.impl for b in find_task("attention/decode_paged_gqa").baselines]
    small = {"B": 1, "L": 32768, "P": 16, "HQ": 32, "HKV": 8, "D": 128}
    assert "torch-bmm" in table["attention/decode_paged_gqa"]
    assert (
        baseline_on("h200", "attention/decode_paged_gqa", order, small, 1.0)["impl"] == "torch-bmm"
    )
    big = {**small, "B": 32, "L": 8192}
    assert baseline_on("h200", "attention/decode_paged_gqa", order, big, 1.0)["impl"] == "torch"
    assert baseline_on("h200", CURRENT, ["flashinfer", "torch"], small, 1.0)["impl"] == "torch"
    assert baseline_on("h200", CURRENT, [], {"M": 1, "N": 6144, "K": 4096}, 1.0)["impl"] == "torch"


def test_the_shipped_table_is_what_the_bench_script_makes_from_the_committed_runs():
    bench = _bench("sim_baselines")
    shipped = json.loads(TABLE_FILE.read_text())
    paths = [ROOT / p for p in shipped["sources"] if (ROOT / p).is_file()]
    found = {k: v for k, v in bench.collect(paths).items() if k[1] == CURRENT}
    rebuilt = json.loads(json.dumps(bench.build(found, shipped["sources"]), sort_keys=True))
    assert rebuilt["gpus"]["h200"][CURRENT] == shipped["gpus"]["h200"][CURRENT]


# Tasks whose baseline.py changed after their H200 figures were taken, or that are too new to
# have any: on `sim:` each is predicted from its own model and says so (the test below). Take a
# task out once `PYTHONPATH=. python3 bench/sim_h200.py --no-published --write-table --tasks TASK`
# has run on an H200: the test fails while this set and the table disagree either way.
# None since 2026-12-02: every bundled task's figures re-measured on the H200
# (bench/results/sim_h200.json). A task whose baseline changes joins it until its next run.
AWAITING_H200: frozenset[str] = frozenset()


def h200_staleness() -> dict[str, str]:
    """Every bundled single-device task whose H200 figures are missing or of another
    baseline.py, with why."""
    table = load_table()["gpus"]["h200"]
    out: dict[str, str] = {}
    for task in discover():
        if task.multi_rank:
            continue  # collectives are predicted by the alpha-beta model, not divided
        entries = table.get(task.id)
        if not entries:
            out[task.id] = "missing"
            continue
        today = task_code(task.path).code_sha256
        stale = [
            impl
            for impl, entry in entries.items()
            if (entry.get("provenance") or {}).get("code_sha256") != today
        ]
        if stale:
            out[task.id] = f"measured with another baseline.py ({', '.join(stale)})"
    return out


def test_every_bundled_tasks_h200_figures_are_of_its_baseline_today():
    """The table is re-measured (bench/sim_h200.py on an H200) whenever a baseline changes:
    this fails, naming the tasks and the command, for a task that is stale and not known to
    await its re-measurement, and for one listed as awaiting that is current again."""
    stale = h200_staleness()
    unknown = {t: why for t, why in stale.items() if t not in AWAITING_H200}
    current = sorted(AWAITING_H200 - set(stale))
    assert not unknown, (
        f"H200 baseline figures {unknown}: re-measure them on an H200 with `PYTHONPATH=. python3 "
        f"bench/sim_h200.py --no-published --write-table --tasks TASK ...`"
    )
    assert not current, f"{current} are current again: take them out of AWAITING_H200"


@pytest.mark.parametrize("impl", ["torch"])
def test_the_table_carries_library_versions_for_every_entry(impl):
    for task_id, entries in load_table()["gpus"]["h200"].items():
        versions = (entries.get(impl) or {"provenance": {"versions": {"torch": "-"}}})[
            "provenance"
        ]["versions"]
        assert "torch" in versions, task_id
