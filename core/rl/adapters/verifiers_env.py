"""`verifiers` adapter: kernel tasks as a multi-turn verifiers environment.

    from core.rl.adapters.verifiers_env import load_environment
    vf_env = load_environment(task_ids=["elementwise/rope"], device="cuda:0", max_turns=4)

Each dataset row is one task (its prompt and starter). A rollout keeps a KernelEnv in its
state; every assistant message is a turn: its last fenced ```python block is the candidate,
and a line `FINAL` in the message ends the episode after it. The environment's reply is the
turn's feedback (compile errors, the worst mismatch, per-workload times). The rubric's reward
is the episode's final reward (the best candidate on every workload, hidden ones included);
an episode cut short by the trainer's own turn limit is finished there, so it still gets one.
An infrastructure fault gives 0.0 with `state["retry"]` set.

A message without a ```python block is no code (the lowest honest rung of the reward ladder,
core/rl/rewards.py). Episodes run in `profile` (`train` by default).

Written against verifiers 0.1's async `MultiTurnEnv` (env_response/is_completed coroutines,
reward functions that take `state`); the library is imported on first use. verifiers 0.2 and
0.3 changed the rollout's state handling, and 0.4 replaced the API with `verifiers.v1`
(tasksets and agent harnesses run in sandboxed runtimes; there is no `MultiTurnEnv`): a newer
version is refused with that reason, and the `[verifiers]` extra pins `<0.2`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.rl.adapters.completions import extract_candidate
from core.rl.arena import Arena
from core.rl.env import KernelEnv, signature, task_prompt
from core.tasks.discovery import discover, find_task

FINAL = re.compile(r"^\s*FINAL\s*$", re.MULTILINE)
SUPPORTED = (0, 1)  # verifiers 0.1.x: the MultiTurnEnv API this adapter is written against


def _check_version(vf: Any) -> None:
    version = str(getattr(vf, "__version__", "0"))
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2]) or (0,)
    if parts[:2] > SUPPORTED or not hasattr(vf, "MultiTurnEnv"):
        raise ImportError(
            f"the verifiers adapter is written against verifiers 0.1 (MultiTurnEnv); {version} is installed. "
            "0.2-0.3 changed the rollout's state and 0.4 replaced the API with verifiers.v1 (no MultiTurnEnv): "
            "pip install -e '.[verifiers]' in the kernel-arena checkout installs a 0.1 release"
        )


def _libraries() -> tuple[Any, Any]:
    try:
        import verifiers
    except ImportError:
        raise ImportError(
            "the verifiers adapter needs verifiers: pip install -e '.[verifiers]' in the kernel-arena checkout (README, Install)"
        ) from None
    try:
        import datasets
    except ImportError:
        raise ImportError(
            "the verifiers adapter needs datasets (a dependency of verifiers): pip install datasets"
        ) from None
    _check_version(verifiers)
    return verifiers, datasets


def _text(message: Any) -> str:
    if isinstance(message, dict):
        content = message.get("content") or ""
        return (
            content
            if isinstance(content, str)
            else " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        )
    return str(message)


def load_environment(
    task_ids: Sequence[str] | None = None,
    device: str = "cpu",
    max_turns: int = 4,
    reward: str | None = None,
    tasks_dir: str | None = None,
    arena: Arena | None = None,
    profile: str = "train",
    **kwargs: Any,
) -> Any:
    """The verifiers environment over `task_ids` (default: every task). Evaluations go
    through one Arena (the given one, or one made on the first rollout, in its event loop)."""
    vf, datasets = _libraries()

    tasks = [find_task(t, tasks_dir) for t in task_ids] if task_ids else discover(tasks_dir)
    rows = []
    for task in tasks:
        starter = task.file("starter.py").read_text()
        rows.append(
            {
                "question": f"{task_prompt(task, device, max_turns)}\n\nStarter:\n```python\n{starter}```\n\nReply with the complete module in one ```python block; "
                "write FINAL on its own line when you are done.",
                "answer": "",
                "task": "kernel-arena",
                "info": {"task_id": task.id, "signature": signature(task)},
            }
        )
    dataset = datasets.Dataset.from_list(rows)
    shared: dict[str, Arena | None] = {"arena": arena}

    def _arena() -> Arena:
        if shared["arena"] is None:
            shared["arena"] = Arena([device], reward, tasks_dir)
        return shared["arena"]  # type: ignore[return-value]

    async def kernel_reward(
        completion: Any = None, state: dict[str, Any] | None = None, **_: Any
    ) -> float:
        """The episode's final reward; the episode is finished here if the rollout stopped early."""
        state = state if state is not None else {}
        env: KernelEnv | None = state.get("kernel_env")
        if env is None or env.episode is None or env.episode.best is None:
            return 0.0
        if not env.episode.done:
            _, final_reward, _, _ = await env.astep(None, final=True)
            state["retry"] = final_reward is None
        final = env.final_result
        return float(final.reward) if final is not None and final.reward is not None else 0.0

    class KernelArenaEnv(vf.MultiTurnEnv):
        async def setup_state(self, state: dict[str, Any], **kw: Any) -> dict[str, Any]:
            info = state.get("info") or {}
            env = KernelEnv(
                info["task_id"],
                device=device,
                max_turns=max_turns,
                reward=reward,
                tasks_dir=tasks_dir,
                arena=_arena(),
                profile=profile,
            )
            await env.areset()
            state["kernel_env"], state["done"] = env, False
            return state

        async def is_completed(self, messages: Any, state: dict[str, Any], **kw: Any) -> bool:
            return bool(state.get("done"))

        async def env_response(
            self, messages: Any, state: dict[str, Any], **kw: Any
        ) -> tuple[list[dict[str, str]], dict[str, Any]]:
            if "kernel_env" not in state:
                state = await self.setup_state(state)
            env: KernelEnv = state["kernel_env"]
            reply = _text(messages[-1]) if messages else ""
            obs, reward, done, info = await env.astep(
                extract_candidate(reply) or "", final=bool(FINAL.search(reply))
            )
            state["done"], state["retry"] = done, reward is None
            state.setdefault("turn_rewards", []).append(info.get("turn_reward"))
            return [{"role": "user", "content": obs.feedback}], state

    rubric = vf.Rubric(funcs=[kernel_reward], weights=[1.0])
    return KernelArenaEnv(dataset=dataset, rubric=rubric, max_turns=max_turns + 1, **kwargs)
