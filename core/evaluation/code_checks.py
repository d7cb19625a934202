"""The checks of `arena tasks validate` that run the task's code in this process (`CodeChecks`):
the reference on every CPU workload, and the correctness rule's teeth: an all-zeros, a constant
and a random output must fail it, and every tensor input must change some output."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from core.evaluation.validate_report import CheckResult
from core.model.task import Task
from core.model.workload import Workload
from core.tasks.modules import load_module

if TYPE_CHECKING:
    import torch


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class CodeChecks:
    """The task's reference (and inputs.py, check.py) loaded once, run on CPU workloads with
    inputs drawn exactly as the harness draws them (core.harness.inputs)."""

    def __init__(self, task: Task, seed: int):
        from core.harness import checking

        self.task, self.seed = task, seed
        tag = task.id.replace("/", "_")
        # Multi-rank tasks: every call is made on `world` ranks, each with inputs of its own.
        self.world = task.world_size.cpu if task.world_size else None
        reference = load_module(task.file("reference.py"), f"arena_validate_ref_{tag}")
        self.reference = reference.run_all if self.world else reference.run
        self.custom = (
            load_module(task.file("inputs.py"), f"arena_validate_inputs_{tag}").make_inputs
            if task.file("inputs.py").is_file()
            else None
        )
        self.check = checking.load_check(task.path)
        self.rule = {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        }
        self.specs = [s.to_json() for s in task.inputs]
        self.out_specs = [s.to_json() for s in task.outputs]
        self.expected: list[
            tuple[Workload, list[Any], list[torch.Tensor]]
        ] = []  # visible: (workload, inputs, reference outputs)

    def workloads(self, ws: tuple[Workload, ...]) -> list[Workload]:
        """CPU workloads as the harness runs them (with W on a multi-rank task)."""
        return [self.task.at_world(w, self.world) for w in ws] if self.world else list(ws)

    def shapes(self, w: Workload) -> dict[str, list[int]]:
        return self.task.tensor_shapes(w.axes)

    def inputs(self, w: Workload, seed: int) -> list[Any]:
        """One call's inputs; on a multi-rank task a list of every rank's, each drawn as the
        harness draws it (its own seed, RANK among the axes)."""
        import torch

        from core.harness import inputs
        from core.harness.ranked_worker import rank_seed

        if not self.world:
            gen = torch.Generator("cpu").manual_seed(seed)
            return inputs.make_inputs(self.specs, w.axes, self.shapes(w), gen, self.custom)
        by_rank = []
        for r in range(self.world):
            gen = torch.Generator("cpu").manual_seed(rank_seed(seed, r))
            by_rank.append(
                inputs.make_inputs(
                    self.specs, {**w.axes, "RANK": r}, self.shapes(w), gen, self.custom
                )
            )
        return by_rank

    def run_reference(self, args: list[Any]) -> list[Any]:
        """The reference's outputs as a list; on a multi-rank task one such list per rank."""
        import torch

        with torch.no_grad():
            if not self.world:
                return _as_list(self.reference(*args))
            result = self.reference(args)
        if not isinstance(result, (tuple, list)) or len(result) != self.world:
            raise ValueError(
                f"reference.run_all returned {type(result).__name__}; it must return one output set per rank ({self.world})"
            )
        return [_as_list(r) for r in result]

    def per_rank(self, args: list[Any], outs: list[Any]) -> list[tuple[list[Any], list[Any]]]:
        """(inputs, outputs) of each rank; one pair on a single-device task."""
        return list(zip(args, outs)) if self.world else [(args, outs)]

    def check_reference(self) -> CheckResult:
        import torch

        from core.harness.inputs import output_shape

        workloads = self.workloads(self.task.cpu.visible) + self.workloads(
            self.task.cpu.hidden.fixed
        )
        t0 = time.monotonic()
        n = len(self.out_specs)
        entry = "reference.run_all" if self.world else "reference.run"
        for i, w in enumerate(workloads):
            args = self.inputs(w, self.seed + i)
            try:
                outs = self.run_reference(args)
            except Exception as exc:  # noqa: BLE001
                return CheckResult(
                    "reference_runs",
                    False,
                    f"{entry} raised on CPU workload {w.label}: {type(exc).__name__}: {one_line(exc)}",
                )
            for rank, (_, rank_outs) in enumerate(self.per_rank(args, outs)):
                where = f"{w.label}" + (f" rank {rank}" if self.world else "")
                if len(rank_outs) < n or (self.check is None and len(rank_outs) != n):
                    return CheckResult(
                        "reference_runs",
                        False,
                        f"{entry} returned {len(rank_outs)} tensor(s) on {where}; the task declares {n} output(s)"
                        + ("" if self.check else " (extra tensors need a check.py)"),
                    )
                for spec, out in zip(self.out_specs, rank_outs):
                    if not isinstance(out, torch.Tensor):
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` is a {type(out).__name__}, not a tensor",
                        )
                    want = output_shape(spec, self.shapes(w))
                    if tuple(out.shape) != want:
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` has shape {tuple(out.shape)} on {where}; task.yaml declares {want}",
                        )
                    if out.is_floating_point() and not bool(
                        torch.isfinite(out.float()).all()
                    ):  # fp8 has no isfinite
                        return CheckResult(
                            "reference_runs",
                            False,
                            f"{entry}'s output `{spec['name']}` has NaN/Inf on {where}: check the inputs' init ranges",
                        )
            if i < len(self.task.cpu.visible):
                self.expected.append((w, args, outs))
        return CheckResult(
            "reference_runs",
            True,
            f"runs on all {len(workloads)} CPU workloads in {time.monotonic() - t0:.2f} s; outputs have the declared shapes and are finite",
        )

    def fabricate(
        self,
        kind: str,
        spec: dict[str, Any],
        like: torch.Tensor,
        shape: tuple[int, ...],
        gen: torch.Generator,
    ) -> torch.Tensor:
        """An output of the declared dtype and shape that a lazy candidate might return: all
        zeros; the expected output's mean everywhere (the strongest constant); or random
        values with the expected output's mean and spread (range, for integers)."""
        import torch

        from core.harness.inputs import dtype_of

        dtype = dtype_of(spec["dtype"])
        ref = like.detach().to("cpu", torch.float64)
        ref = ref[torch.isfinite(ref)] if ref.is_floating_point() else ref
        mean = float(ref.mean()) if ref.numel() else 0.0
        if kind == "zeros":
            return torch.zeros(shape, dtype=dtype)
        if dtype == torch.bool:
            if kind == "constant":
                return torch.full(shape, mean >= 0.5, dtype=dtype)
            return torch.randint(0, 2, shape, generator=gen).to(dtype)
        if not dtype.is_floating_point:
            if kind == "constant":
                return torch.full(shape, round(mean), dtype=dtype)
            low, high = (int(ref.min()), int(ref.max())) if ref.numel() else (0, 1)
            return torch.randint(low, high + 1, shape, generator=gen).to(dtype)
        if kind == "constant":
            return torch.full(shape, mean, dtype=torch.float32).to(dtype)
        std = float(ref.std()) if ref.numel() > 1 else 1.0
        return (torch.randn(shape, generator=gen, dtype=torch.float32) * (std or 1.0) + mean).to(
            dtype
        )

    def check_fabricated(self, kind: str) -> CheckResult:
        import torch

        from core.harness import checking
        from core.harness.inputs import output_shape

        name = f"{kind}_fail"
        what = {
            "zeros": "an all-zeros output",
            "constant": "a constant output (the expected mean)",
            "random": "a random output (the expected mean and spread)",
        }[kind]
        gen = torch.Generator("cpu").manual_seed(self.seed + 17)
        rejected: dict[str, list[str]] = {s["name"]: [] for s in self.out_specs}
        for w, call_args, call_expected in self.expected:
            for args, expected in self.per_rank(
                call_args, call_expected
            ):  # every rank must reject it
                outs = [
                    self.fabricate(kind, s, e, output_shape(s, self.shapes(w)), gen)
                    for s, e in zip(self.out_specs, expected)
                ]
                verdicts = checking.judge(
                    self.out_specs, outs, expected, args, self.rule, self.check
                )
                for out_name, v in verdicts.items():
                    if not v["passed"] and w.label not in rejected[out_name]:
                        rejected[out_name].append(w.label)
        labels = ", ".join(w.label for w, _, _ in self.expected)
        if self.check is not None:
            # check.py may judge outputs jointly: the call must fail, on some visible workload.
            if not any(rejected.values()):
                return CheckResult(
                    name,
                    False,
                    f"{what} passes check.py on every visible CPU workload ({labels}): check.py does not reject it",
                )
            return CheckResult(name, True, f"{what} is rejected by check.py")
        # The elementwise rule judges each output on its own: each must reject it.
        lax = [n for n, ws in rejected.items() if not ws]
        if kind == "constant":
            # A one-element output (a loss, a norm) is its own mean: no constant differs from it.
            single = {
                s["name"]
                for s, e in zip(self.out_specs, self.expected[0][2] if self.expected else [])
                if isinstance(e, torch.Tensor) and e.numel() == 1
            }
            if lax and set(lax) <= single:
                return CheckResult(
                    name,
                    True,
                    f"not applicable to one-element output(s) {', '.join(f'`{n}`' for n in lax)}: a constant is the answer itself",
                    warning=True,
                )
        if lax:
            return CheckResult(
                name,
                False,
                f"{what} passes the correctness rule for output(s) {', '.join(f'`{n}`' for n in lax)} on every visible CPU workload "
                f"({labels}): tighten atol/rtol/min_match or make the inputs produce larger values",
            )
        return CheckResult(name, True, f"{what} fails the correctness rule for every output")

    def check_inputs_matter(self) -> CheckResult:
        """Input k replaced by its value from another draw (everything else kept) must change
        some output, on some visible CPU workload."""
        import torch

        notes, ignored = [], []
        for k, spec in enumerate(self.task.inputs):
            if spec.is_scalar:
                continue
            changed, same_draw, raised = False, True, None
            for i, w in enumerate(self.workloads(self.task.cpu.visible)):
                a = self.inputs(w, self.seed + 1000 + i)
                b = self.inputs(w, self.seed + 2000 + i)
                # On a multi-rank task input k is redrawn on every rank at once.
                pairs = [(ra, rb) for ra, rb in zip(a, b)] if self.world else [(a, b)]
                if all(
                    isinstance(ra[k], torch.Tensor) and torch.equal(ra[k], rb[k])
                    for ra, rb in pairs
                ):
                    continue  # this draw did not change it: nothing to learn here
                same_draw = False
                mixed = [list(ra[:k]) + [rb[k]] + list(ra[k + 1 :]) for ra, rb in pairs]
                try:
                    want = _flat(self.run_reference(_clone_call(a, self.world)))
                    got = _flat(self.run_reference(mixed if self.world else mixed[0]))
                except Exception as exc:  # noqa: BLE001
                    raised = f"{type(exc).__name__}: {one_line(exc)}"
                    continue
                if any(x.shape != y.shape or not torch.equal(x, y) for x, y in zip(want, got)):
                    changed = True
                    break
            if changed:
                continue
            if same_draw:
                notes.append(
                    f"`{spec.name}` is the same in every draw (inputs.py), so it cannot be perturbed"
                )
            elif raised is not None:
                notes.append(
                    f"`{spec.name}` from another draw made the reference raise ({raised}): inputs.py couples it to other inputs"
                )
            else:
                ignored.append(spec.name)
        if ignored:
            return CheckResult(
                "inputs_matter",
                False,
                f"input(s) {', '.join(f'`{n}`' for n in ignored)} change no output when replaced by a fresh draw on any visible CPU workload: "
                "the reference ignores them (remove them, or if that is by design tell the lead: the format has no way yet to declare it)",
            )
        tensors = sum(1 for s in self.task.inputs if not s.is_scalar)
        if notes:
            return CheckResult(
                "inputs_matter", True, "not checked: " + "; ".join(notes), warning=True
            )
        return CheckResult(
            "inputs_matter",
            True,
            f"each of the {tensors} tensor input(s) changes the output when redrawn",
        )


def _as_list(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _flat(outs: list[Any]) -> list[Any]:
    """Every output tensor of a call, every rank's in turn on a multi-rank task."""
    return [t for item in outs for t in (item if isinstance(item, list) else [item])]


def _clone_call(args: list[Any], world: int | None) -> list[Any]:
    return [_clone(a) for a in args] if world else _clone(args)


def _clone(args: list[Any]) -> list[Any]:
    import torch

    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
