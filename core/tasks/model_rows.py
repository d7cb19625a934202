"""`arena tasks add-model`: a model's rows in every task it uses.

For each task, each `model_workloads` section picks the model's operations of its `op` kind
(core/tasks/model_ops.py; `op: model` is the model as a whole), keeps those with every
`requires` key, none of the `excludes` and the `only` values, and derives the rows from the
operation's keys. A row is written only if its FLOPs and bytes are valid at its size and the
task's own reference and baseline accept it at a small size (core/tasks/model_probe.py);
anything else is reported with the reason, never written. Rows go to `workloads.models`
(replacing that model's earlier ones there) or, with `into="visible"`, to the visible set, as
text (core/tasks/model_edit.py); the task is loaded again and restored if it no longer loads,
and its manifest entry follows (core/tasks/manifest.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from core.model.formulas import evaluate_formula
from core.model.task import Task
from core.model.workload import ModelWorkloads
from core.tasks import manifest
from core.tasks.fields import TaskError
from core.tasks.model_config import ModelConfig
from core.tasks.model_edit import insert_rows, remove_rows, set_model_listed, workload_line
from core.tasks.model_ops import Keys, Op
from core.tasks.spec import load_task

OnProbe = Callable[[str, dict[str, int]], None]  # (task id, axes) as each small run starts


@dataclass
class Row:
    axes: dict[str, int]
    note: str
    op: Op | None = None

    def to_json(self) -> dict[str, Any]:
        return {"axes": dict(self.axes), "note": self.note}


@dataclass
class TaskChange:
    """What add-model did (or, with dry_run, would do) to one task for one model."""

    task_id: str
    added: list[Row] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # rows or operations not added, with why
    reason: str | None = None  # why the task got nothing at all
    error: str | None = None  # the edit broke the task: restored
    removed: int = 0  # the model's earlier rows in workloads.models, replaced

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task_id,
            "added": [r.to_json() for r in self.added],
            "skipped": list(self.skipped),
            "reason": self.reason,
            "error": self.error,
            "removed": self.removed,
        }


def _label(row: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in row.items())


def _fmt(v: float) -> str:
    return f"{v:g}"


def section_keys(
    section: ModelWorkloads, config: ModelConfig, op: Op | None
) -> tuple[Keys | None, str | None]:
    """The keys a section reads for one operation (None: the model as a whole), or why it
    does not apply."""
    keys: Keys = dict(config.keys if op is None else op.keys)
    what = "the model" if op is None else op.note
    refused = config.arch.refused
    missing = [k for k in section.requires if k not in keys]
    if missing:
        why = [
            f"{k} ({refused[k]})" if k in refused else _weights_of(k, keys) or k for k in missing
        ]
        return None, f"{what}: has no {', '.join(why)}"
    excluded = [k for k in section.excludes if k in keys]
    if excluded:
        return None, f"{what}: the task excludes {', '.join(excluded)}"
    for key, values in section.only.items():
        have = keys.get(key)
        if have is None or not any(math.isclose(have, v, rel_tol=1e-4) for v in values):
            return None, (
                f"{what}: {key} is {_fmt(have) if have is not None else 'missing'}; "
                f"the task computes with {' or '.join(_fmt(v) for v in values)}"
            )
    if section.expert_parallel is not None:
        experts = int(keys.get("num_experts", 0))
        ep = section.expert_parallel
        if not experts or experts % ep:
            return None, f"{what}: num_experts {experts} is not a multiple of expert_parallel {ep}"
        keys["local_experts"] = experts // ep
    return keys, None


def _weights_of(key: str, keys: Keys) -> str | None:
    """`weights_bf16 (its weights are fp8_block)` for a missing weight format, else None."""
    if not key.startswith("weights_"):
        return None
    have = [k[len("weights_") :] for k in keys if k.startswith("weights_")]
    return f"{key} (its weights are {', '.join(have)})" if have else None


def _ops(section: ModelWorkloads, config: ModelConfig) -> list[Op | None]:
    if section.op == "model":
        return [None]
    return [o for o in config.ops if o.kind == section.op]


def plan(
    task: Task,
    config: ModelConfig,
    check: Callable[[dict[str, int]], str | None] | None = None,
    into: str = "models",
) -> TaskChange:
    """The rows `config` gives `task`; `check(probe_axes)` (a Prober's) answers whether the
    task accepts a row at a small size (None: not checked). Nothing is written."""
    change = TaskChange(task.id)
    if not task.model_workloads:
        change.reason = "no model_workloads section"
        return change
    visible = {w.label for w in task.gpu.visible}
    hidden = {w.label for w in task.gpu.hidden.fixed}
    others = {w.label for w in task.model_rows if w.model != config.name}
    seen: set[str] = set()
    why_not: list[str] = []
    for section in task.model_workloads:
        ops = _ops(section, config)
        if not ops:
            why_not.append(f"the model runs no {section.op}")
            continue
        for op in ops:
            keys, why = section_keys(section, config, op)
            if keys is None:
                why_not.append(str(why))
                continue
            try:
                rows = section.workloads(keys)
            except KeyError as exc:
                why_not.append(f"{'the model' if op is None else op.note}: has no {exc.args[0]}")
                continue
            except ValueError as exc:
                why_not.append(f"{'the model' if op is None else op.note}: {exc}")
                continue
            note = " ".join(p for p in ((op.note if op else ""), section.note) if p)
            for row in rows:
                label = _label(row)
                if label in seen:
                    continue
                seen.add(label)
                problem = _formulas(task, row)
                if problem is None and check is not None:
                    probe = section.probe_axes(row)
                    refused = check(probe)
                    if refused:
                        problem = (
                            f"the task rejects it at a small size ({_label(probe)}): {refused}"
                        )
                if problem:
                    change.skipped.append(f"{label}: {problem}")
                elif label in visible:
                    change.skipped.append(f"{label}: already visible")
                elif label in hidden:
                    change.skipped.append(
                        f"{label}: a hidden workload (a public copy would reveal it)"
                    )
                elif into == "models" and label in others:
                    change.skipped.append(f"{label}: another model's row has it")
                else:
                    change.added.append(Row(row, note, op))
    if not change.added and not change.skipped:
        change.reason = "; ".join(why_not) or "the model gives no row"
    else:
        change.skipped = why_not + change.skipped
    return change


def _formulas(task: Task, row: dict[str, int]) -> str | None:
    """Why the task's formulas do not hold at `row`, or None (bytes positive, flops not
    negative, both finite: what `arena tasks validate` asks of every workload)."""
    axes = {**row, "W": task.world_size.sizes[0]} if task.world_size else row
    for key, expr in (("flops", task.flops), ("bytes", task.bytes)):
        try:
            value = evaluate_formula(expr, axes)
        except (ArithmeticError, ValueError) as exc:
            return f"{key} fails ({exc})"
        if not math.isfinite(value) or value < 0 or (key == "bytes" and value == 0):
            return f"{key} = {expr} is {value:g} here"
    return None


def write(task: Task, config: ModelConfig, change: TaskChange, into: str = "models") -> None:
    """Apply `change` to task.yaml (the model's earlier rows in workloads.models replaced);
    restore the file if it no longer loads."""
    spec = task.file("task.yaml")
    before = spec.read_text()
    text, change.removed = remove_rows(before, config.name) if into == "models" else (before, 0)
    lines = [workload_line(r.axes, config.name, r.note) for r in change.added]
    if text == before and not lines:
        return
    try:
        text = insert_rows(text, lines, into)
        text = set_model_listed(text, config.name, still_listed(text, config.name))
    except (ValueError, yaml.YAMLError) as exc:
        change.error = f"task.yaml left unchanged: {exc}"
        change.added = []
        return
    if text == before:
        return
    spec.write_text(text)
    try:
        load_task(task.path)
    except TaskError as exc:
        spec.write_text(before)
        change.error = f"restored: the edited task.yaml did not load ({exc})"
        change.added = []
        return
    # The user's own edit of a bundled task: its manifest entry follows (core/tasks/manifest.py),
    # else the next evaluation would refuse the task as changed.
    manifest.record([spec])


def still_listed(text: str, model: str) -> bool:
    data = yaml.safe_load(text)
    w = data.get("workloads", {})
    rows = (
        (w.get("visible") or [])
        + (w.get("hidden", {}).get("fixed") or [])
        + (w.get("models") or [])
    )
    return any(isinstance(r, dict) and r.get("model") == model for r in rows)


def add_model(
    config: ModelConfig,
    tasks: list[Task],
    dry_run: bool = False,
    into: str = "models",
    probe: bool = True,
    on_probe: OnProbe | None = None,
    probers: dict[str, Any] | None = None,
) -> list[TaskChange]:
    """Plan and (unless dry_run) write the model's rows in every task. `probers` keeps each
    task's Prober across models (the zoo run), so a shape is run once."""
    from core.tasks.model_probe import Prober

    probers = {} if probers is None else probers
    changes = []
    for task in tasks:
        check = None
        if probe and task.model_workloads:
            if task.id not in probers:
                probers[task.id] = Prober(task)
            prober = probers[task.id]

            def check(axes: dict[str, int], prober: Any = prober, tid: str = task.id) -> str | None:
                if on_probe is not None and tuple(axes.items()) not in prober.seen:
                    on_probe(tid, axes)
                return prober.check(axes)

        change = plan(task, config, check, into)
        changes.append(change)
        if not dry_run:
            write(task, config, change, into)
    return changes
