"""A `sim:` device's holds on a count that sampled its launches (docs/integrity.md, "Issue 37:
what stays open"). At GPU sizes a launch runs a sample of its programs and its totals are the
sample's mean times its programs. Two checks hold the count: the task's byte and FLOP formulas
(`sim_less_work`, judge.formula_problem) and the outputs written (`sim_unwritten_output`,
written.problem). Where the programs differ (the idle tiles of a worst-case grouped-GEMM grid,
padding tokens), a sample of a few hundred programs sees a handful of busy ones, and an honest
kernel's estimate falls short of a hold by chance. So:

- each launch reports its totals' standard errors (launch.total_se), and a hold fails only
  where the count falls short by more than `SAMPLING_Z` of them: a kernel that does less in
  every program has no spread and is held exactly;
- a count whose point estimate falls short while a launch was sampled is recounted on the same
  inputs with many more programs (predict.doubted, Counting's `confirm`), and that recount is
  the one billed and judged: a kernel that skips half its busy programs is caught there;
- where the drawn inputs need less than the byte formula (a padding token moves nothing), the
  task's reference.py says how much (`bytes_share`, run by the trusted worker), and the hold is
  of that.

The first tests drive `Counting.run_programs` with stand-in programs (no interpreter); the last
count kv_cache_write's and bf16_grouped_gemm's starters and two cheats in the interpreter."""

from __future__ import annotations

import random

import pytest

from core.harness.sim import judge
from core.harness.sim import written as sim_written
from core.harness.sim.count import SAMPLING_Z, STORED, Counting, Launch, TensorArg
from core.harness.sim.launch import total_se
from core.harness.sim.predict import doubted
from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP, run_per_candidate

TILE_BYTES = 4096  # what a busy program of the stand-in grid stores
GROUPS, ROW_TILES, COL_TILES = 128, 64, 32  # 262,144 programs, about one in a hundred busy


def _group_tiles(seed: int) -> list[int]:
    """Row tiles per group, drawn: most groups have none or one, a few hot ones more."""
    rng = random.Random(seed)
    return [rng.choice((0, 0, 1, 1, 1, 2, 3)) for _ in range(GROUPS)]


def _grouped(seed: int, skip_odd: bool, confirm: bool) -> Launch:
    """A worst-case grouped grid (group, row tile, column tile) counted as count.py counts one:
    program (g, m, n) stores a tile where group g has a row tile m and returns after reading
    its offsets elsewhere. `skip_odd`: a cheat that also returns on odd column tiles (half the
    work, decided by the program's id, so its exact runs and twins agree)."""
    tiles = _group_tiles(seed)
    busy = sum(tiles) * COL_TILES
    out = TensorArg("out", 0, busy * TILE_BYTES)  # every busy program's tile, once
    launch = Launch("grouped", lambda: None, (GROUPS, ROW_TILES, COL_TILES), {}, {}, [out])
    counting = Counting(confirm=confirm)  # not entered: that would patch the interpreter

    def run_one(g: int, m: int, n: int) -> None:
        program = counting.program
        assert program is not None
        program.load_sectors += 2  # the group's offsets
        if m < tiles[g] and not (skip_odd and n % 2):
            program.load_sectors += 64 * 32  # its K loop's tiles of a and b
            program.store_sectors += TILE_BYTES // 32
            program.tensor_bytes["out" + STORED] = float(TILE_BYTES)

    counting.run_programs(launch, run_one)
    return launch


def _formula(seed: int) -> dict:
    """The bytes every correct call must store: each busy program's tile."""
    return {"bytes": float(sum(_group_tiles(seed)) * COL_TILES * TILE_BYTES), "flops": 0.0}


def _judged(seed: int, skip_odd: bool = False) -> tuple[float, str | None]:
    """(the first count's share of the formula, the stage's verdict), counted as the candidate's
    worker counts (a recount where `doubted`) and judged as the stage judges."""
    formula = _formula(seed)
    first = _grouped(seed, skip_odd, confirm=False).summary()
    share = first["dram_bytes"] / formula["bytes"]
    billed = first
    if doubted({"launches": [first], "written": []}, formula):
        billed = _grouped(seed, skip_odd, confirm=True).summary()
    return share, judge.formula_problem(formula, [(billed, None)], [])


def test_a_launch_run_whole_has_no_sampling_error_and_a_sampled_one_says_how_far_it_may_be_off():
    assert total_se([0.0, 1.0, 0.0, 1.0], 4) == 0.0, "every program ran: the total is exact"
    assert total_se([1.0] * 8, 1000) == 0.0, "programs alike: their mean is the launch's"
    assert total_se([0.0, 1.0] * 4, 1000) > 0.0
    for seed in range(4):
        summary = _grouped(seed, skip_odd=False, confirm=False).summary()
        truth = _formula(seed)["bytes"]
        assert 0 < summary["sampled"] < summary["programs"]
        if summary["dram_bytes"] < truth:  # short: by how much, the sample says
            assert summary["dram_se"] > 0.1 * summary["dram_bytes"], "a few busy programs"
        else:  # over: capped at the tensor's size, which no upper bound can pass
            assert summary["dram_bytes"] == truth and summary["dram_se"] == 0.0


