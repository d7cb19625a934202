"""Task specs: load `task.yaml` and validate every field (the formulas are core.tasks.formulas,
finding tasks core.tasks.discovery).

A task folder is `tasks/<family>/<name>/` with `task.yaml`, `reference.py`, `baseline.py` and
`starter.py` (docs/task-format.md). A bad task is rejected with one `TaskError` that names the
file, the field and the fix.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from core.tasks.formulas import evaluate_formula, formula_names

FAMILIES = ("gemm", "attention", "moe", "norm", "activation", "elementwise", "sampling", "comm")
# Families of tasks that `arena import` writes from other benchmarks' sets (core/importers/):
# never bundled, and `arena tasks new` does not scaffold them.
IMPORTED_FAMILIES = ("kernelbench", "agentkernelarena")
TASK_FILES = ("task.yaml", "reference.py", "baseline.py", "starter.py")
BASELINE_KINDS = ("vendor_library", "vendor_kernel_library", "torch_composition")
LANGUAGES = ("triton", "pytorch", "cuda", "hip")
PEAKS = (
    "bf16",
    "fp8",
    "fp32",
    "link",
)  # `link`: a collective's bus bandwidth against the scale-up link
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
WORLD_AXIS = "W"  # reserved in multi-rank tasks: the harness sets it to the number of ranks
DTYPES = (
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
)
INIT_DISTS = {"normal": ("mean", "std"), "uniform": ("low", "high"), "randint": ("low", "high")}
WORKLOAD_META = ("model", "note")
MIN_SEEDS = 3
# The normalized model-config keys a `model_workloads` section may use; core/tasks/model_config.py
# maps Hugging Face config.json names onto them (docs/task-format.md).
MODEL_KEYS = (
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "num_experts",
    "top_k",
    "expert_intermediate_size",
    "n_group",
    "topk_group",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "v_head_dim",
    "sliding_window",
    "vocab_size",
)


class TaskError(ValueError):
    """A task that cannot be used; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field_name, problem, fix
        super().__init__(f"{path}: `{field_name}`: {problem}. Fix: {fix}")


class UnknownTaskError(LookupError):
    """A task id that no bundled or given task folder has."""


