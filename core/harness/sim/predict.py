"""The workers' side of a `sim:` device's performance stage: count a workload at GPU size.

Candidate worker (`predict_candidate`): the candidate is first run on fake tensors. A pure
PyTorch candidate whose call that count finds small enough (`REAL_RUN_FLOPS`, `REAL_RUN_BYTES`)
is then run again on GPU-sized CPU tensors, and that run is the one billed and value-checked: a
candidate that tells fake tensors from real ones and does less on the fake ones gains nothing,
and one that does less at GPU sizes writes wrong values. A larger one is billed from its fake
count, whose values nobody sees (its writes are checked). One that launches Triton kernels
needs real memory: it runs on GPU-sized CPU tensors (made cheaply: sim_gpu_inputs) with every
launch sampled and counted (sim_count) and its torch ops counted (sim_torch); then each distinct
kernel configuration is compiled ahead of time for the target (sim_aot). Nothing here computes
a time: the harness parent does that from these counts (sim_model), so a candidate cannot
choose its own prediction by replacing the model.

Trusted worker (`predict_baseline`): the baseline's torch ops on fake tensors; where the
baseline needs real values (data-dependent routing), the task's own FLOP and byte formulas.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from core.harness import inputs
from core.harness.sim import aot as sim_aot
from core.harness.sim import count as sim_count
from core.harness.sim import host as sim_host
from core.harness.sim import judge as sim_judge
from core.harness.sim import known as sim_known
from core.harness.sim import scaled_run as sim_scaled_run
from core.harness.sim import torch_ops as sim_torch
from core.harness.sim import values as sim_values
from core.harness.sim import written as sim_written
from core.harness.sim.gpu_inputs import gpu_inputs  # also where callers find it

MAX_LAUNCHES = 256  # launches reported per workload; more are summed into the note
NO_VALUES = (
    "not applicable: pure PyTorch, counted on fake tensors (no values; what it writes is checked)"
)
# A pure PyTorch call counted on fake tensors at no more than these is run again on real memory
# (two shared CPU cores: about a second of work, and what the reference costs again).
REAL_RUN_FLOPS = 2e10
REAL_RUN_BYTES = 3e9
BYTES_CAP = 2.0  # a baseline call's bytes are at most this many times the task's minimum


def ran_impl(run: Callable[..., Any]) -> str | None:
    """The implementation a candidate says its last call ran (a module's `IMPL`, as a task's
    baseline.py keeps it): the result then says which implementation was predicted against
    which measured one (a vendor CUDA library the GPU selects cannot run here). A label only:
    nothing is billed or checked by it."""
    impl = getattr(run, "__globals__", {}).get("IMPL")
    return impl[:40] if isinstance(impl, str) else None


def fake_inputs(
    specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, custom: Any
) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        gen = torch.Generator("cpu").manual_seed(seed)
        return inputs.make_inputs(specs, workload["axes"], workload["shapes"], gen, custom)

    return make


def real_integers(
    specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, custom: Any
) -> Callable[[], list[Any]]:
    """The inputs the real run makes (`gpu_inputs`, same seed), for the fake pass to know the
    values of its integer inputs (sim_known): a grouped product's `offs` says which experts'
    weights it reads. Floating-point ones are left unfilled: only the integers are used."""
    return lambda: gpu_inputs(specs, workload, seed, custom, fill_floats=False)


class CompileCache:
    """One AOT compile per kernel configuration for the whole evaluation."""

    def __init__(self, target: dict[str, Any], cache_dir: str | None):
        """Make it before the interpreter is switched on: it keeps Triton's language as the
        compiler needs it (sim_aot.PristineLanguage)."""
        self.target, self.cache_dir = target, cache_dir
        self.done: dict[Any, dict[str, Any]] = {}
        self.host: dict[int, list[str]] = {}
        sim_aot.PristineLanguage.keep()

    def resources(self, launch: sim_count.Launch) -> dict[str, Any]:
        found = self._resources(launch)
        host = self.host.setdefault(id(launch.fn), sim_host.host_calls(launch.fn))
        return {**found, "host_calls": host} if host else found

    def _resources(self, launch: sim_count.Launch) -> dict[str, Any]:
        try:
            signature, constexprs = sim_aot.signature_of(launch.fn, launch.bound)
            key = (
                id(launch.fn),
                tuple(sorted(signature.items())),
                tuple(sorted((k, repr(v)) for k, v in constexprs.items())),
                tuple(sorted(launch.options.items())),
            )
        except Exception as exc:  # noqa: BLE001 - reported, the model assumes defaults
            return {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}"[:300],
                "num_warps": launch.options.get("num_warps", 4),
            }
        if key not in self.done:
            self.done[key] = sim_aot.compile_launch(
                launch.fn, launch.bound, launch.options, self.target, self.cache_dir
            ).to_json()
        return self.done[key]


def predict_candidate(
    run: Callable[..., Any],
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    compiler: CompileCache,
    exact: bool = True,
    outputs: list[dict[str, Any]] | None = None,
    scaled: dict[str, Any] | None = None,
    formula: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`exact`: run exact programs for the value check (not where the task judges its outputs
    with its own check.py: no values of the counted call are compared there). `outputs`: the
    task's output specs (those written by atomics: sim_values). `scaled`: where a pure PyTorch
    call is too large to run for real, the workload its values are checked at (sim_scaled).
    `formula`: the workload's FLOP and byte formulas and hold (the job's), which a count of
    sampled launches that falls short of them is confirmed against by a recount (`doubted`)."""
    started = time.perf_counter()
    notes: list[str] = []
    atomic = [bool(o.get("atomic")) for o in outputs or []]
    try:
        written: list[Any] = []
        sizes: list[Any] = []
        found: dict[str, Any] = {}
        make = fake_inputs(specs, workload, seed, custom)
        integers = real_integers(specs, workload, seed, custom)
        ops = sim_torch.count_fake(run, make, written, sizes, found, integers)
    except Exception:  # noqa: BLE001 - needs real memory (Triton, data-dependent torch): go on below
        pass
    else:
        flops, nbytes = sim_torch.total(ops)
        fits = flops <= REAL_RUN_FLOPS and nbytes <= REAL_RUN_BYTES
        if exact and (fits or scaled):
            real_workload = workload if fits else scaled
            assert real_workload is not None
            try:
                real = _predict_real(
                    run, specs, real_workload, seed, custom, compiler, exact, started, atomic
                )  # no launch, nothing sampled: no recount, so no formula
            except MemoryError:
                notes.append("pure PyTorch: no memory for the real run")
            else:
                if fits:  # what the fake pass did, for the parent to compare (sim_stage)
                    real["fake_count"] = {"flops": flops, "bytes": nbytes, "ops": len(ops)}
                    real["notes"].append(
                        "pure PyTorch: counted on GPU-sized CPU tensors, its values checked"
                    )
                    return real
                return sim_scaled_run.billed_from_fake(
                    real, ops, written, sizes, found, real_workload, specs, seed, custom, run
                )
        return {
            "ok": True,
            "impl": ran_impl(run),
            "launches": [],
            "torch_ops": ops,
            "unknown_ops": found.get("unknown", []),
            "notes": [*notes, "no Triton launch: counted on fake tensors"],
            "seconds": time.perf_counter() - started,
            "written": written,
            "values": {"outputs": None, "reason": NO_VALUES, "written_bytes": sizes},
        }
    return _predict_real(
        run, specs, workload, seed, custom, compiler, exact, started, atomic, formula
    )


