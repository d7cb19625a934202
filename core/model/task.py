"""The task noun: what a task's `run` takes and returns (`TensorSpec`), how a result is judged
(`Correctness`, `Limits`), a multi-rank task's world and collective, the baselines it declares,
and the `Task` itself. core/tasks/spec.py loads and validates them from task.yaml."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from core.model.formulas import evaluate_formula
from core.model.workload import WORLD_AXIS, ModelWorkloads, Workload, WorkloadSets

MIN_SEEDS = 3
DEFAULT_BYTES_HOLD = 0.8  # `bytes_hold`: a task's byte formula is what any correct call moves


class SpecKind(str, Enum):
    """What one input or output of `run` is: a tensor with a shape, a scalar (an input such as
    eps, with no shape), or an output the candidate writes into one of its inputs."""

    TENSOR = "tensor"
    SCALAR = "scalar"
    INPLACE = "in-place output"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of the task's `run`: a tensor has a shape, a scalar input has
    `value` and no shape, an in-place output names the input it writes (`inplace_of`). An
    output that honest kernels write with atomics (its elements' order or values depend on
    which program got there first) says so (`atomic`): a `sim:` device does not hold what a
    program that ran an atomic stored there to the reference (docs/integrity.md)."""

    name: str
    dtype: str
    shape: tuple[str | int, ...] | None = None
    init: dict[str, Any] | None = None
    value: float | int | None = None
    inplace_of: str | None = None
    atomic: bool = False

    def to_json(self) -> dict[str, Any]:
        """The spec as a job carries it to the harness (core.harness.inputs reads it)."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape else None,
            "init": self.init,
            "value": self.value,
            "inplace_of": self.inplace_of,
            **({"atomic": True} if self.atomic else {}),
        }

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

    @property
    def itemsize(self) -> int:
        """Bytes per element, from the dtype's bit width (`bfloat16` 2, `float8_e4m3fn` 1;
        `bool` 1): every dtype of core/tasks/vocabulary.py names its width but `bool`."""
        bits = re.search(r"\d+", self.dtype)
        return max(1, int(bits.group()) // 8) if bits else 1


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
    # How a model's config gives rows (`arena tasks add-model`): one or more sections.
    model_workloads: tuple[ModelWorkloads, ...] = ()
    # `workloads.models`: the rows add-model wrote from the model zoo (GPU sizes, public, not
    # timed by an evaluation: the catalogue's record of every shape the models run).
    model_rows: tuple[Workload, ...] = ()
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
    # The share of `bytes` a correct call moves on every input the task draws (a `sim:` device
    # fails a counted call below it: sim_less_work). Below DEFAULT_BYTES_HOLD only where `bytes`
    # is an expectation over data-dependent traffic, as the experts a routed batch touches.
    bytes_hold: float = DEFAULT_BYTES_HOLD

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

    def tensor_shapes(self, axes: dict[str, int]) -> dict[str, list[int]]:
        """Each declared tensor's concrete shape at `axes` (inputs and outputs that have one),
        as a job's workload carries them to the harness."""
        return {
            s.name: list(s.concrete_shape(axes))
            for s in self.inputs + self.outputs
            if s.shape is not None
        }

    def tensor_bytes(self, axes: dict[str, int]) -> int | None:
        """The bytes of the declared tensors (inputs and outputs) at `axes`; None where a shape
        cannot be computed from these axes (a multi-rank task's, before its world size)."""
        try:
            return sum(
                math.prod(s.concrete_shape(axes)) * s.itemsize
                for s in self.inputs + self.outputs
                if s.shape is not None
            )
        except (NameError, KeyError, ValueError, TypeError, ZeroDivisionError):
            return None

    def file(self, name: str) -> Path:
        return self.path / name
