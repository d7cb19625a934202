"""The multi-turn environment (core/rl/env.py) on the CPU device, with the axpy fixture task: a
scripted policy improves its candidate step by step and the reward rises; the hidden
workloads are scored only at the end and are never named in anything the policy sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.evaluation.job import Timing
from core.rl.env import EpisodeError, KernelEnv, extract_code
from tests.candidates import AXPY, COMPILE_ERROR

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
FAST = Timing(
    alternations=2, budget_ms=40.0, min_calls=2, max_calls=10
)  # short, and still 10× apart where it matters

WRONG = "import torch\n\ndef run(x, b):\n    return 2 * x - b\n"
# Correct and slow: one small op per row, then a stack.
SLOW = "import torch\n\ndef run(x, b):\n    return torch.stack([2 * x[i] + b[i] for i in range(x.shape[0])])\n"
SCRIPT = [COMPILE_ERROR, WRONG, SLOW, AXPY]


@pytest.fixture(scope="module")
def env():
    with KernelEnv(
        "elementwise/axpy",
        device="cpu",
        max_turns=4,
        tasks_dir=FIXTURE_TASKS,
        timing=FAST,
        profile="full",  # every visible workload timed, so the feedback lists each
    ) as e:
        yield e


def hidden_strings(env: KernelEnv) -> list[str]:
    """The hidden workloads of the episode's final evaluation, as they could be written."""
    final = env.final_result
    assert final is not None
    gen = final.result.stage("generalization")
    labels = [w["label"] for w in gen.workloads]
    assert labels, "the final evaluation must have run the hidden workloads"
    shapes = [f"{w['axes']['N']}, {w['axes']['D']}" for w in gen.workloads]
    return labels + shapes


def test_reset_observation_shows_the_task_and_no_hidden_workload(env: KernelEnv) -> None:
    obs = env.reset(seed=0)
    assert obs.turn == 0 and obs.max_turns == 4 and not obs.done and obs.final is None
    assert "run(x: float32[N, D], b: float32[N, D]) -> y: float32[N, D]" == obs.signature
    assert [w["label"] for w in obs.visible_workloads] == ["N=64,D=128", "N=16,D=256"]
    assert "def run" in obs.starter and "torch.add(b, x, alpha=2)" in obs.prompt
    assert "N=33" not in json.dumps(obs.to_json())  # the fixed hidden workload
    assert "Starter:" in obs.text()


def test_scripted_policy_reward_rises_and_hidden_stays_hidden(env: KernelEnv) -> None:
    obs = env.reset(seed=7)
    seen: list[str] = [json.dumps(obs.to_json())]
    rewards, infos = [], []
    for source in SCRIPT:
        obs, reward, done, info = env.step(source)
        seen += [json.dumps(obs.to_json()), json.dumps(info)]
        rewards.append(info["turn_reward"])
        infos.append((obs, reward, done, info))

    # Step 1: a compile error the agent can read; 2: the worst mismatch with its workload.
    first, second = infos[0][0], infos[1][0]
    assert rewards[0] == -0.5 and first.last["outcome"] == "compile_failed"
    assert "SyntaxError" in first.last["compile_error"] and "SyntaxError" in first.feedback
    # The candidate's own error first, its traceback cut to its own frames: no harness frame,
    # no path of the arena's (the trainer's full Result keeps the whole log).
    assert first.last["compile_error"].startswith("SyntaxError")
    assert 'File "candidate.py", line' in first.feedback
    assert "core/harness" not in first.feedback and "/tmp/" not in first.feedback
    whole = env.episode.turns[0].rewarded.result.stage("compile")
    # the trainer keeps the whole message: the candidate's file where the arena ran it
    assert "/candidate/candidate.py" in f"{whole.message}\n{whole.log}"
    assert rewards[1] == -0.25 and second.last["mismatch"]["workload"] in (
        "N=64,D=128",
        "N=16,D=256",
    )
    mismatch = second.last["mismatch"]
    assert (
        mismatch["output"] == "y" and len(mismatch["index"]) == 2 and mismatch["max_abs_err"] > 0.1
    )
    assert (
        mismatch["expected"] != mismatch["got"]
        and f"worst mismatch on workload {mismatch['workload']}" in second.feedback
    )
    # Steps 3 and 4: correct; per-workload times and speedups; the fast one earns more.
    slow, fast = infos[2][0].last, infos[3][0].last
    assert [t["workload"] for t in slow["timings"]] == [
        "N=64,D=128",
        "N=16,D=256",
    ]  # visible workloads only
    assert all(t["candidate_us"] > 0 and t["baseline_us"] > 0 for t in fast["timings"])
    assert fast["speedup"] > slow["speedup"]
    assert rewards == sorted(rewards) and len(set(rewards)) == 4, (
        f"the reward must rise step by step: {rewards}"
    )

    # Every turn ran the visible workloads only: no hidden workload was even in the job.
    for obs_i, *_ in infos:
        assert obs_i.last["stages"]["generalization"] == "skipped"

    # The turn limit ended the episode: the best candidate (turn 4) scored on every workload.
    obs, reward, done, info = infos[-1]
    assert done and obs.done and info["best_turn"] == 4
    assert reward == info["final_reward"] == env.final_result.reward and reward > 0
    assert obs.final["hidden"]["status"] == "passed" and obs.final["hidden"]["total"] >= 2
    assert env.final_result.result.stage("generalization").status == "passed"
    for text in hidden_strings(env):
        for blob in seen:
            assert text not in blob, f"hidden workload {text} leaked into what the policy saw"
    with pytest.raises(EpisodeError, match="the episode is over"):
        env.step(AXPY)


def test_final_action_ends_early_on_the_best_candidate(env: KernelEnv) -> None:
    env.reset(seed=1)
    _, r1, done1, _ = env.step(AXPY)
    _, r2, done2, _ = env.step(WRONG)
    assert not done1 and not done2 and r2 == -0.25
    obs, reward, done, info = env.step(None, final=True)
    assert (
        done
        and info["best_turn"] == 1
        and obs.final["outcome"] == "correct"
        and reward is not None
        and reward > 0
    )
    assert env.state()["final_reward"] == reward


def test_a_failing_best_is_not_run_again_and_errors_are_clear(env: KernelEnv) -> None:
    env.reset(seed=2)
    with pytest.raises(EpisodeError, match="no candidate has been scored yet"):
        env.step(None, final=True)
    with pytest.raises(EpisodeError, match="give the candidate's source"):
        env.step(None)
    obs, reward, done, info = env.step(
        "import torch\n", final=True
    )  # no `run`: the policy's compile failure
    assert done and reward == -0.5 and obs.final["outcome"] == "compile_failed"
    assert "defines no `run`" in obs.last["compile_error"]
    env.reset(seed=3)
    with pytest.raises(TypeError, match="source: give the candidate's Python source as a string"):
        env.step(42)  # type: ignore[arg-type]


def test_bad_construction_and_reset() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        KernelEnv("elementwise/axpy", max_turns=0)
    with pytest.raises(EpisodeError, match="no episode"):
        KernelEnv("elementwise/axpy").observation()


def test_extract_code_takes_the_last_fenced_block() -> None:
    reply = "First try:\n```python\nx = 1\n```\nBetter:\n```python\ndef run(x, b):\n    return x\n```\nFINAL"
    assert extract_code(reply) == "def run(x, b):\n    return x\n"
    assert extract_code("def run(x): return x") == "def run(x): return x"
