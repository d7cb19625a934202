"""Gymnasium adapter: KernelEnv as a `gymnasium.Env` with text observations and text actions.

    from core.rl.adapters.gym_env import make_env
    env = make_env("elementwise/rope", device="cpu", max_turns=4)
    obs, info = env.reset(seed=0)                 # obs: the prompt and the starter, as text
    obs, reward, terminated, truncated, info = env.step(source)

An action is the candidate's source (a fenced ```python block in a model's reply is taken
out), or a mapping `{"code": ..., "final": bool}`. `terminated` is True once the episode is over
(the turn limit or `final`: the final evaluation is part of the episode, so it never
truncates). Gymnasium wants a float reward: an infrastructure fault (core reward None) is
given as 0.0 with `info["retry"]` True; that step used no turn, so send it again.

Every observation lies in `observation_space` (a `Text` space): its charset is the printable
ASCII characters and the symbols the arena's prompts and feedback use (·, ×, —, ≤, µ, ...);
any other character (from a candidate's own error message, say) is written as a `\\u` escape.
The episode runs in the `train` profile unless `make_env(..., profile="full")` says otherwise.
"""

from __future__ import annotations

import string
from typing import Any, ClassVar

from core.rl.env import KernelEnv, extract_code

MAX_TEXT = 1 << 20  # the longest candidate core/rl/arena.py accepts
# The symbols task statements and feedback are written with (task.yaml formulas, times, ranges).
SYMBOLS = "·×—–−±µ≤≥≈→←Σσθ²³ᵀ⌊⌋⊙…°√∞"
CHARSET = string.printable + SYMBOLS


def in_charset(text: str) -> str:
    """`text` with every character outside CHARSET written as a backslash escape, so that the
    observation is always in the observation space."""
    if all(c in _CHARS for c in text):
        return text
    return "".join(
        c if c in _CHARS else c.encode("ascii", "backslashreplace").decode() for c in text
    )


_CHARS = frozenset(CHARSET)
_CLASS: type | None = None


def _gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise ImportError(
            "the Gymnasium adapter needs gymnasium: pip install -e '.[gym]' in the kernel-arena checkout (README, Install)"
        ) from None
    return gymnasium


def _env_class() -> type:
    """The gymnasium.Env subclass, made on first use so that importing this module never
    imports gymnasium."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    gym = _gymnasium()

    class KernelGymEnv(gym.Env):
        metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

        def __init__(
            self, task_id: str | None = None, render_mode: str | None = None, **kwargs: Any
        ):
            self.kernel_env = KernelEnv(task_id, **kwargs)
            self.observation_space = gym.spaces.Text(max_length=MAX_TEXT, charset=CHARSET)
            self.action_space = gym.spaces.Text(
                max_length=MAX_TEXT, charset=CHARSET
            )  # source text; contains() is not used to police actions
            self.render_mode = render_mode
            self._last = ""

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[str, dict[str, Any]]:
            super().reset(seed=seed)
            obs = self.kernel_env.reset((options or {}).get("task_id"), seed=seed)
            self._last = in_charset(obs.text())
            return self._last, {"observation": obs.to_json()}

        def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
            if isinstance(action, dict):
                code, final = action.get("code"), bool(action.get("final", False))
            else:
                code, final = extract_code(str(action)), False
            obs, reward, done, info = self.kernel_env.step(code, final=final)
            self._last = in_charset(obs.text())
            info = {**info, "observation": obs.to_json(), "retry": reward is None}
            return self._last, 0.0 if reward is None else float(reward), done, False, info

        def render(self) -> str:
            return self._last

        def close(self) -> None:
            self.kernel_env.close()

    _CLASS = KernelGymEnv
    return _CLASS


def make_env(task_id: str | None = None, **kwargs: Any) -> Any:
    """A gymnasium.Env over KernelEnv; keyword arguments go to KernelEnv (device, max_turns,
    reward, tasks_dir, timing, ...)."""
    return _env_class()(task_id, **kwargs)


def register(env_id: str = "KernelArena-v0") -> None:
    """Register with gymnasium, so that `gymnasium.make("KernelArena-v0", task_id=...)` works."""
    _gymnasium().register(id=env_id, entry_point="core.rl.adapters.gym_env:make_env")
