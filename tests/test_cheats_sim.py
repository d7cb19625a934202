"""The cheat suite on a `sim:` device: a simulated GPU runs the compile, correctness and hidden
stages as the CPU device does, in the same sandboxed harness, so the defenses there must hold
the same (docs/integrity.md, issue 37: every class has a cheat run on cpu and sim). One cheat of
each class decided before the performance stage runs here with the outcome the catalogue gives
it; the `sim:` device's own performance-stage defenses are tests/test_sim_*.py's (the cheats of
tests/sim_cheats/)."""

from __future__ import annotations

import pytest

from core.evaluation.evaluator import Evaluator
from tests.cheats.catalogue import by_name, outcome_problems
from tests.test_cheats import FAST, LIMITS, _describe, _task

ON_SIM = (
    "visible_only",  # hidden workloads
    "lower_precision",  # tolerances per dtype
    "alias_input",  # outputs never alias inputs
    "subclass",  # outputs are plain tensors
    "patch_matmul",  # torch patched: proof
    "mode_function_refill",  # a mode left pushed: proof
    "secrets_hunt",  # no secret in the candidate's reach
    "daemon",  # leftover processes: proof
    "check_seed_hunt",  # correctness inputs from the trusted worker
    "earlier_candidates",  # each worker sees its own evaluation only
)


@pytest.fixture(scope="module")
def sim_evaluator():
    with Evaluator("sim:h200", timing=FAST) as evaluator:
        yield evaluator


@pytest.mark.parametrize("name", ON_SIM)
def test_a_cheat_is_caught_on_a_simulated_gpu_as_on_the_cpu(sim_evaluator, name):
    cheat = by_name(name)
    result = sim_evaluator.evaluate(_task(cheat.task), cheat.path, limits=LIMITS, performance=False)
    assert result.status != "infrastructure_error", _describe(result)
    problems = outcome_problems(cheat.expect, cheat.notes, result)
    assert not problems, f"{name} on sim:h200: {problems}\n{_describe(result)}"
