"""Task specs: load `task.yaml` and validate every field into a `core.model.task.Task` (the
vocabulary is core.tasks.vocabulary, the field reader core.tasks.fields, the larger sections
core.tasks.sections, the formulas core.model.formulas, finding tasks core.tasks.discovery).

A task folder is `tasks/<family>/<name>/` with `task.yaml`, `reference.py`, `baseline.py` and
`starter.py` (docs/task-format.md). A bad task is rejected with one `TaskError` that names the
file, the field and the fix.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from core.model.task import DEFAULT_BYTES_HOLD, MIN_SEEDS, Correctness, Limits, Task
from core.model.workload import WORLD_AXIS
from core.tasks.fields import Fields, TaskError, read_list
from core.tasks.model_sections import read_model_rows, read_model_workloads
from core.tasks.sections import (
    read_baselines,
    read_collective,
    read_tensor,
    read_workload_sets,
    read_world_size,
)
from core.tasks.vocabulary import (
    BASELINE_KINDS,
    FAMILIES,
    IMPORTED_FAMILIES,
    LANGUAGES,
    PEAKS,
    TASK_FILES,
)


def load_task(task_dir: Path | str, tasks_root: Path | str | None = None) -> Task:
    """Load and validate one task folder."""
    task_dir = Path(task_dir).resolve()
    spec_path = task_dir / "task.yaml"
    if spec_path.is_file() and task_dir.parent.name in IMPORTED_FAMILIES:
        from core.tasks import (
            external,  # an imported task of kind `external` has no reference or workloads
        )

        raw_external = external.read_raw(spec_path)
        if external.is_external(raw_external):
            try:
                return external.load_external_task(
                    task_dir, f"{task_dir.parent.name}/{task_dir.name}", raw_external
                )
            except external.ExternalError as exc:
                raise TaskError(exc.path, exc.field_name, exc.problem, exc.fix) from None
    for name in TASK_FILES:
        if not (task_dir / name).is_file():
            raise TaskError(
                task_dir / name, name, "file is missing", f"add {name} (docs/task-format.md)"
            )
    task_id = f"{task_dir.parent.name}/{task_dir.name}"
    if task_dir.parent.name not in FAMILIES + IMPORTED_FAMILIES:
        raise TaskError(
            spec_path,
            "(folder)",
            f"family `{task_dir.parent.name}` is unknown",
            f"put the task under one of {', '.join(FAMILIES)}",
        )
    try:
        raw = yaml.safe_load(spec_path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(syntax)"
        raise TaskError(
            spec_path,
            where,
            f"is not valid YAML ({getattr(exc, 'problem', exc)})",
            "fix the YAML syntax",
        ) from None
    top = Fields(spec_path, raw, "")
    top.no_unknown(
        (
            "schema_version",
            "description",
            "models",
            "languages",
            "baseline_kind",
            "baseline",
            "vendor_notes",
            "axes",
            "inputs",
            "outputs",
            "correctness",
            "flops",
            "bytes",
            "peak",
            "workloads",
            "limits",
            "model_workloads",
            "world_size",
            "collective",
            "provenance",
            "baselines",
            "baseline_note",
            "bytes_hold",
        )
    )
    version = top.get("schema_version", int, "write `schema_version: 1`")
    if version != 1:
        top.fail(
            f"version {version} is not supported", "write `schema_version: 1`", "schema_version"
        )

    axes_raw = top.get(
        "axes", dict, "declare every shape symbol under `axes:` with a one-line meaning"
    )
    axes = {str(k): str(v) for k, v in axes_raw.items()}
    if not axes:
        top.fail("declares no axis", "declare every shape symbol under `axes:`", "axes")
    world_size = read_world_size(top, axes)
    # Shapes and formulas of a multi-rank task may use W; its workloads never list it.
    formula_axes = {**axes, WORLD_AXIS: "world size"} if world_size else axes

    inputs = tuple(
        read_tensor(spec_path, d, f"inputs[{i}]", formula_axes, output=False)
        for i, d in enumerate(read_list(top, "inputs"))
    )
    outputs = tuple(
        read_tensor(spec_path, d, f"outputs[{i}]", formula_axes, output=True)
        for i, d in enumerate(read_list(top, "outputs"))
    )
    names = [t.name for t in inputs]
    for i, out in enumerate(outputs):
        if out.inplace_of is not None and out.inplace_of not in names:
            raise TaskError(
                spec_path,
                f"outputs[{i}].inplace_of",
                f"`{out.inplace_of}` is not an input",
                f"name one of {', '.join(names)}",
            )
    if len(set(names)) != len(names):
        top.fail("input names repeat", "give every input its own name", "inputs")

    corr = Fields(
        spec_path,
        top.get("correctness", dict, "add `correctness: {atol, rtol, min_match, seeds}`"),
        "correctness",
    )
    corr.no_unknown(("atol", "rtol", "min_match", "seeds", "samples"))
    samples_axis, samples_at_least = None, 0
    if "samples" in corr.data:
        smp = Fields(
            spec_path,
            corr.get("samples", dict, "give `samples: {axis: B, at_least: 64}`"),
            corr.at("samples"),
        )
        smp.no_unknown(("axis", "at_least"))
        samples_axis = smp.get(
            "axis", str, "name the axis whose size is the draws per call, e.g. B"
        )
        samples_at_least = smp.get("at_least", int, "the draws a workload needs in all, e.g. 64")
        if samples_axis not in axes:
            smp.fail(
                f"`{samples_axis}` is not a declared axis", "name one of the task's axes", "axis"
            )
        if samples_at_least < 1:
            smp.fail(f"is {samples_at_least}", "use at least 1", "at_least")
    correctness = Correctness(
        atol=corr.get("atol", float, "give an absolute tolerance, e.g. 1.0e-2"),
        rtol=corr.get("rtol", float, "give a relative tolerance, e.g. 1.0e-2"),
        min_match=corr.get("min_match", float, "a fraction in (0, 1]", 1.0),
        seeds=corr.get("seeds", int, f"at least {MIN_SEEDS}", MIN_SEEDS),
        samples_axis=samples_axis,
        samples_at_least=samples_at_least,
    )
    if not 0 < correctness.min_match <= 1:
        corr.fail("must be in (0, 1]", "use e.g. 1.0 (every element) or 0.99", "min_match")
    if correctness.seeds < MIN_SEEDS:
        corr.fail(f"is {correctness.seeds}", f"use at least {MIN_SEEDS} seeds", "seeds")
    if correctness.atol < 0 or correctness.rtol < 0:
        corr.fail("tolerances must not be negative", "use atol, rtol >= 0")

    formulas = {}
    for key in ("flops", "bytes"):
        expr = str(
            top.get(
                key,
                (str, int, float),
                f"give the {key} as arithmetic over the axes, e.g. 2 * M * N * K",
            )
        )
        unknown = top.undeclared(expr, formula_axes, key, "the axes")
        if unknown:
            fix = "declare them under `axes:`"
            if WORLD_AXIS in unknown and world_size is None:
                fix += f"; `{WORLD_AXIS}` is the world size of a multi-rank task, which declares `world_size:`"
            top.fail(f"uses undeclared symbol(s) {', '.join(sorted(unknown))}", fix, key)
        formulas[key] = expr

    bytes_hold = top.get(
        "bytes_hold",
        (int, float),
        "the share of `bytes` a correct call moves on every input the task draws, e.g. 0.5",
        DEFAULT_BYTES_HOLD,
    )
    if not 0 < float(bytes_hold) <= 1:
        top.fail(
            f"is {bytes_hold!r}",
            "give a share in (0, 1]: lower than 0.8 only where `bytes` is an expectation over "
            "data-dependent traffic (routing), low enough for its smallest workloads",
            "bytes_hold",
        )
    peak = top.get("peak", str, f"name the compute peak that bounds it: {', '.join(PEAKS)}")
    if peak not in PEAKS:
        top.fail(f"`{peak}` is unknown", f"use one of {', '.join(PEAKS)}", "peak")
    collective = read_collective(top, formula_axes, world_size)
    if (peak == "link") != (collective is not None):
        top.fail(
            f"is `{peak}`"
            + (
                " but the task declares no `collective`"
                if peak == "link"
                else " but the task is a collective"
            ),
            "use `peak: link` exactly for tasks with a `collective` section (their speed of light is the link's bandwidth)",
            "peak",
        )
    kind = top.get("baseline_kind", str, f"one of {', '.join(BASELINE_KINDS)}")
    if kind not in BASELINE_KINDS:
        top.fail(f"`{kind}` is unknown", f"use one of {', '.join(BASELINE_KINDS)}", "baseline_kind")
    languages = tuple(
        str(x)
        for x in top.get(
            "languages", list, f"list the languages a candidate may use: {', '.join(LANGUAGES)}"
        )
    )
    bad = [x for x in languages if x not in LANGUAGES]
    if bad or not languages:
        top.fail(f"unknown or empty: {bad}", f"use some of {', '.join(LANGUAGES)}", "languages")

    wl = Fields(
        spec_path,
        top.get("workloads", dict, "add `workloads:` with visible, hidden and cpu sets"),
        "workloads",
    )
    wl.no_unknown(("visible", "hidden", "cpu", "models"))
    gpu_sets = read_workload_sets(spec_path, wl, axes)
    model_rows = read_model_rows(spec_path, wl, axes, gpu_sets)
    cpu_sets = read_workload_sets(
        spec_path,
        Fields(
            spec_path,
            wl.get("cpu", dict, "add `cpu:` with visible and hidden sets at CPU sizes"),
            "workloads.cpu",
        ),
        axes,
    )

    limits_raw = Fields(spec_path, top.get("limits", dict, "", {}), "limits")
    limits_raw.no_unknown(("compile_s", "correctness_s", "performance_s"))
    limits = Limits(
        **{
            k: limits_raw.get(k, float, "seconds, e.g. 300", getattr(Limits, k))
            for k in ("compile_s", "correctness_s", "performance_s")
        }
    )

    return Task(
        id=task_id,
        path=task_dir,
        description=str(top.get("description", str, "describe what the kernel computes")).strip(),
        models=tuple(
            str(m) for m in top.get("models", list, "list the models the shapes come from")
        ),
        languages=languages,
        baseline_kind=kind,
        baseline=str(top.get("baseline", str, "say in one line what the baseline calls")),
        vendor_notes=str(top.get("vendor_notes", str, "say why vendors differ", "")).strip(),
        axes=axes,
        inputs=inputs,
        outputs=outputs,
        correctness=correctness,
        flops=formulas["flops"],
        bytes=formulas["bytes"],
        bytes_hold=float(bytes_hold),
        peak=peak,
        gpu=gpu_sets,
        cpu=cpu_sets,
        limits=limits,
        model_workloads=read_model_workloads(spec_path, top, axes),
        model_rows=model_rows,
        world_size=world_size,
        collective=collective,
        provenance=top.get("provenance", dict, "a mapping: source, file, license, derived", None),
        baselines=read_baselines(top, kind),
        baseline_note=" ".join(
            str(
                top.get("baseline_note", str, "say in a sentence why no faster baseline exists", "")
            ).split()
        ),
    )
