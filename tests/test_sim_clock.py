"""A launch's sample grows by interpreted work, not by the clock (core/harness/sim/clock.py;
docs/simulation.md, "The sample's clock"): an identical source is predicted identically,
however loaded the machine that counts it (issue 35).

A `sim:` device runs a sample of a large launch's programs and grows it where they differ (to 32)
or where most of them are idle (to 1,024), within budgets. The budgets were interpreter seconds,
so on a loaded machine a sample stopped smaller and the same kernel was predicted differently:
the Triton tutorial's grouped GEMM sampled 32 programs on a quiet machine and 16 beside the test
suite (179.8 against 177.7 µs). They are now the work the interpreter ran, tallied from its
builder operations: the same on any machine. The first tests drive `Counting.run_programs` with
stand-in programs that tally a known work (no interpreter); the last counts a real grouped GEMM
with a clock a hundred times slow."""

from __future__ import annotations

import time

import pytest

from core.harness.sim import count as sim_count
from core.harness.sim.count import PROGRAM_BUDGET, SPARSE_BUDGET, Counting, Launch
from tests.sim_counting import SIM_H200_SETUP, run_per_candidate


class SlowClock:
    """`time` as core/harness/sim/count.py reads it on a machine a hundred times as loaded:
    every interval it measures reads a hundred times as long."""

    @staticmethod
    def perf_counter() -> float:
        return 100.0 * time.perf_counter()


def _sampled(
    programs: int, busy_every: int, work: int, sectors: tuple[int, int], burn_s: float = 0.0
) -> Launch:
    """A launch of stand-in programs, each tallying `work` (interpreted work) and, if `burn_s`,
    taking that long: one in `busy_every` reads `sectors[0]` sectors, the others `sectors[1]`
    (few: a program that read its offsets and returned)."""
    launch = Launch("stand_in", lambda: None, (programs, 1, 1), {}, {}, [])
    counting = Counting()  # not entered: that would patch the interpreter for this whole process

    def run_one(x: int, _y: int, _z: int) -> None:
        program = counting.program
        assert program is not None
        program.load_sectors += sectors[0] if x % busy_every == 0 else sectors[1]
        counting.tally(work)
        time.sleep(burn_s)

    counting.run_programs(launch, run_one)
    return launch


def test_a_sample_whose_programs_differ_grows_until_their_work_passes_the_budget():
    """Half the programs read twice the others' sectors: the sample doubles from 8 while its
    programs' work is within PROGRAM_BUDGET, and stops at the first size past it."""
    launch = _sampled(100_000, 2, PROGRAM_BUDGET // 12, (4096, 2048))  # 8 programs: 2/3 of it
    assert len(launch.programs) == 16
    assert launch.interpreted.work > PROGRAM_BUDGET


def test_a_mostly_idle_sample_grows_until_its_work_passes_the_sparse_budget():
    """Nine in ten programs return at once: the sample grows towards 1,024 programs while their
    work is within SPARSE_BUDGET (here a hundred programs' worth)."""
    launch = _sampled(1_000_000, 10, SPARSE_BUDGET // 100, (4096, 2))
    assert len(launch.programs) == 128


def test_the_same_programs_are_sampled_whatever_the_clock_reads(monkeypatch):
    """Programs that take 2 ms each: 32 ms for 16 of them, 3.2 s on a clock a hundred times
    slow, where the budget in seconds stopped the sample at 8 programs."""

    def sample() -> list[float]:
        launch = _sampled(100_000, 2, PROGRAM_BUDGET // 12, (4096, 2048), burn_s=0.002)
        return [p.load_sectors for p in launch.programs]

    quiet = sample()
    monkeypatch.setattr(sim_count, "time", SlowClock())
    assert sample() == quiet
    assert len(quiet) == 16


def test_an_autotune_trial_without_a_model_is_judged_by_its_work_not_its_seconds(monkeypatch):
    """Without the job's model (outside a `sim:` evaluation) a trial's figure is its
    interpreted work, in the calibration machine's milliseconds: a tenth of PROGRAM_BUDGET
    (and four operations' fixed cost) reads 100 ms on any machine."""
    counting = Counting()

    def trial() -> None:
        def run_one(_x: int, _y: int, _z: int) -> None:
            counting.tally(PROGRAM_BUDGET // 40)
            time.sleep(0.002)

        counting.run_programs(Launch("trial", lambda: None, (4, 1, 1), {}, {}, []), run_one)

    quiet = counting.judge_trial(trial)
    monkeypatch.setattr(sim_count, "time", SlowClock())
    assert counting.judge_trial(trial) == quiet == pytest.approx(100.0, rel=1e-2)


COUNT = (
    SIM_H200_SETUP
    + """
import json, sys, time
from core.evaluation.job import spec_json
from core.harness.sim import count as sim_count
from core.harness.workers import _module_from_source
from core.tasks.discovery import find_task
from core.tasks.modules import load_module

class SlowClock:  # a machine a hundred times as loaded, as count.py reads its clock
    perf_counter = staticmethod(lambda: 100.0 * time.perf_counter())

def billed(reply):
    # Each launch's summary as the harness parent prices it; its interpreter seconds are a
    # measurement of the clock, and the AOT compile's resources are not the sample's.
    return [{k: v for k, v in s.items() if k not in ("interpreter_s", "resources")} for s in reply["launches"]]

out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    workload = {"axes": axes, "shapes": task.tensor_shapes(axes)}
    specs = [spec_json(s) for s in task.inputs]
    custom = _module_from_source(task.file("inputs.py").read_bytes(), "task_inputs", str(task.file("inputs.py"))).make_inputs
    module = load_module(path, name)
    count = lambda: billed(sim_predict.predict_candidate(module.run, specs, workload, 7, custom, compiler, exact=True))
    quiet = count()
    sim_count.time = SlowClock
    loaded = count()
    sim_count.time = time
    out[name] = {"quiet": quiet, "loaded": loaded}
print(json.dumps(out))
"""
)

# The task's own starter at one of its measured H200 workloads: a worst-case grid (every row in
# one group), 3,072 programs of which about one in five has rows, so its sample grows past 32.
GROUPED = ("gemm/bf16_grouped_gemm", {"M": 24, "E": 128, "N": 1536, "K": 2048, "S": 1})


@pytest.fixture(scope="module")
def counted() -> dict:
    from tests.conftest import ROOT

    starter = ROOT / "tasks" / "gemm" / "bf16_grouped_gemm" / "starter.py"
    return run_per_candidate(COUNT, {"grouped": (starter, *GROUPED)})["grouped"]


def test_a_grown_sample_and_its_counts_are_the_same_on_a_machine_a_hundred_times_as_loaded(
    counted,
):
    quiet, loaded = counted["quiet"], counted["loaded"]
    assert max(s["sampled"] for s in quiet) > 32, "the sample grew: most of its programs are idle"
    assert [s["sampled"] for s in loaded] == [s["sampled"] for s in quiet]
    assert loaded == quiet, "every count of every launch, to the last digit"
