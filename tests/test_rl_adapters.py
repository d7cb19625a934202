"""The optional adapters (core/rl/adapters/): a clear error when their library is missing, the core
unaffected, and their code paths exercised against minimal stand-ins of gymnasium, verifiers
and datasets injected into sys.modules (the real libraries are not installable offline; the
tests marked `real` run only where they are installed)."""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from core.evaluation.job import Timing
from core.rl.arena import Arena
from tests.candidates import AXPY

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
FAST = Timing(alternations=1, budget_ms=20.0, min_calls=1, max_calls=5)


def _fake_gymnasium() -> types.ModuleType:
    gym = types.ModuleType("gymnasium")

    class Env:
        def reset(self, *, seed: int | None = None, options: dict | None = None) -> None:
            self.np_random_seed = seed

    class Text:
        def __init__(self, max_length: int, charset: str = "") -> None:
            self.max_length, self.charset = max_length, charset

    gym.Env = Env  # type: ignore[attr-defined]
    gym.spaces = types.SimpleNamespace(Text=Text)  # type: ignore[attr-defined]
    gym.registered = {}  # type: ignore[attr-defined]
    gym.register = lambda id, entry_point: gym.registered.__setitem__(id, entry_point)  # type: ignore[attr-defined]
    return gym


def _fake_verifiers() -> tuple[types.ModuleType, types.ModuleType]:
    vf = types.ModuleType("verifiers")

    class MultiTurnEnv:
        def __init__(
            self, dataset: Any = None, rubric: Any = None, max_turns: int = 10, **kwargs: Any
        ) -> None:
            self.dataset, self.rubric, self.max_turns, self.kwargs = (
                dataset,
                rubric,
                max_turns,
                kwargs,
            )

    class Rubric:
        def __init__(self, funcs: list, weights: list) -> None:
            self.funcs, self.weights = funcs, weights

    vf.MultiTurnEnv, vf.Rubric = MultiTurnEnv, Rubric  # type: ignore[attr-defined]
    ds = types.ModuleType("datasets")
    ds.Dataset = types.SimpleNamespace(from_list=lambda rows: list(rows))  # type: ignore[attr-defined]
    return vf, ds


def _fresh(module: str) -> types.ModuleType:
    sys.modules.pop(module, None)
    return importlib.import_module(module)


def test_missing_libraries_give_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # None: import raises ImportError
    monkeypatch.setitem(sys.modules, "verifiers", None)
    gym_env = _fresh("core.rl.adapters.gym_env")  # importing the adapter never imports the library
    with pytest.raises(
        ImportError, match=r"pip install -e '\.\[gym\]' in the kernel-arena checkout"
    ):
        gym_env.make_env("elementwise/axpy")
    verifiers_env = _fresh("core.rl.adapters.verifiers_env")
    with pytest.raises(
        ImportError, match=r"pip install -e '\.\[verifiers\]' in the kernel-arena checkout"
    ):
        verifiers_env.load_environment()
    import core.rl.arena
    import core.rl.env  # noqa: F401 - the core stands without them


def test_a_verifiers_release_with_another_api_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    v04 = types.ModuleType("verifiers")
    v04.__version__ = "0.4.0"  # type: ignore[attr-defined]  # its API lives in verifiers.v1
    _, ds = _fake_verifiers()
    monkeypatch.setitem(sys.modules, "verifiers", v04)
    monkeypatch.setitem(sys.modules, "datasets", ds)
    verifiers_env = _fresh("core.rl.adapters.verifiers_env")
    with pytest.raises(ImportError, match=r"0\.4 replaced the API with verifiers\.v1"):
        verifiers_env.load_environment(task_ids=["elementwise/axpy"], tasks_dir=FIXTURE_TASKS)


def test_gym_observations_always_lie_in_the_observation_space() -> None:
    from core.rl.adapters.gym_env import CHARSET, in_charset

    text = "2·N·D bytes, 1.3× faster — within ≤ 1 µs; ok"
    assert in_charset(text) == text  # the arena's own symbols stay as they are
    odd = in_charset("RuntimeError: 形状 mismatch")  # a candidate's own message
    assert set(odd) <= set(CHARSET) and "\\u5f62" in odd


