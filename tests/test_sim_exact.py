"""Exact programs of a `sim:` device's counted call (core/harness/sim/count.py): in every counted
launch a few programs, drawn at random, run exactly (every loop iteration, the real `tl.dot`),
billed as the sampled programs they stand for. Their stores are known elements, so a kernel with
a dot or a long loop (GEMM, attention) is value-checked against the reference at the same
GPU-sized inputs (sim_values, sim_reference): one that computes less when it is counted fails
with `sim_wrong_output`; an honest one passes and is predicted exactly as before.

Each candidate is counted as a candidate's worker counts it (sim_predict.predict_candidate), at
one GPU workload, and judged as the trusted worker judges it, in one subprocess with Triton's
interpreter on (docs/integrity.md, "Simulated devices")."""

from __future__ import annotations

import pytest

from core.harness.sim import count as sim_count
from tests.conftest import ROOT
from tests.sim_counting import run_per_candidate

CHEATS = ROOT / "tests" / "sim_cheats"

JUDGE = """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.harness.sim import count as sim_count, predict as sim_predict, reference as sim_reference
from core.harness.workers import _entry, _module_from_source, full_fp32
from core.tasks.discovery import find_task

compiler = sim_predict.CompileCache(sim_section(sim_info("sim:h200"))["aot"], None)  # before the interpreter
from core.harness.triton_cpu import enable_interpreter
enable_interpreter()

def billed(reply):
    return [{k: v for k, v in s.items() if k not in ("interpreter_s", "resources")} for s in reply["launches"]]

out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs if s.shape is not None}}
    specs, outs = [spec_json(s) for s in task.inputs], [spec_json(s) for s in task.outputs]
    sources = {n: task.file(n).read_bytes() if task.file(n).exists() else None for n in ("reference.py", "inputs.py")}
    custom = sources["inputs.py"] and _module_from_source(sources["inputs.py"], "task_inputs", str(task.file("inputs.py"))).make_inputs
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    exact = not name.endswith("_noexact")  # the stage's choice for a task with its own check.py
    count = lambda: sim_predict.predict_candidate(module.run, specs, workload, 7, custom or None, compiler, exact=exact)
    def plain():
        sim_count.EXACT_PROGRAMS = 0
        try:
            return billed(count())
        finally:
            sim_count.EXACT_PROGRAMS = 2
    sim_count.EXACT_BUDGET_S = 0.01 if name.endswith("_tight") else 10.0
    # Billed the same as without exact programs, to the last digit: an exact program is billed,
    # and charged to its launch's sample (interpreted_work), as the sampled twin it stands for.
    before = plain() if name.endswith(("_starter", "_tight")) else None
    reply = count()
    same = None if before is None else before == billed(reply)
    reference = full_fp32(_entry(_module_from_source(sources["reference.py"], "ref", str(task.file("reference.py"))), "reference.py"))
    entry = sim_reference.reference_entry(reference, specs, outs, workload, 7, custom or None, sources)
    rule = {"atol": task.correctness.atol, "rtol": task.correctness.rtol, "min_match": task.correctness.min_match}
    got = sim_reference.judge(entry, reply["values"], outs, rule)
    out[name] = {**got, "same_billing": same, "notes": reply["notes"], "exact_s": reply["exact_s"]}
print(json.dumps(out))
"""

GEMM = ("gemm/bf16_gemm", {"M": 1000, "N": 4096, "K": 4096})
DECODE = ("attention/decode_paged_gqa", {"B": 3, "L": 5000, "P": 16, "HQ": 32, "HKV": 8, "D": 128})
CANDIDATES = {
    "gemm_starter": (ROOT / "tasks/gemm/bf16_gemm/starter.py", *GEMM),
    "gemm_zeros_counted": (CHEATS / "gemm_zeros_counted.py", *GEMM),
    "gemm_half_k_counted": (CHEATS / "gemm_half_k_counted.py", *GEMM),
    "gemm_tight": (ROOT / "tasks/gemm/bf16_gemm/starter.py", *GEMM),
    "gemm_noexact": (ROOT / "tasks/gemm/bf16_gemm/starter.py", *GEMM),
    "decode_starter": (ROOT / "tasks/attention/decode_paged_gqa/starter.py", *DECODE),
    "decode_half_kv": (CHEATS / "decode_half_kv.py", *DECODE),
}