SEEDS = (*range(8), 32)  # 32: the first sample (1,024 programs) saw 10 busy ones of 2%: 65%


def test_an_honest_grid_with_data_dependent_idle_programs_passes_its_hold_at_every_seed():
    judged = {seed: _judged(seed) for seed in SEEDS}
    assert all(problem is None for _, problem in judged.values()), judged
    # ... though its first sample alone would have failed (as the grouped GEMM's starter did:
    # 59-70% of `out` written at some seeds)
    assert judged[32][0] < 0.8, judged


def test_a_grid_that_skips_half_its_busy_programs_still_fails_at_every_seed():
    for seed in SEEDS:
        share, problem = _judged(seed, skip_odd=True)
        assert problem and problem.startswith("sim_less_work:"), (seed, share)


def test_a_kernel_that_does_less_in_every_program_has_no_spread_and_is_held_exactly():
    launch = {"dram_bytes": 0.79e6, "dram_se": 0.0, "programs": 64, "per_program": {}}
    assert judge.formula_problem({"bytes": 1e6, "flops": 0.0}, [(launch, None)], [])
    within = {**launch, "dram_se": 0.01e6 / SAMPLING_Z + 1.0}  # short by less than its error
    assert judge.formula_problem({"bytes": 1e6, "flops": 0.0}, [(within, None)], []) is None
    assert judge.formula_problem({"bytes": 1e6, "flops": 0.0}, [(within, None)], [], z=0.0), (
        "the worker's point estimate (z = 0) still calls for a recount"
    )


def test_the_byte_hold_is_of_what_the_drawn_inputs_need():
    """kv_cache_write at T = 3 with one padding token moves two thirds of its formula's bytes,
    exactly (its three programs all ran); at T = 1 with the token padded, nothing."""
    launch = ({"dram_bytes": 8216.0, "programs": 3, "per_program": {}}, None)
    formula = {"bytes": 12312.0, "flops": 0.0}
    assert (judge.formula_problem(formula, [launch], []) or "").startswith("sim_less_work:")
    assert judge.formula_problem({**formula, "bytes_share": 0.667}, [launch], []) is None
    nothing = ({"dram_bytes": 8.0, "programs": 1, "per_program": {}}, None)
    assert judge.formula_problem({"bytes": 8200.0, "bytes_share": 0.0}, [nothing], []) is None
    message = judge.formula_problem({**formula, "bytes_share": 0.9}, [launch], []) or ""
    assert "on these drawn inputs (90% of the task's byte formula; at least 80%)" in message


def test_an_output_written_by_sampled_programs_fails_only_beyond_its_samples_error():
    assert sim_written.problem([0.6], ["out"], [0.85]) is None, "short by chance, maybe"
    message = sim_written.problem([0.5], ["out"], [0.7]) or ""
    assert message.startswith("sim_unwritten_output:") and "at most 70%" in message
    assert sim_written.problem([0.5], ["out"]), "no bound given: the estimate is held"
    assert sim_written.inplace_problem([1000], [700.0], ["cache"], [900.0]) is None
    assert sim_written.inplace_problem([1000], [500.0], ["cache"], [700.0])


def test_only_a_sampled_count_that_falls_short_is_recounted():
    formula = {"bytes": 1e6, "flops": 0.0}
    sampled = {"sampled": 32, "programs": 77, "dram_bytes": 0.7e6, "per_program": {}}
    whole = {**sampled, "sampled": 77}
    assert doubted({"launches": [sampled]}, formula)
    assert doubted({"launches": [whole]}, formula) is None, "exact: nothing to confirm"
    assert doubted({"launches": [{**sampled, "dram_bytes": 0.9e6}]}, formula) is None
    assert "wrote 60% of output #0" in (
        doubted({"launches": [{**sampled, "dram_bytes": 0.9e6}], "written": [0.6]}, formula) or ""
    )


# --- the bundled starters that false-alarmed, and two cheats, counted in the interpreter ------