def test_gym_adapter_against_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    gym = _fake_gymnasium()
    monkeypatch.setitem(sys.modules, "gymnasium", gym)
    gym_env = _fresh("core.rl.adapters.gym_env")
    env = gym_env.make_env(
        "elementwise/axpy", device="cpu", max_turns=2, tasks_dir=FIXTURE_TASKS, timing=FAST
    )
    try:
        assert isinstance(env, gym.Env) and env.action_space.max_length == 1 << 20
        obs, info = env.reset(seed=4)
        assert "Starter:" in obs and env.np_random_seed == 4 and info["observation"]["turn"] == 0
        obs, reward, terminated, truncated, info = env.step(
            "Here it is:\n```python\n" + AXPY + "```\n"
        )
        assert (
            reward > 0
            and not terminated
            and not truncated
            and "Turn 1 of 2: correct" in obs
            and not info["retry"]
        )
        obs, reward, terminated, truncated, info = env.step({"final": True})
        assert (
            terminated
            and not truncated
            and reward == info["final_reward"] > 0
            and "Episode over" in env.render()
        )
    finally:
        env.close()
    gym_env.register()
    assert gym.registered["KernelArena-v0"] == "core.rl.adapters.gym_env:make_env"


def test_verifiers_adapter_against_a_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    vf, ds = _fake_verifiers()
    monkeypatch.setitem(sys.modules, "verifiers", vf)
    monkeypatch.setitem(sys.modules, "datasets", ds)
    verifiers_env = _fresh("core.rl.adapters.verifiers_env")

    async def rollout() -> tuple[Any, dict[str, Any], float, list[dict[str, str]]]:
        async with Arena(["cpu"], tasks_dir=FIXTURE_TASKS, timing=FAST) as arena:
            env = verifiers_env.load_environment(
                task_ids=["elementwise/axpy"], tasks_dir=FIXTURE_TASKS, max_turns=3, arena=arena
            )
            row = env.dataset[0]
            state: dict[str, Any] = {"info": row["info"]}
            state = await env.setup_state(state)
            assert not await env.is_completed([], state)
            wrong = {
                "role": "assistant",
                "content": "```python\nimport torch\ndef run(x, b):\n    return x\n```",
            }
            reply, state = await env_response(env, [wrong], state)
            right = {"role": "assistant", "content": f"```python\n{AXPY}```\nFINAL"}
            reply2, state = await env_response(env, [wrong, right], state)
            reward = await env.rubric.funcs[0](completion=[wrong, right], state=state)
            return env, state, reward, reply + reply2

    async def env_response(env: Any, messages: list, state: dict) -> tuple[list, dict]:
        return await env.env_response(messages, state)

    env, state, reward, replies = asyncio.run(rollout())
    assert "elementwise/axpy" in env.dataset[0]["question"] and env.max_turns == 4
    assert state["done"] and state["turn_rewards"][0] == -0.25 and state["turn_rewards"][1] > 0
    assert "incorrect" in replies[0]["content"] and "Episode over" in replies[1]["content"]
    assert reward == state["kernel_env"].final_result.reward > 0


def test_gym_adapter_with_the_real_library() -> None:
    gymnasium = pytest.importorskip("gymnasium")
    gym_env = _fresh("core.rl.adapters.gym_env")
    env = gym_env.make_env(
        "elementwise/axpy", device="cpu", max_turns=1, tasks_dir=FIXTURE_TASKS, timing=FAST
    )
    try:
        assert isinstance(env, gymnasium.Env)
        obs, _ = env.reset(seed=1)
        assert env.observation_space.contains(obs)  # the whole prompt, its · and × included
        obs, reward, terminated, _, _ = env.step(AXPY)
        assert terminated and reward > 0 and env.observation_space.contains(obs)
    finally:
        env.close()
