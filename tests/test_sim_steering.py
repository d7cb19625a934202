"""A counted loop skips iterations only where skipping cannot change what the others do
(core/harness/sim/steering.py; docs/simulation.md, "Loops whose carried values steer").

A `sim:` device counts a long loop by running a few of its iterations. A persistent grouped GEMM
(the Triton tutorial's schedule) carries its tile index and running tile and row counts from
one group to the next, and a `while` reads them: sampled, the next group counted saw the
skipped groups' rows as its own, and the kernel was billed 5 to 35 times its work at prefill
sizes, while its exact programs, which run every iteration, counted differently from their
sampled twins and the honest kernel failed as a cheat (`sim_exact_differs`). Read from the
kernel's source, such a loop now runs whole; a loop whose carried values only feed arithmetic
(an accumulator, an online softmax's running max) is sampled as before."""

from __future__ import annotations

import ast
import textwrap

import pytest

from core.harness.sim.steering import carried_names, steering_names
from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP, run_per_candidate


def _loops(source: str) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Each `for` loop of the function in `source`, by its target: (carried, steering)."""
    function = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(function, ast.FunctionDef)
    steering = steering_names(function)
    found = {}
    for loop in (n for n in ast.walk(function) if isinstance(n, ast.For)):
        carried = carried_names(function, loop)
        found[ast.unparse(loop.target)] = (carried, carried & steering)
    return found


GROUPED = """
def kernel(offs_ptr, E, N, K, PROGRAMS, BM, BN, BK):
    tile = tl.program_id(0)
    seen = 0
    first = 0
    for g in range(0, E):
        last = tl.load(offs_ptr + g)
        tiles = tl.cdiv(last - first, BM) * tl.cdiv(N, BN)
        while tile >= seen and tile < seen + tiles:
            acc = tl.zeros([BM, BN], dtype=tl.float32)
            for k in range(0, K, BK):
                acc = tl.dot(a, b, acc)
            tile += PROGRAMS
        seen += tiles
        first = last
"""

ONLINE_SOFTMAX = """
def kernel(q, k_ptr, L, BLOCK):
    m = float("-inf")
    total = 0.0
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, L, BLOCK):
        s = tl.sum(q * tl.load(k_ptr + start + tl.arange(0, BLOCK)))
        m_new = tl.maximum(m, s)
        total = total * tl.exp(m - m_new) + tl.exp(s - m_new)
        acc = acc * tl.exp(m - m_new)
        m = m_new
"""


def test_a_grouped_walk_carries_its_tile_index_and_running_offsets_and_they_steer():
    loops = _loops(GROUPED)
    assert loops["g"] == (frozenset({"tile", "seen", "first"}),) * 2
    carried, steering = loops["k"]
    assert carried == {"acc"} and not steering, "a K loop's accumulator only feeds arithmetic"


def test_an_online_softmax_carries_its_running_max_but_nothing_it_carries_steers():
    carried, steering = _loops(ONLINE_SOFTMAX)["start"]
    assert carried == {"m", "total", "acc"} and not steering


def test_a_flag_carried_into_a_branch_steers_but_one_carried_into_a_mask_does_not():
    """A `break`-like flag decides which iterations do work; a trip counter read only by a mask
    (tests/sim_cheats/exact_probe_loop.py) changes values, and the exact programs' twins catch
    a kernel that uses it to tell them apart."""
    flag = """
    def kernel(x_ptr, n):
        done = 0
        for i in range(n):
            if done == 0:
                done = tl.load(x_ptr + i)
    """
    mask = """
    def kernel(x_ptr, n):
        trips = 0
        for _ in range(5):
            trips += 1
        x = tl.load(x_ptr, mask=trips == 5)
    """
    assert _loops(flag)["i"][1] == {"done"}
    assert _loops(mask)["_"] == (frozenset({"trips"}), frozenset())


COUNT = (
    """
import json, sys
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.harness.sim import count as sim_count, loops as sim_loops, predict as sim_predict, stage as sim_stage
from core.harness.sim.model import Constants, Target
from core.harness.workers import _module_from_source
from core.model.workload import Workload
from core.tasks.discovery import find_task
from core.tasks.modules import load_module

"""
    + SIM_H200_SETUP
    + """
read_loop = sim_loops.loop_at_caller
out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    w = Workload(axes)
    workload = {"axes": axes, "shapes": task.tensor_shapes(axes)}
    specs, outs = [spec_json(s) for s in task.inputs], [spec_json(s) for s in task.outputs]
    custom = _module_from_source(task.file("inputs.py").read_bytes(), "task_inputs", str(task.file("inputs.py"))).make_inputs
    module = load_module(path, name)
    formula = {"flops": task.flops_for(w), "bytes": task.bytes_for(w), "dtype": task.peak}
    for way in ("as counted", "every loop whole", "steering unread"):
        sim_loops.INTERIOR_SAMPLE = 10**9 if way == "every loop whole" else 2
        sim_loops.loop_at_caller = (lambda: None) if way == "steering unread" else read_loop
        # Read unsteered, some programs still count as their twins (about a third of the first
        # sample here: one left with no tile walks every group alike). Two exact programs drawn
        # at random can both be such, and every program of the first sample runs exactly only
        # where they are cheap on the clock (EXACT_CHEAP_S, not on a loaded machine): so here
        # every one of them runs exactly, and those that differ from their twins are met.
        sim_count.EXACT_PROGRAMS = 10**6 if way == "steering unread" else 2
        reply = sim_predict.predict_candidate(module.run, specs, workload, 7, custom, compiler, exact=True, outputs=outs)
        launches = sim_stage.checked_launches(reply)
        problem, _side, _notes = sim_stage.count_problems(reply, launches, [], {"inputs": specs, "outputs": outs}, formula, target, constants, True)
        flops = sum(s["per_program"]["dot_flops"].get("bf16", 0.0) * s["programs"] for s, _ in launches)
        out[f"{name}: {way}"] = {"problem": problem, "flops": flops}
print(json.dumps(out))
"""
)

# Prefill-like: 64 groups of about 64 rows, each within one 128-row tile; 132 programs walk them.
M, E, N, K = 4096, 64, 256, 256
PREFILL = ("gemm/bf16_grouped_gemm", {"M": M, "E": E, "N": N, "K": K, "S": 1})
BM = 128  # the kernel's row tile: a group's last tile is padded to it


@pytest.fixture(scope="module")
def counted() -> dict:
    """The Triton tutorial's grouped GEMM, as the held-out set has it (honest: measured on the
    H200 at 90-484 µs for this task's workloads)."""
    honest = ROOT / "bench" / "sim_published" / "tutorial_grouped_gemm.py"
    return run_per_candidate(COUNT, {"grouped": (honest, *PREFILL)})


def test_a_steered_loop_is_counted_as_if_nothing_were_skipped(counted):
    got, whole = counted["grouped: as counted"], counted["grouped: every loop whole"]
    assert got["flops"] == pytest.approx(whole["flops"], rel=0.02)
    # At least the true work, at most that with every group's last tile padded.
    assert 2 * M * N * K <= got["flops"] <= 2 * (M + (BM - 1) * E) * N * K


def test_its_exact_programs_count_as_their_sampled_twins_so_the_honest_kernel_passes(counted):
    assert counted["grouped: as counted"]["problem"] is None


def test_sampled_as_before_the_same_kernel_was_billed_several_times_its_work_and_flagged(counted):
    before = counted["grouped: steering unread"]
    assert before["flops"] > 3 * counted["grouped: every loop whole"]["flops"]
    assert before["problem"] and before["problem"].startswith("sim_exact_differs"), before