class SpecKind(str, Enum):
    """What one input or output of `run` is: a tensor with a shape, a scalar (an input such as
    eps, with no shape), or an output the candidate writes into one of its inputs."""

    TENSOR = "tensor"
    SCALAR = "scalar"
    INPLACE = "in-place output"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of the task's `run`: a tensor has a shape, a scalar input has
    `value` and no shape, an in-place output names the input it writes (`inplace_of`)."""

    name: str
    dtype: str
    shape: tuple[str | int, ...] | None = None
    init: dict[str, Any] | None = None
    value: float | int | None = None
    inplace_of: str | None = None

    @property
    def kind(self) -> SpecKind:
        if self.inplace_of is not None:
            return SpecKind.INPLACE
        return SpecKind.SCALAR if self.shape is None else SpecKind.TENSOR

    @property
    def is_scalar(self) -> bool:
        return self.kind is SpecKind.SCALAR

    def describe(self, inputs: Sequence[TensorSpec] = ()) -> str:
        """The one text every reader gets (agents' prompts, `arena tasks show`, the RL
        environment's signature): `bfloat16[M, K]`, `scalar float32 = 1e-06`, or
        `bfloat16[T, H, D] (written in place into input `q`)`. `inputs` (the task's) gives an
        in-place output the shape of the input it writes."""
        if self.kind is SpecKind.SCALAR:
            return f"scalar {self.dtype}" + (f" = {self.value}" if self.value is not None else "")
        shape = self.shape
        if self.kind is SpecKind.INPLACE:
            shape = shape or next((i.shape for i in inputs if i.name == self.inplace_of), None)
        text = self.dtype + (f"[{', '.join(str(d) for d in shape)}]" if shape else "")
        return text + (
            f" (written in place into input `{self.inplace_of}`)"
            if self.kind is SpecKind.INPLACE
            else ""
        )

    def concrete_shape(self, axes: dict[str, int]) -> tuple[int, ...]:
        """Each dimension is an int, an axis, or arithmetic over the axes such as `2 * I`."""
        assert self.shape is not None, f"{self.name} is a scalar"
        return tuple(
            d if isinstance(d, int) else int(evaluate_formula(d, axes)) for d in self.shape
        )


@dataclass(frozen=True)
class Workload:
    """Concrete values for every axis, plus where the shape comes from."""

    axes: dict[str, int]
    model: str | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.axes.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "axes": dict(self.axes),
            "model": self.model,
            "note": self.note,
            "label": self.label,
        }


@dataclass(frozen=True)
class Draw:
    """Hidden workloads drawn at evaluation time: a fixed one with `ranges` axes re-drawn."""

    count: int
    ranges: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class HiddenSet:
    fixed: tuple[Workload, ...]
    draw: Draw | None = None

    @property
    def drawn_count(self) -> int:
        """How many workloads are drawn: the task's count, and never fewer than the fixed ones.
        The fixed hidden workloads are public (task.yaml); only the drawn ones are secret, so
        at least half of a hidden set is drawn (docs/integrity.md, class 5)."""
        return 0 if self.draw is None else max(self.draw.count, len(self.fixed))

    def resolve(self, rng: random.Random) -> list[Workload]:
        """The fixed workloads plus `drawn_count` drawn ones (never a copy of a fixed one)."""
        drawn: list[Workload] = []
        if self.draw is not None:
            taken = {w.label for w in self.fixed}
            attempts = 0
            while (
                len(drawn) < self.drawn_count and attempts < 1000
            ):  # narrow ranges may hold fewer new shapes
                attempts += 1
                base = rng.choice(self.fixed)
                axes = dict(base.axes)
                for axis, (low, high) in self.draw.ranges.items():
                    axes[axis] = rng.randint(low, high)
                w = Workload(axes, base.model, "drawn")
                if w.label not in taken:
                    taken.add(w.label)
                    drawn.append(w)
        return list(self.fixed) + drawn


@dataclass(frozen=True)
class WorkloadSets:
    visible: tuple[Workload, ...]
    hidden: HiddenSet


@dataclass(frozen=True)
class Correctness:
    atol: float
    rtol: float
    min_match: float = 1.0
    seeds: int = MIN_SEEDS
    # `samples: {axis: B, at_least: 64}`: a stochastic output judged by pooled evidence (a
    # sampler) needs enough draws per workload: at least `at_least` rows of `axis` in all, so a
    # workload with B = 1 runs 64 seeds (docs/integrity.md, class 4).
    samples_axis: str | None = None
    samples_at_least: int = 0

    def seeds_for(self, axes: dict[str, int]) -> int:
        """Seeds a workload's correctness check runs."""
        if self.samples_axis is None or self.samples_axis not in axes:
            return self.seeds
        return max(self.seeds, -(-self.samples_at_least // max(1, int(axes[self.samples_axis]))))


@dataclass(frozen=True)
class Limits:
    """Seconds each stage may take before the evaluation is torn down."""

    compile_s: float = 300.0
    correctness_s: float = 300.0
    performance_s: float = 300.0


@dataclass(frozen=True)
class WorldSize:
    """A multi-rank task's world sizes: the ones it supports, and the CPU device's default."""

    sizes: tuple[int, ...]
    cpu: int


@dataclass(frozen=True)
class Collective:
    """What a multi-rank task moves, for bandwidth figures: the nccl-tests operation and its
    "size" S in bytes per rank (a formula over the axes and W). algbw = S / t and busbw =
    algbw × factor (docs/task-format.md)."""

    kind: str
    bytes: str

    def bus_factor(self, world: int) -> float:
        """nccl-tests' factor from algorithm to bus bandwidth: what each rank's link carries."""
        if world <= 1:
            return 0.0
        return 2 * (world - 1) / world if self.kind == "all_reduce" else (world - 1) / world


@dataclass(frozen=True)
class ModelWorkloads:
    """How a task's axes derive from a model config (`arena tasks add-model`): each axis is an
    expression over MODEL_KEYS or a list of integers; the cross product of the lists gives the
    workloads a model adds. The task applies to a model only if it has every `requires` key
    and none of the `excludes` keys (softmax top-k routing is not for a model that routes by
    sigmoid over expert groups, which has `n_group`)."""

    requires: tuple[str, ...]
    axes: dict[str, str | tuple[int, ...]]
    excludes: tuple[str, ...] = ()

    def workloads(self, config: dict[str, int]) -> list[dict[str, int]]:
        """Axis values for a model's normalized config, in the task's axis order; raises
        KeyError naming a key the config lacks and ValueError for a value that is not a
        positive integer."""
        fixed: dict[str, int] = {}
        for axis, rule in self.axes.items():
            if isinstance(rule, str):
                missing = sorted(formula_names(rule) - set(config))
                if missing:
                    raise KeyError(missing[0])
                value = evaluate_formula(rule, config)
                if value != int(value) or value <= 0:
                    raise ValueError(
                        f"{axis} = {rule} is {value:g} for this model, not a positive integer"
                    )
                fixed[axis] = int(value)
        rows: list[dict[str, int]] = [{}]
        for axis, rule in self.axes.items():
            choices = [fixed[axis]] if isinstance(rule, str) else list(rule)
            rows = [{**row, axis: v} for row in rows for v in choices]
        return rows


@dataclass(frozen=True)
class BaselineImpl:
    """One implementation a task's baseline.py can run, as task.yaml's `baselines:` lists
    them (in order of preference): `impl` is the name baseline.py reports (its `IMPL`) and
    every result records (`baseline_impl`), `kind` one of BASELINE_KINDS, `calls` one line."""

    impl: str
    kind: str
    calls: str


DEFAULT_IMPL = (
    "torch"  # a task that lists no `baselines:` has one: its `baseline`, run through torch
)


@dataclass(frozen=True)
class Task:
    id: str
    path: Path
    description: str
    models: tuple[str, ...]
    languages: tuple[str, ...]
    baseline_kind: str
    baseline: str
    axes: dict[str, str]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    correctness: Correctness
    flops: str
    bytes: str
    peak: str
    gpu: WorkloadSets
    cpu: WorkloadSets
    limits: Limits = field(default_factory=Limits)
    vendor_notes: str = ""
    model_workloads: ModelWorkloads | None = None
    world_size: WorldSize | None = None
    collective: Collective | None = None
    # Where an imported task came from and what its importer derived (docs/interop.md).
    provenance: dict[str, Any] | None = None
    baselines: tuple[BaselineImpl, ...] = ()  # in order of preference; the last is the fallback
    # Why the recorded baseline stays far from the speed of light, and why nothing faster is
    # available to it (docs/tasks.md lists it beside every baseline under 10% of SOL).
    baseline_note: str = ""
    # An external task's spec (core/tasks/external.py): it runs its own commands, scored by its own rules.
    external: Any = None

    def baseline_impl(self, impl: str | None) -> BaselineImpl | None:
        """The declared candidate named `impl`; None (a task with one candidate: that one)."""
        if impl is None:
            return self.baselines[0] if len(self.baselines) == 1 else None
        return next((b for b in self.baselines if b.impl == impl), None)

    @property
    def multi_rank(self) -> bool:
        return self.world_size is not None

    def at_world(self, w: Workload, world: int) -> Workload:
        """The workload as a multi-rank evaluation runs it: its axes plus W, the world size."""
        return Workload({**w.axes, WORLD_AXIS: world}, w.model, w.note)

    def collective_bytes(self, w: Workload) -> float:
        """The nccl-tests size S of workload `w` (its axes include W)."""
        assert self.collective is not None, f"{self.id} is not a collective"
        return evaluate_formula(self.collective.bytes, w.axes)

    @property
    def family(self) -> str:
        return self.id.split("/")[0]

    @property
    def name(self) -> str:
        return self.id.split("/")[1]

    def workloads(self, cpu: bool) -> WorkloadSets:
        return self.cpu if cpu else self.gpu

    def flops_for(self, w: Workload) -> float:
        return evaluate_formula(self.flops, w.axes)

    def bytes_for(self, w: Workload) -> float:
        return evaluate_formula(self.bytes, w.axes)

    def file(self, name: str) -> Path:
        return self.path / name


# --- loading -------------------------------------------------------------------------------


class _Fields:
    """Reads one mapping of task.yaml, raising TaskError with the field's dotted path."""

    def __init__(self, path: Path, data: Any, where: str):
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail(
                "must be a mapping",
                f"write `{where}` as `key: value` lines"
                if where
                else "start task.yaml with `schema_version: 1`",
            )
        self.data: dict[str, Any] = data

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, problem: str, fix: str, key: str | None = None) -> None:
        raise TaskError(
            self.path, self.at(key) if key else (self.where or "(top level)"), problem, fix
        )

    def get(
        self,
        key: str,
        kind: type | tuple[type, ...],
        fix: str,
        default: Any = ...,
    ) -> Any:
        if key not in self.data:
            if default is ...:
                self.fail("is missing", fix, key)
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            names = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            self.fail(f"must be a {names}, got {value!r}", fix, key)
        return value

    def no_unknown(self, allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            self.fail(f"unknown key(s) {', '.join(unknown)}", f"use only {', '.join(allowed)}")


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
    top = _Fields(spec_path, raw, "")
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
    world_size = _world_size(top, axes)
    # Shapes and formulas of a multi-rank task may use W; its workloads never list it.
    formula_axes = {**axes, WORLD_AXIS: "world size"} if world_size else axes

    inputs = tuple(
        _tensor(spec_path, d, f"inputs[{i}]", formula_axes, output=False)
        for i, d in enumerate(_list(top, "inputs"))
    )
    outputs = tuple(
        _tensor(spec_path, d, f"outputs[{i}]", formula_axes, output=True)
        for i, d in enumerate(_list(top, "outputs"))
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

    corr = _Fields(
        spec_path,
        top.get("correctness", dict, "add `correctness: {atol, rtol, min_match, seeds}`"),
        "correctness",
    )
    corr.no_unknown(("atol", "rtol", "min_match", "seeds", "samples"))
    samples_axis, samples_at_least = None, 0
    if "samples" in corr.data:
        smp = _Fields(
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
        try:
            unknown = formula_names(expr) - set(formula_axes)
        except (SyntaxError, ValueError) as exc:
            top.fail(
                f"`{expr}` cannot be evaluated ({exc})",
                "use + - * / // ** and min, max, ceil, floor, log2 over the axes",
                key,
            )
        if unknown:
            fix = "declare them under `axes:`"
            if WORLD_AXIS in unknown and world_size is None:
                fix += f"; `{WORLD_AXIS}` is the world size of a multi-rank task, which declares `world_size:`"
            top.fail(f"uses undeclared symbol(s) {', '.join(sorted(unknown))}", fix, key)
        formulas[key] = expr

    peak = top.get("peak", str, f"name the compute peak that bounds it: {', '.join(PEAKS)}")
    if peak not in PEAKS:
        top.fail(f"`{peak}` is unknown", f"use one of {', '.join(PEAKS)}", "peak")
    collective = _collective(top, formula_axes, world_size)
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

    wl = _Fields(
        spec_path,
        top.get("workloads", dict, "add `workloads:` with visible, hidden and cpu sets"),
        "workloads",
    )
    wl.no_unknown(("visible", "hidden", "cpu"))
    gpu_sets = _workload_sets(spec_path, wl, axes)
    cpu_sets = _workload_sets(
        spec_path,
        _Fields(
            spec_path,
            wl.get("cpu", dict, "add `cpu:` with visible and hidden sets at CPU sizes"),
            "workloads.cpu",
        ),
        axes,
    )

    limits_raw = _Fields(spec_path, top.get("limits", dict, "", {}), "limits")
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
        peak=peak,
        gpu=gpu_sets,
        cpu=cpu_sets,
        limits=limits,
        model_workloads=_model_workloads(spec_path, top, axes),
        world_size=world_size,
        collective=collective,
        provenance=top.get("provenance", dict, "a mapping: source, file, license, derived", None),
        baselines=_baselines(top, kind),
        baseline_note=" ".join(
            str(
                top.get("baseline_note", str, "say in a sentence why no faster baseline exists", "")
            ).split()
        ),
    )


def _baselines(top: _Fields, kind: str) -> tuple[BaselineImpl, ...]:
    """`baselines:` — the implementations baseline.py tries, best first: `{impl, kind, calls}`
    each; the last must need nothing but torch (it is what runs where no library imports).
    Without the key, the one candidate is `baseline` itself, named `torch`."""
    if "baselines" not in top.data:
        return (BaselineImpl(DEFAULT_IMPL, kind, str(top.data.get("baseline", ""))),)
    raw = top.get(
        "baselines",
        list,
        "list the implementations baseline.py tries, best first: `- {impl: liger, kind: vendor_kernel_library, calls: ...}`",
    )
    if not raw:
        top.fail(
            "is empty",
            "list at least the torch fallback: `- {impl: torch, kind: torch_composition, calls: ...}`",
            "baselines",
        )
    out = []
    for i, entry in enumerate(raw):
        f = _Fields(top.path, entry, f"baselines[{i}]")
        f.no_unknown(("impl", "kind", "calls"))
        name = f.get(
            "impl",
            str,
            "name the implementation as baseline.py's IMPL reports it, e.g. liger, flashinfer, torch",
        )
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.+-]*", name):
            f.fail(
                f"`{name}` is not a plain name",
                "use lower-case letters, digits and _ . + -",
                "impl",
            )
        entry_kind = f.get("kind", str, f"one of {', '.join(BASELINE_KINDS)}")
        if entry_kind not in BASELINE_KINDS:
            f.fail(f"`{entry_kind}` is unknown", f"use one of {', '.join(BASELINE_KINDS)}", "kind")
        out.append(
            BaselineImpl(
                name,
                entry_kind,
                str(f.get("calls", str, "say in one line what this implementation calls")).strip(),
            )
        )
    names = [b.impl for b in out]
    if len(set(names)) != len(names):
        top.fail(
            f"names repeat: {', '.join(names)}",
            "give every implementation its own `impl` name",
            "baselines",
        )
    if out[0].kind != kind:
        top.fail(
            f"the preferred implementation `{out[0].impl}` is `{out[0].kind}` but baseline_kind is `{kind}`",
            "make baseline_kind the kind of the first (preferred) entry of `baselines:`",
            "baseline_kind",
        )
    return tuple(out)


def _world_size(top: _Fields, axes: dict[str, str]) -> WorldSize | None:
    """The optional `world_size: {sizes: [2, 4, 8], cpu: 2}` of a multi-rank task."""
    if "world_size" not in top.data:
        return None  # a single-device task; W is then an ordinary axis name
    if WORLD_AXIS in axes:
        top.fail(
            f"`{WORLD_AXIS}` is reserved in multi-rank tasks: the harness sets it to the world size",
            f"remove `{WORLD_AXIS}` from `axes:`; shapes and formulas may still use it",
            "axes",
        )
    f = _Fields(top.path, top.data["world_size"], "world_size")
    f.no_unknown(("sizes", "cpu"))
    sizes = f.get("sizes", list, "list the world sizes the task supports, e.g. [2, 4, 8]")
    if not sizes or not all(
        isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 64 for n in sizes
    ):
        f.fail(
            f"{sizes!r} is not a list of world sizes",
            "give integers from 1 to 64, e.g. [2, 4, 8]",
            "sizes",
        )
    cpu = f.get("cpu", int, "the CPU device's world size, one of `sizes` (2 keeps CI short)", 2)
    if cpu not in sizes:
        f.fail(
            f"{cpu} is not one of sizes {sizes}",
            "choose the CPU device's world size among `sizes`",
            "cpu",
        )
    return WorldSize(tuple(sorted(set(sizes))), cpu)


def _collective(
    top: _Fields, formula_axes: dict[str, str], world_size: WorldSize | None
) -> Collective | None:
    if "collective" not in top.data:
        return None
    if world_size is None:
        top.fail(
            "is given but the task has no `world_size`",
            "add `world_size: {sizes: [2, 4, 8], cpu: 2}` (a collective runs on several ranks)",
            "collective",
        )
    f = _Fields(top.path, top.data["collective"], "collective")
    f.no_unknown(("kind", "bytes"))
    kind = f.get("kind", str, f"one of {', '.join(COLLECTIVES)}")
    if kind not in COLLECTIVES:
        f.fail(
            f"`{kind}` is unknown",
            f"use one of {', '.join(COLLECTIVES)} (the nccl-tests operation whose bus-bandwidth factor applies)",
            "kind",
        )
    expr = str(
        f.get("bytes", (str, int), "the nccl-tests size S in bytes per rank, e.g. 2 * T * H")
    )
    try:
        unknown = formula_names(expr) - set(formula_axes)
    except (SyntaxError, ValueError) as exc:
        f.fail(
            f"`{expr}` cannot be evaluated ({exc})",
            "use + - * / // ** and min, max, ceil, floor, log2 over the axes and W",
            "bytes",
        )
    if unknown:
        f.fail(
            f"uses undeclared symbol(s) {', '.join(sorted(unknown))}",
            "use the declared axes and W",
            "bytes",
        )
    return Collective(kind, expr)


def _list(fields: _Fields, key: str) -> list[Any]:
    items = fields.get(
        key, list, f"list the {key} in call order: `- {{name: x, shape: [M, K], dtype: bfloat16}}`"
    )
    if not items:
        fields.fail("is empty", f"list at least one of the {key}", key)
    return items


def _tensor(path: Path, raw: Any, where: str, axes: dict[str, str], output: bool) -> TensorSpec:
    f = _Fields(path, raw, where)
    f.no_unknown(
        ("name", "shape", "dtype", "inplace_of")
        if output
        else ("name", "shape", "dtype", "init", "value")
    )
    name = f.get("name", str, "give it a name")
    dtype = f.get("dtype", str, f"one of {', '.join(DTYPES)}")
    if dtype not in DTYPES:
        f.fail(f"`{dtype}` is not a supported dtype", f"use one of {', '.join(DTYPES)}", "dtype")
    value = f.get("value", (int, float), "a number", None)
    shape_raw = f.get("shape", list, "a list of axis names or integers, e.g. [M, K]", None)
    if output and shape_raw is None and "inplace_of" not in f.data:
        f.fail("is missing", "give the output's shape, e.g. [M, N]", "shape")
    if not output and (shape_raw is None) == (value is None):
        f.fail(
            "an input has either a `shape` (a tensor) or a `value` (a scalar)",
            "give exactly one of them",
        )
    shape = None
    if shape_raw is not None:
        for dim in shape_raw:
            if isinstance(dim, bool) or not (
                (isinstance(dim, int) and dim > 0)
                or (isinstance(dim, str) and _is_axis_expr(dim, axes))
            ):
                f.fail(
                    f"dimension {dim!r} is neither a positive integer nor arithmetic over declared axes",
                    "declare it under `axes:`",
                    "shape",
                )
        shape = tuple(shape_raw)
    init = f.get("init", dict, "e.g. {dist: normal, std: 1.0}", None)
    if init is not None:
        dist = init.get("dist")
        if dist not in INIT_DISTS:
            f.fail(f"dist `{dist}` is unknown", f"use one of {', '.join(INIT_DISTS)}", "init.dist")
        extra = set(init) - {"dist", *INIT_DISTS[dist]}
        if extra:
            f.fail(
                f"unknown key(s) {', '.join(sorted(extra))}",
                f"{dist} takes {', '.join(INIT_DISTS[dist])}",
                "init",
            )
        if dist != "normal" and not init.get("low", 0) < init.get("high", 1):
            f.fail("needs low < high", "e.g. {dist: uniform, low: -1, high: 1}", "init")
    return TensorSpec(
        name=name,
        dtype=dtype,
        shape=shape,
        init=init,
        value=value,
        inplace_of=f.get("inplace_of", str, "an input's name", None),
    )


def _is_axis_expr(dim: str, axes: dict[str, str]) -> bool:
    try:
        return formula_names(dim) <= set(axes)
    except (SyntaxError, ValueError):
        return False


def _workloads(path: Path, raw: Any, where: str, axes: dict[str, str]) -> tuple[Workload, ...]:
    if not isinstance(raw, list) or not raw:
        raise TaskError(
            path,
            where,
            "must be a non-empty list",
            "list workloads as `- {M: 16, N: 4096, K: 4096}`",
        )
    result = []
    for i, item in enumerate(raw):
        f = _Fields(path, item, f"{where}[{i}]")
        f.no_unknown(tuple(axes) + WORKLOAD_META)
        values = {}
        for axis in axes:
            v = f.get(axis, int, "give every axis a positive integer")
            if v <= 0:
                f.fail(f"is {v}", "give a positive integer", axis)
            values[axis] = v
        result.append(Workload(values, f.data.get("model"), f.data.get("note")))
    return tuple(result)


def _workload_sets(path: Path, f: _Fields, axes: dict[str, str]) -> WorkloadSets:
    visible = _workloads(
        path, f.get("visible", list, "list the visible workloads"), f.at("visible"), axes
    )
    h = _Fields(
        path,
        f.get("hidden", dict, "add `hidden: {fixed: [...], draw: {count, ranges}}`"),
        f.at("hidden"),
    )
    h.no_unknown(("fixed", "draw"))
    fixed = _workloads(
        path, h.get("fixed", list, "list the fixed hidden workloads"), h.at("fixed"), axes
    )
    draw = None
    if "draw" in h.data:
        d = _Fields(path, h.data["draw"], h.at("draw"))
        d.no_unknown(("count", "ranges"))
        count = d.get("count", int, "how many workloads to draw, e.g. 2")
        ranges_raw = d.get("ranges", dict, "e.g. {M: [1, 4096]}")
        ranges = {}
        for axis, bounds in ranges_raw.items():
            if axis not in axes:
                d.fail(f"`{axis}` is not a declared axis", "draw only declared axes", "ranges")
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(isinstance(b, int) and b > 0 for b in bounds)
                and bounds[0] < bounds[1]
            ):
                d.fail(
                    f"{axis}: {bounds!r} is not [low, high]",
                    "give two positive integers, low < high",
                    "ranges",
                )
            ranges[axis] = (bounds[0], bounds[1])
        if count < 1 or not ranges:
            d.fail("draws nothing", "give count >= 1 and at least one range")
        draw = Draw(count, ranges)
    visible_labels = {w.label for w in visible}
    for i, w in enumerate(fixed):
        if w.label in visible_labels:
            raise TaskError(
                path,
                f"{h.at('fixed')}[{i}]",
                f"{w.label} is also a visible workload",
                "make hidden workloads differ from visible ones",
            )
    if not any(not _power_of_two(v) for w in fixed for v in w.axes.values()):
        raise TaskError(
            path,
            h.at("fixed"),
            "has no size that is not a power of two",
            "add a workload with an odd or irregular size (e.g. M=77)",
        )
    return WorkloadSets(visible, HiddenSet(fixed, draw))


_MODEL_EXPR_NODES = (
    ast.Expression,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.FloorDiv,
    ast.USub,
)


def _model_expr_problem(expr: str) -> str | None:
    """Why `expr` is not integer arithmetic over MODEL_KEYS (+ - * // and parentheses), or None."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return f"`{expr}` is not an expression"
    for node in ast.walk(tree):
        if not isinstance(node, _MODEL_EXPR_NODES) or (
            isinstance(node, ast.Constant) and (type(node.value) is not int)
        ):
            return f"`{expr}` uses `{ast.unparse(node)}`; only integers, + - * // and parentheses are allowed"
    unknown = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(MODEL_KEYS))
    if unknown:
        return f"`{expr}` uses unknown config key(s) {', '.join(unknown)}"
    return None


def _model_workloads(path: Path, top: _Fields, axes: dict[str, str]) -> ModelWorkloads | None:
    """The optional `model_workloads` section: every axis derived, every key a normalized one."""
    if "model_workloads" not in top.data:
        return None
    keys = ", ".join(MODEL_KEYS)
    f = _Fields(path, top.data["model_workloads"], "model_workloads")
    f.no_unknown(("requires", "excludes", "axes"))
    requires = f.get(
        "requires",
        list,
        f"list the normalized config keys the model must have, e.g. [num_experts] (one of {keys})",
    )
    excludes = f.data.get("excludes", [])
    if not isinstance(excludes, list):
        f.fail(
            f"{excludes!r} is not a list",
            "list the normalized config keys the model must not have, e.g. [n_group]",
            "excludes",
        )
    for field_name, listed in (("requires", requires), ("excludes", excludes)):
        for key in listed:
            if key not in MODEL_KEYS:
                f.fail(f"`{key}` is not a normalized config key", f"use one of {keys}", field_name)
    rules = _Fields(
        path,
        f.get("axes", dict, "give every axis an expression over config keys or a list of integers"),
        "model_workloads.axes",
    )
    derived: dict[str, str | tuple[int, ...]] = {}
    for axis, rule in rules.data.items():
        axis = str(axis)
        if axis not in axes:
            rules.fail(
                f"`{axis}` is not a declared axis",
                f"derive only the axes declared under `axes:` ({', '.join(axes)})",
                axis,
            )
        if isinstance(rule, list):
            if not rule or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in rule
            ):
                rules.fail(
                    f"{rule!r} is not a list of positive integers",
                    "give token buckets such as [1, 128, 4096]",
                    axis,
                )
            derived[axis] = tuple(rule)
        elif isinstance(rule, (str, int)) and not isinstance(rule, bool):
            problem = _model_expr_problem(str(rule))
            if problem:
                rules.fail(
                    problem, f"write arithmetic (+ - * // and parentheses) over {keys}", axis
                )
            derived[axis] = str(rule)
        else:
            rules.fail(
                f"{rule!r} is neither an expression nor a list of integers",
                "e.g. `E: num_experts` or `T: [1, 128, 4096]`",
                axis,
            )
    missing = [a for a in axes if a not in derived]
    if missing:
        rules.fail(
            f"axis(es) {', '.join(missing)} have no rule",
            "give every declared axis an expression or a list of integers",
        )
    return ModelWorkloads(
        requires=tuple(str(k) for k in requires),
        axes={a: derived[a] for a in axes},
        excludes=tuple(str(k) for k in excludes),
    )


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
