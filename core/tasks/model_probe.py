"""Does a task accept a row? Before add-model writes a row it runs the task's own reference and
baseline on the CPU at a small size of that row (`Prober.check`): the model-derived axes kept
(where a width not divisible by 128, or a head size the kernel assumes, breaks a task), the
token buckets at their smallest and the axes the section's `probe` names made small. The row is
accepted only if both run, return the declared shapes, finite values, and the baseline agrees
with the reference under the task's own rule. A multi-rank task's reference runs on its CPU
world; its baseline needs process groups and is not run here.

Inputs are drawn as the harness draws them (core.harness.inputs, with the task's inputs.py and
judged with its check.py), so a row that passes here is one the harness can run."""

from __future__ import annotations

import math
from typing import Any

from core.model.task import Task
from core.tasks.modules import load_module

# A probe whose inputs would exceed this is not run: the section's `probe` should shrink it.
PROBE_BYTES = 2 << 30


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class Prober:
    """One task's reference, baseline, inputs.py and check.py, loaded once; `check(axes)`
    answers None (accepted) or why not, and remembers the answer per axes."""

    def __init__(self, task: Task):
        from core.harness import checking

        self.task = task
        tag = task.id.replace("/", "_")
        self.world = task.world_size.cpu if task.world_size else None
        ref = load_module(task.file("reference.py"), f"arena_probe_ref_{tag}")
        self.reference = ref.run_all if self.world else ref.run
        self.baseline = (
            None
            if self.world
            else load_module(task.file("baseline.py"), f"arena_probe_base_{tag}").run
        )
        self.custom = (
            load_module(task.file("inputs.py"), f"arena_probe_inputs_{tag}").make_inputs
            if task.file("inputs.py").is_file()
            else None
        )
        self.check_fn = checking.load_check(task.path)
        self.rule = {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        }
        self.in_specs = [s.to_json() for s in task.inputs]
        self.out_specs = [s.to_json() for s in task.outputs]
        self.seen: dict[tuple[tuple[str, int], ...], str | None] = {}

    def shapes(self, axes: dict[str, int]) -> dict[str, list[int]]:
        return self.task.tensor_shapes(axes)

    def input_bytes(self, axes: dict[str, int]) -> int:
        from core.harness.inputs import dtype_of

        shapes = self.shapes(axes)
        return sum(
            math.prod(shapes[s.name]) * dtype_of(s.dtype).itemsize
            for s in self.task.inputs
            if s.shape is not None
        )

    def _inputs(self, axes: dict[str, int], rank: int | None = None) -> list[Any]:
        import torch

        from core.harness import inputs

        gen = torch.Generator("cpu").manual_seed(1234 + (rank or 0))
        at = {**axes, "RANK": rank} if rank is not None else axes
        return inputs.make_inputs(self.in_specs, at, self.shapes(axes), gen, self.custom)

    def check(self, axes: dict[str, int]) -> str | None:
        key = tuple(axes.items())
        if key not in self.seen:
            self.seen[key] = self._check(axes)
        return self.seen[key]

    def _check(self, axes: dict[str, int]) -> str | None:
        if self.world:
            axes = {**axes, "W": self.world}
        size = self.input_bytes(axes)
        if size > PROBE_BYTES:
            return (
                f"its small run would draw {size / 2**30:.1f} GiB of inputs: "
                "give the task's model_workloads a `probe` that shrinks it"
            )
        try:
            if self.world:
                return self._check_ranks(axes)
            return self._check_one(axes)
        except Exception as exc:  # noqa: BLE001 - a task's code may raise anything: that is the answer
            return _first_line(exc)

    def _check_one(self, axes: dict[str, int]) -> str | None:
        import torch

        from core.harness import checking
        from core.harness.inputs import collect_outputs

        shapes = self.shapes(axes)
        args = self._inputs(axes)
        with torch.no_grad():
            expected = _as_list(self.reference(*[_clone(a) for a in args]))
            problem = self._declared(expected, shapes, "reference")
            if problem:
                return problem
            got_args = self._inputs(axes)
            assert self.baseline is not None
            result = self.baseline(*got_args)
        try:
            outs = collect_outputs(
                result, self.out_specs, self.in_specs, got_args, shapes, torch.device("cpu")
            )
        except Exception as exc:  # noqa: BLE001
            return f"baseline: {_first_line(exc)}"
        verdicts = checking.judge(
            self.out_specs,
            outs,
            expected[: len(outs)] if self.check_fn is None else expected,
            args,
            self.rule,
            self.check_fn,
        )
        wrong = [
            f"{n}: {v.get('message', 'differs')}" for n, v in verdicts.items() if not v["passed"]
        ]
        return f"the baseline disagrees with the reference ({wrong[0]})" if wrong else None

    def _check_ranks(self, axes: dict[str, int]) -> str | None:
        import torch

        assert self.world is not None
        by_rank = [self._inputs(axes, r) for r in range(self.world)]
        with torch.no_grad():
            result = self.reference(by_rank)
        shapes = self.shapes(axes)
        for outs in result:
            problem = self._declared(_as_list(outs), shapes, "reference")
            if problem:
                return problem
        return None

    def _declared(self, outs: list[Any], shapes: dict[str, list[int]], who: str) -> str | None:
        import torch

        from core.harness.inputs import output_shape

        for spec, out in zip(self.out_specs, outs):
            if not isinstance(out, torch.Tensor):
                return f"{who}: output `{spec['name']}` is not a tensor"
            want = output_shape(spec, shapes)
            if tuple(out.shape) != want:
                return (
                    f"{who}: output `{spec['name']}` has shape {tuple(out.shape)}, declared {want}"
                )
            if out.is_floating_point() and not bool(torch.isfinite(out.float()).all()):
                return f"{who}: output `{spec['name']}` has NaN or Inf"
        return None


def _clone(a: Any) -> Any:
    import torch

    return a.clone() if isinstance(a, torch.Tensor) else a


def _as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]