COUNT = (
    """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.harness.sim import gpu_inputs as sim_inputs, predict as sim_predict, stage as sim_stage
from core.harness.sim.checked import checked_launches, checked_ops
from core.harness.sim.model import Constants, Target
from core.model.task import Workload
from core.tasks.discovery import find_task

"""
    + SIM_H200_SETUP
    + """

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

out = {}
for name, (path, task_name, case) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    axes, seed = case["axes"], case["seed"]
    specs, outs = [spec_json(s) for s in task.inputs], [spec_json(o) for o in task.outputs]
    workload = {"axes": axes, "shapes": task.tensor_shapes(axes)}
    w = Workload(axes=axes)
    formula = {"flops": task.flops_for(w), "bytes": task.bytes_for(w), "bytes_hold": task.bytes_hold, "dtype": task.peak}
    make = load(task.file("inputs.py"), name + "_inputs").make_inputs
    run = load(path, name).run
    reply = sim_predict.predict_candidate(run, specs, workload, seed, make, compiler, outputs=outs, formula=formula)
    launches, ops = checked_launches(reply), checked_ops(reply["torch_ops"], "candidate")
    # what the trusted worker answers when the count falls short of the byte formula
    share = sim_inputs.drawn_share(getattr(load(task.file("reference.py"), name + "_ref"), "bytes_share", None), specs, workload, seed, make)
    judged = {**formula, **({"bytes_share": share} if share is not None else {})}
    found, _, _ = sim_stage.count_problems(reply, launches, ops, {"inputs": specs, "outputs": outs}, judged, target, constants, False)
    out[name] = {"problem": found, "share": share, "recounted": any(n.startswith("recounted") for n in reply["notes"])}
print(json.dumps(out))
"""
)

KV = "elementwise/kv_cache_write"
KV_T77 = {"T": 77, "Hkv": 8, "d": 128, "NB": 2048, "BS": 16}
GROUPED = "gemm/bf16_grouped_gemm"
GROUPED_M616 = {"M": 616, "E": 128, "N": 2048, "K": 768, "S": 50}
STARTER = ROOT / "tasks" / KV / "starter.py"
CHEATS = ROOT / "tests" / "sim_cheats"


@pytest.mark.slow
def test_kv_cache_writes_starter_passes_at_the_seeds_it_failed_and_a_half_skipping_one_does_not():
    """The workload seeds of `Evaluator("sim:h200").evaluate(..., seed=s)` for s = 0..3 at
    T = 77, where s = 0 failed with 66% of the byte formula: 18 of its 77 tokens are padding
    (77% of the formula is all any implementation moves) and its sample of 32 programs held
    11 of them. And T = 3 at s = 2 (one token of three padded: 67%, exactly)."""
    seeds = (554988985561, 840127549046, 1095896909697, 1091745227815)
    candidates = {f"starter_{s}": (STARTER, KV, {"axes": KV_T77, "seed": s}) for s in seeds}
    candidates["starter_T3"] = (
        STARTER,
        KV,
        {"axes": {**KV_T77, "T": 3, "Hkv": 4, "NB": 1024}, "seed": 749820561744},
    )
    candidates["skip_half"] = (CHEATS / "kv_skip_half.py", KV, {"axes": KV_T77, "seed": seeds[0]})
    got = run_per_candidate(COUNT, candidates)
    for name in candidates:
        if name.startswith("starter"):
            assert got[name]["problem"] is None, (name, got[name])
    assert got[f"starter_{seeds[0]}"]["recounted"] and got[f"starter_{seeds[0]}"]["share"] < 0.8
    assert got["starter_T3"]["share"] == pytest.approx(2 / 3, abs=0.01)
    assert (got["skip_half"]["problem"] or "").startswith("sim_less_work:"), got["skip_half"]


@pytest.mark.slow
def test_the_grouped_gemms_starter_passes_where_its_sample_wrote_60_percent_and_a_cheat_does_not():
    """M = 616 with skewed routing: 3,840 of the 81,920 programs have rows, and half the rows of
    `out` lie in 320 of them (the hot experts' full row tiles). At this seed (s = 2's) a first
    sample of 256 programs estimated 60% of `out` written; the recount runs thousands of
    programs. The cheat skips odd column tiles; it is counted at M = 24 (576 of 3,072 programs
    busy, one row each), where the recount pins the share it wrote to within a few percent. At
    M = 616 the recount's error is still about ±10% of the bytes, so the cheat fails there by
    a small margin only (docs/integrity.md, "Issue 37: what stays open")."""
    case = {"axes": GROUPED_M616, "seed": 1095896909697}
    got = run_per_candidate(
        COUNT,
        {
            "starter": (ROOT / "tasks" / GROUPED / "starter.py", GROUPED, case),
            "skip_half": (
                CHEATS / "grouped_skip_half.py",
                GROUPED,
                {"axes": {"M": 24, "E": 128, "N": 1536, "K": 2048, "S": 1}, "seed": 981758150271},
            ),
        },
    )
    assert got["starter"]["problem"] is None, got["starter"]
    # half of `out` unwritten, half the bytes moved: which hold says so first depends on how
    # many programs the recount's time afforded
    assert (got["skip_half"]["problem"] or "").startswith(
        ("sim_unwritten_output:", "sim_less_work:")
    ), got
    assert got["skip_half"]["recounted"], "its first sample fell short: confirmed by a recount"
