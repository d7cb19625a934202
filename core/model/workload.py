"""The workload noun: concrete values for a task's axes (`Workload`), the visible and hidden sets
a task declares (`WorkloadSets`, `HiddenSet` with its drawn part), and how a model config derives
a task's axes (`ModelWorkloads`). core/tasks/spec.py builds them from task.yaml."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.model.formulas import evaluate_formula, formula_names

WORLD_AXIS = "W"  # reserved in multi-rank tasks: the harness sets it to the number of ranks


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

    def resolve(
        self, rng: random.Random, fits: Callable[[Workload], bool] | None = None
    ) -> list[Workload]:
        """The fixed workloads plus `drawn_count` drawn ones (never a copy of a fixed one, and
        only ones that `fits` allows: a shape drawn too large is drawn again)."""
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
                if w.label not in taken and (fits is None or fits(w)):
                    taken.add(w.label)
                    drawn.append(w)
        return list(self.fixed) + drawn


@dataclass(frozen=True)
class WorkloadSets:
    visible: tuple[Workload, ...]
    hidden: HiddenSet


@dataclass(frozen=True)
class ModelWorkloads:
    """How a task's axes derive from a model (`arena tasks add-model`), one section of a task's
    `model_workloads`. `op` names the kind of operation the rows come from: a model runs a list
    of operations (core/tasks/model_ops.py: each linear layer, each attention layer type, the
    routed experts...), and each operation of that kind gives its own rows, its keys being the
    model's plus its own (a linear layer's in_features and out_features). `op: model` (the
    default) gives one set of rows per model from the model-level keys. Each axis is an
    expression over those keys or a list of integers; the cross product of the lists gives the
    rows. The section applies to an operation only if it has every `requires` key, none of the
    `excludes` keys, and the values `only` lists. `expert_parallel` declares the convention that
    gives `local_experts` (num_experts // expert_parallel); `probe` the axis values of the small
    run that checks a row (default: each list axis at its smallest value); `phases` the serving
    phases whose time the task covers (docs/tasks.md's coverage table; none for a step around
    the operation, such as the routing layout or the experts' all-to-all); `note` what the rows
    are."""

    requires: tuple[str, ...]
    axes: dict[str, str | tuple[int, ...]]
    excludes: tuple[str, ...] = ()
    op: str = "model"
    only: dict[str, tuple[float, ...]] = field(default_factory=dict)
    expert_parallel: int | None = None
    probe: dict[str, str] = field(default_factory=dict)
    phases: tuple[str, ...] = ("decode", "prefill")
    note: str = ""

    def workloads(self, config: dict[str, float]) -> list[dict[str, int]]:
        """Axis values for a model's (or an operation's) normalized keys, in the task's axis
        order; raises KeyError naming a key the config lacks and ValueError for a value that is
        not a positive integer."""
        fixed: dict[str, int] = {}
        for axis, rule in self.axes.items():
            if isinstance(rule, str):
                missing = sorted(formula_names(rule) - set(config))
                if missing:
                    raise KeyError(missing[0])
                value = evaluate_formula(rule, config)  # type: ignore[arg-type]
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

    def probe_axes(self, row: dict[str, int]) -> dict[str, int]:
        """The axes of the small run that checks `row`: each list axis at its smallest value,
        then `probe`'s expressions over the row's axes (e.g. `E: K`, the fewest experts)."""
        axes = {
            a: (min(rule) if isinstance(rule, tuple) else row[a]) for a, rule in self.axes.items()
        }
        for axis, expr in self.probe.items():
            axes[axis] = int(evaluate_formula(expr, {**row, **{k: v for k, v in axes.items()}}))
        return axes