def doubted(reply: dict[str, Any], formula: dict[str, Any] | None) -> str | None:
    """Why a count should be confirmed by a recount with more programs, or None: its point
    estimate falls short of a hold the stage judges (an output written less than
    `MIN_WRITTEN`, the task's formulas: sim_judge.formula_problem at z = 0) while some launch
    ran only a sample of its programs, so that the shortfall may be the sample's (an honest
    kernel whose programs differ: idle tiles of a worst-case grid, padding tokens). A count of
    whole launches is exact: nothing to confirm. The recount is the billed count (the stage
    judges it, at its samples' error bound): a kernel that does less only where it is counted
    gains nothing from it."""
    launches = reply.get("launches") or []
    if not any(s.get("sampled", 0) < s.get("programs", 0) for s in launches):
        return None
    for i, share in enumerate(reply.get("written") or []):
        if isinstance(share, float) and share < sim_written.MIN_WRITTEN:
            return f"its sampled programs wrote {100 * share:.0f}% of output #{i}"
    short = sim_judge.formula_problem(
        formula, [(s, None) for s in launches], reply.get("torch_ops") or [], z=0.0
    )
    return short.removeprefix("sim_less_work: ").split(" (at least", 1)[0] if short else None


def _predict_real(
    run: Callable[..., Any],
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    compiler: CompileCache,
    exact: bool,
    started: float,
    atomic: list[bool] | None = None,
    formula: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The counted call on GPU-sized CPU tensors (`_count_real`), and where its sample leaves a
    hold in doubt (`doubted`), a recount on fresh inputs of the same seed whose sampled
    launches grow as far as `CONFIRM_BUDGET` (interpreted work) affords (sim_count.Counting's `confirm`): that
    one is reported."""
    first = _count_real(run, specs, workload, seed, custom, compiler, exact, started, atomic)
    why = doubted(first, formula)
    if why is None:
        return first
    again = _count_real(
        run, specs, workload, seed, custom, compiler, exact, started, atomic, confirm=True
    )
    sampled = sum(int(s.get("sampled", 0)) for s in first["launches"])
    resampled = sum(int(s.get("sampled", 0)) for s in again["launches"])
    again["notes"].insert(
        0,
        f"recounted: the first count's sample ({sampled} programs) fell short ({why[:160]}); "
        f"this count ran {resampled}",
    )
    return again


def _count_real(
    run: Callable[..., Any],
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    compiler: CompileCache,
    exact: bool,
    started: float,
    atomic: list[bool] | None = None,
    confirm: bool = False,
) -> dict[str, Any]:
    """One counted call on GPU-sized CPU tensors: Triton launches sampled and counted, torch ops
    counted, what it wrote and its known elements recorded."""
    notes: list[str] = []
    begun = time.perf_counter()
    args = gpu_inputs(specs, workload, seed, custom)
    made = time.perf_counter() - begun
    with (
        sim_count.Counting(model=compiler.target.get("trial_model"), confirm=confirm) as counting,
        sim_torch.TorchCalls(sim_known.KnownInts.of_run(list(args))) as work,
        torch.no_grad(),
    ):
        counting.salt = int(seed) & 0xFFFFFFFF
        if not exact:
            counting.exact_budget_s = 0.0
        result = run(*args)
        # Accesses outside the launches' arguments, resolved against the call's own tensors.
        reach = sim_torch.storages(sim_torch._tensors(list(args)) + sim_torch._tensors(result))
        strays = sim_values.resolve_strays(counting.launches, reach + work.work.storages)
        # What it wrote of what it returned (sim_written): a call that does less when counted shows it.
        written = sim_written.shares(result, args, work.work.written, counting.launches)
        sizes = sim_written.written_bytes(result, args, work.work.written, counting.launches)
        # ... and as much as its samples cannot rule out (the stage holds these: sim_written.problem)
        z = sim_count.SAMPLING_Z
        written_high = sim_written.shares(result, args, work.work.written, counting.launches, z)
        sizes_high = sim_written.written_bytes(
            result, args, work.work.written, counting.launches, z
        )
    # The elements whose values are known, against the reference in the trusted worker (sim_values).
    values = sim_values.samples(result, args, counting.launches, work.work.events, seed, atomic)
    values["written_bytes"] = [done for done, _ in sizes]
    values["written_bytes_high"] = [done for done, _ in sizes_high]
    notes += counting.exact_notes()
    del args, result
    launches = []
    for launch in counting.launches[: MAX_LAUNCHES - 1]:
        summary = launch.summary()
        summary["resources"] = compiler.resources(launch)
        launches.append(summary)
    rest = counting.launches[MAX_LAUNCHES - 1 :]
    if rest:
        # Every launch is billed: those past the cap of one reply go as one merged entry (their
        # programs, bytes and FLOPs summed, a launch cost each), compiled as the first of them.
        merged = sim_count.merged_summary([launch.summary() for launch in rest])
        merged["resources"] = compiler.resources(rest[0])
        for launch in rest[1:]:
            other = compiler.resources(launch)
            if other.get("rejected") or other.get("host_calls") or not other.get("ok"):
                merged["resources"] = other
                break
        launches.append(merged)
        if len(rest) > 1:
            notes.append(
                f"{len(counting.launches)} launches: the last {len(rest)} are billed as one merged entry of {len(rest)} launches"
            )
    if counting.trials:
        notes.append(
            f"autotune: {counting.trials} trial launch(es) predicted to choose each config and not billed (a GPU would measure them)"
        )
    return {
        "ok": True,
        "impl": ran_impl(run),
        "launches": launches,
        "torch_ops": work.ops,
        "notes": notes,
        "seconds": time.perf_counter() - started,
        "inputs_s": made,
        "exact_s": counting.exact_spent,
        "written": written,
        "written_high": written_high,
        "values": values,
        # What the stage fails (sim_stage.count_problems): accesses outside every tensor of the
        # call, exact programs that counted unlike their sampled twins, ops of unknown cost.
        "strays": strays,
        "exact_differs": counting.differs,
        "exact_slow": counting.exact_slow,
        "unknown_ops": work.work.unknown,
    }


def predict_baseline(
    run: Callable[..., Any],
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    formula: dict[str, Any],
) -> dict[str, Any]:
    """The baseline at GPU size, for a GPU without measured figures of it (or figures of
    another baseline: core/devices/sim/provenance.py): its torch calls counted on fake tensors
    and priced as a candidate's are (sim_model.glue_time, calibrated on the H200's baselines),
    so a baseline predicted against itself comes out as it does as a candidate; where that
    count fails, the call as a whole (FLOPs counted, bytes of its tensors), or the task's
    formulas where fake tensors fail altogether."""
    try:
        ops = sim_torch.count_fake(
            run,
            fake_inputs(specs, workload, seed, custom),
            real_args=real_integers(specs, workload, seed, custom),
        )
        if ops and sim_torch.math_isfinite(ops):
            return {"ok": True, "torch_ops": ops, "source": "counted"}
    except Exception:  # noqa: BLE001 - data-dependent: the call as a whole, below
        pass
    try:
        call = sim_torch.count_call_fake(run, fake_inputs(specs, workload, seed, custom))
        if call["ops"] and sim_torch.math_isfinite([call]):
            # A call that indexes into a large tensor (a KV cache, a cos/sin table) touches only
            # part of it: its bytes are capped at twice the task's minimum traffic.
            minimum = float(formula.get("bytes") or 0.0)
            if minimum > 0:
                call["bytes"] = min(call["bytes"], BYTES_CAP * minimum)
            if not call["flops"]:
                call["flops"] = (
                    float(formula.get("flops") or 0.0) if call["dtype"] != "fp32" else 0.0
                )
            return {"ok": True, "torch_ops": [call], "source": "counted"}
        reason = "no torch op was recorded"
    except Exception as exc:  # noqa: BLE001 - data-dependent baseline: the task's formulas
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    op = {
        "name": "task formulas",
        "flops": float(formula.get("flops", 0.0)),
        "bytes": float(formula.get("bytes", 0.0)),
        "dtype": formula.get("dtype", "bf16"),
    }
    return {
        "ok": True,
        "torch_ops": [op],
        "source": "formula",
        "note": f"baseline counted from the task's FLOP and byte formulas (fake tensors: {reason})",
    }