@pytest.fixture(scope="module")
def judged() -> dict:
    return run_per_candidate(JUDGE, CANDIDATES)


@pytest.mark.parametrize("name", ["gemm_starter", "decode_starter"])
def test_honest_dot_and_loop_kernels_are_value_checked_and_billed_as_before(judged, name):
    got = judged[name]
    assert got["wrong"] is None and got["skipped"] is None and got["malformed"] is None, got
    assert got["checked"] >= 500, "elements stored by its exact programs, compared"
    assert got["same_billing"] is True, "exact programs must not move the prediction"


@pytest.mark.parametrize(
    "name",
    [
        "gemm_zeros_counted",  # zero tiles, no K loop, when counted
        "gemm_half_k_counted",  # half the K loop when counted
        "decode_half_kv",  # half of each sequence's context when counted
    ],
)
def test_a_dot_or_loop_kernel_that_computes_less_when_counted_is_wrong_output(judged, name):
    got = judged[name]
    assert got["wrong"] is not None, got
    assert got["wrong"].startswith("sim_wrong_output: the counted call's output")


def test_an_exact_program_past_the_budget_is_said_in_the_notes_never_flagged(judged):
    """The launch's first exact program always runs to its end (every launch gets known
    elements: issue 37); the others share the call's budget, and one that does not fit runs as
    a sampled program, said in the notes."""
    got = judged["gemm_tight"]
    assert got["wrong"] is None and got["checked"] > 0, got
    assert got["same_billing"] is True, "a program left sampled is billed as a sampled one"
    assert any("did not fit this call's 0.01 s budget for exact work" in n for n in got["notes"])


def test_a_count_whose_values_are_not_compared_runs_no_exact_program(judged):
    got = judged["gemm_noexact"]  # sim_stage asks for none where the task has its own check.py
    assert got["exact_s"] == 0.0 and got["checked"] == 0 and got["notes"] == [], got


def test_the_exact_programs_are_drawn_afresh_by_every_count():
    counting = sim_count.Counting()  # not entered: nothing is patched
    draws = {frozenset(counting._exact_picks(list(range(9)))) for _ in range(20)}
    assert len(draws) > 1, "the same programs every time: a candidate could learn which"
    assert all(len(d) == sim_count.EXACT_PROGRAMS for d in draws)
    counting.in_trial = True
    assert counting._exact_picks(list(range(9))) == set(), "autotune trials run none"


def test_an_idle_exact_program_hands_its_turn_to_the_next_until_a_busy_one_runs_exactly():
    """A worst-case grouped-GEMM grid: only row tile 0 of each expert has rows; the others
    return at once and store nothing. Exact programs drawn among idle ones would check nothing."""
    import numpy as np

    launch = sim_count.Launch("grouped", lambda: None, (128, 128, 4), {}, {}, [])
    counting = sim_count.Counting()  # not entered: nothing is patched

    def run_one(x: int, y: int, z: int) -> None:
        program = counting.program
        assert program is not None
        program.load_sectors += 2 if y else 2 + 64 * 32
        if y == 0:  # a busy program stores its tile
            counting.stores.append((2, np.arange(16, dtype=np.int64) * 2 + 4096 * (x + 128 * z)))

    counting.run_programs(launch, run_one)
    # A program with no dot and no long loop is exact as its twin already: it stands for the
    # exact run (no deadline set); either way a busy program's stores are known elements.
    assert launch.exact_stores, "a busy program ran exactly: its stores are known elements"
