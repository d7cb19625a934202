"""A Python client for `arena serve`: `reset`, `step`, `evaluate`, from a trainer on any machine.

    from core.rl.adapters.serve_client import ArenaClient
    client = ArenaClient("http://gpu-box:8765", token=os.environ["ARENA_SERVE_TOKEN"])
    episode = client.reset("elementwise/rope", seed=0)
    step = client.step(episode.episode_id, code)            # StepResult: observation, reward, done, info
    rr = client.evaluate("elementwise/rope", code)          # EvaluateResult: reward, outcome, retry, result

Standard library only (urllib), so a trainer's environment needs nothing more than this
package. Every call has a timeout; connection failures, 429 (too many episodes) and 5xx
answers are retried with exponential back-off; a 4xx answer raises `ArenaRequestError` with
the server's message, which names the field and the fix. The shapes follow docs/rl.md
("The server"), OpenEnv's reset/step/state.

Evaluations ask for the client's `profile`: `train` by default (the cheap profile a trainer
wants: docs/evaluation.md, "Profiles"), `full` for leaderboard-grade timing; each call may
override it. Every result says which profile it ran (`EvaluateResult.profile`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.evaluation.profiles import parse_profile

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class ArenaClientError(RuntimeError):
    """The server could not be reached or kept failing after the retries."""


class ArenaRequestError(ArenaClientError):
    """The server refused the request (4xx): `status`, `field` and the server's `message`."""

    def __init__(self, status: int, message: str, field_name: str | None = None):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.field = status, message, field_name


@dataclass(frozen=True)
class ResetResult:
    episode_id: str
    observation: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    episode_id: str
    observation: dict[str, Any]
    reward: float | None
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluateResult:
    reward: float | None
    outcome: str
    retry: bool
    result: dict[str, Any]
    reward_name: str | None = None
    profile: str | None = None
    gap_closed: float | None = None


class ArenaClient:
    """One server. `timeout_s` bounds each HTTP call (an evaluation included: give it the
    longest evaluation you expect); `retries` more attempts after a retryable failure."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8765",
        token: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        profile: str = "train",
    ):
        self.profile = parse_profile(profile).value
        self.url, self.token, self.timeout_s, self.retries, self.backoff_s = (
            url.rstrip("/"),
            token,
            timeout_s,
            retries,
            backoff_s,
        )

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def tasks(self) -> list[dict[str, Any]]:
        answer = self._call("GET", "/tasks")
        return answer.get("tasks", answer) if isinstance(answer, dict) else answer

    def reset(
        self,
        task_id: str,
        seed: int | None = None,
        max_turns: int | None = None,
        device: str | None = None,
        profile: str | None = None,
    ) -> ResetResult:
        """A new episode; its evaluations run in `profile` (default: the client's)."""
        body = _without_none(
            {
                "task_id": task_id,
                "seed": seed,
                "max_turns": max_turns,
                "device": device,
                "profile": profile or self.profile,
            }
        )
        a = self._call("POST", "/reset", body)
        return ResetResult(a["episode_id"], a.get("observation") or {}, a.get("info") or {})

    def step(self, episode_id: str, code: str | None = None, final: bool = False) -> StepResult:
        action: dict[str, Any] = (
            {"final": True}
            if code is None
            else {"code": code, **({"final": True} if final else {})}
        )
        a = self._call("POST", "/step", {"episode_id": episode_id, "action": action})
        return StepResult(
            a.get("episode_id", episode_id),
            a.get("observation") or {},
            a.get("reward"),
            bool(a.get("done")),
            a.get("info") or {},
        )

    def state(self, episode_id: str) -> dict[str, Any]:
        return self._call("POST", "/state", {"episode_id": episode_id})

    def close_episode(self, episode_id: str) -> None:
        self._call("POST", "/close", {"episode_id": episode_id})

    def evaluate(
        self,
        task_id: str,
        code: str,
        seed: int | None = None,
        visible_only: bool = False,
        device: str | None = None,
        profile: str | None = None,
        group: str | None = None,
        group_size: int | None = None,
    ) -> EvaluateResult:
        """One candidate scored in `profile` (default: the client's). `group` and `group_size`:
        the server holds this candidate until the group's other members arrive (from any
        client) and evaluates them as one batch (core/rl/groups.py)."""
        body = _without_none(
            {
                "task_id": task_id,
                "code": code,
                "seed": seed,
                "visible_only": visible_only or None,
                "device": device,
                "profile": profile or self.profile,
                "group": group,
                "group_size": group_size,
            }
        )
        return _evaluated(self._call("POST", "/evaluate", body))

    def evaluate_many(
        self, requests: Sequence[tuple[str, str] | dict[str, Any]], agent: str | None = None
    ) -> list[EvaluateResult]:
        """A batch in one request (`POST /evaluate {candidates: [...]}`): the server scores it
        through its batch path and answers in order. Each request is (task_id, code) or a
        mapping with the /evaluate fields (seed, visible_only, device, profile: the client's
        where left out)."""
        candidates = [
            {
                "profile": self.profile,
                **(r if isinstance(r, dict) else {"task_id": r[0], "code": r[1]}),
            }
            for r in requests
        ]
        answer = self._call(
            "POST", "/evaluate", _without_none({"candidates": candidates, "agent": agent})
        )
        return [_evaluated(a) for a in answer["results"]]

    # --- transport -------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(
                self.url + path, data=data, headers=headers, method=method
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as exc:
                payload = _error_body(exc)
                if exc.code in RETRY_STATUSES or exc.code >= 500:
                    last = f"HTTP {exc.code}: {payload.get('message', exc.reason)}"
                    continue
                raise ArenaRequestError(
                    exc.code, str(payload.get("message", exc.reason)), payload.get("field")
                ) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
        raise ArenaClientError(
            f"{method} {self.url}{path} failed after {self.retries + 1} attempt(s): {last}"
        )


def _error_body(exc: urllib.error.HTTPError) -> dict[str, Any]:
    try:
        data = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return {}
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return error
    if isinstance(data, dict) and "detail" in data:  # an ASGI framework's own error body
        return {"message": str(data["detail"])}
    return {}


def _evaluated(a: dict[str, Any]) -> EvaluateResult:
    return EvaluateResult(
        a.get("reward"),
        str(a.get("outcome")),
        bool(a.get("retry")),
        a.get("result") or {},
        a.get("reward_name"),
        a.get("profile") or (a.get("result") or {}).get("profile"),
        a.get("gap_closed"),
    )


def _without_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
