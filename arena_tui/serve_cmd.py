"""`arena serve`: the RL environment over HTTP (JSON), shaped like OpenEnv's HTTP environments.

    POST /reset    {task_id, seed?, max_turns?, device?}      -> {episode_id, observation, reward: null, done: false}
    POST /step     {episode_id, action: {code, final?}}      -> {episode_id, observation, reward, done, info}
    POST /evaluate {task_id, code, seed?, visible_only?}     -> {reward, outcome, retry, visible_only, result}
    GET  /state?episode_id=ID (or POST /state {episode_id}) -> the episode's bookkeeping
    POST /close    {episode_id}                              -> {closed: true}
    GET  /tasks, GET /schema, GET /health

Episodes are independent KernelEnv instances sharing one Arena, so every evaluation goes
through one scheduler and concurrency is bounded by the devices' slots. Nothing a response
carries names a hidden workload (core/rl.py, `public_result`).

Standard library only: asyncio streams and a small HTTP/1.1 handler (keep-alive, Content-Length
bodies). Bound to 127.0.0.1 by default; any other address needs a token (`--token` or
ARENA_SERVE_TOKEN), sent as `Authorization: Bearer <token>` on every request but /health.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import itertools
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rich.console import Console
from rich.markup import escape

from core import __version__
from core.result import EXIT_BAD_INPUT, EXIT_PASSED

log = logging.getLogger("arena.serve")

DEFAULT_PORT = 8765
MAX_BODY = 2 << 20  # a candidate is at most 1 MiB (core/rl.py); JSON escaping may double it
MAX_HEADERS = 100
IDLE_TIMEOUT_S = 300.0  # a keep-alive connection with no request for this long is closed
TOKEN_ENV = "ARENA_SERVE_TOKEN"
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 409: "Conflict",
           411: "Length Required", 413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the RL environment over HTTP: reset/step episodes, evaluate candidates (docs/rl.md)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free port)")
    p.add_argument("--device", action="append", dest="devices", metavar="ID", help="a device to evaluate on, repeatable: cpu, cuda:N, xpu:N, <host>/<device> (default cpu)")
    p.add_argument("--hosts", type=Path, help="the hosts file for <host>/<device> devices")
    p.add_argument("--token", help=f"the bearer token clients must send (default ${TOKEN_ENV}); required off loopback")
    p.add_argument("--reward", default="default", help="the reward function's name (default, sol, fast_p, fast_<p>; docs/rl.md)")
    p.add_argument("--max-turns", type=int, default=4, help="turns per episode unless /reset says otherwise (default 4)")
    p.add_argument("--max-episodes", type=int, default=256, help="open episodes at most; finished ones are dropped first (default 256)")
    p.add_argument("--cpu-slots", type=int, help="evaluations at once per CPU device (default: half the cores)")
    p.set_defaults(func=_serve)


# --- HTTP --------------------------------------------------------------------------------------


class HttpError(Exception):
    """A request the server refuses: the status, the field at fault (if any) and what to do."""

    def __init__(self, status: int, message: str, field_name: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field_name

    def payload(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "field": self.field, "message": self.message}}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    keep_alive: bool = True

    def json(self) -> dict[str, Any]:
        if not self.body.strip():
            return {}
        try:
            data = json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HttpError(400, f"the body is not valid JSON ({exc}): send one JSON object with Content-Type: application/json") from None
        if not isinstance(data, dict):
            raise HttpError(400, f"the body is a JSON {type(data).__name__}: send one JSON object, e.g. {{\"task_id\": \"elementwise/axpy\"}}")
        return data


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """One request from the stream; None at a clean end of the connection."""
    try:
        line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT_S)
    except (asyncio.TimeoutError, ConnectionError):
        return None
    except ValueError:  # a line over the stream's limit
        raise HttpError(400, "the request line is too long") from None
    if not line.strip():
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, f"malformed request line {line[:100]!r}: send `METHOD /path HTTP/1.1`")
    method, target, version = parts
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise HttpError(400, f"malformed header line {raw[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    else:
        raise HttpError(400, f"more than {MAX_HEADERS} headers")
    if "transfer-encoding" in headers:
        raise HttpError(411, "chunked bodies are not accepted: send the body with a Content-Length header")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400, f"Content-Length is {headers['content-length']!r}: give the body's size in bytes") from None
    if length < 0 or length > MAX_BODY:
        raise HttpError(413, f"the body is {length} bytes, more than the {MAX_BODY} allowed: a candidate is at most 1 MiB")
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return Request(method.upper(), url.path.rstrip("/") or "/", query, headers, body, keep_alive)


def response_bytes(status: int, payload: dict[str, Any], keep_alive: bool) -> bytes:
    body = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\nServer: kernel-arena/{__version__}\r\n\r\n"
    )
    return head.encode() + body


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


# --- request fields ------------------------------------------------------------------------------


def _take(body: dict[str, Any], name: str, kind: type | tuple[type, ...], example: str, required: bool = False, where: str = "") -> Any:
    """A field of the body, checked: a missing required one or a wrong type is a 400 that
    names the field and shows a correct value."""
    path = f"{where}{name}"
    if name not in body or body[name] is None:
        if required:
            raise HttpError(400, f"`{path}` is missing: add it, e.g. {example}", path)
        return None
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        raise HttpError(400, f"`{path}` is {json.dumps(value)[:60]}: it must be {example}", path)
    return value


def _no_unknown(body: dict[str, Any], allowed: tuple[str, ...], where: str = "") -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        hint = " (the candidate's source goes in `action.code`)" if unknown[0] in ("source", "solution", "content") else ""
        raise HttpError(400, f"`{where}{unknown[0]}` is not a field here{hint}: use {', '.join(allowed)}", f"{where}{unknown[0]}")


def _seed(body: dict[str, Any]) -> int | None:
    seed = _take(body, "seed", int, "a non-negative integer such as 0")
    if seed is not None and seed < 0:
        raise HttpError(400, f"`seed` is {seed}: give a non-negative integer", "seed")
    return seed


# --- the server ----------------------------------------------------------------------------------


@dataclass
class _Episode:
    env: Any  # core.env.KernelEnv
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


class RLServer:
    """The HTTP front of an Arena. `start()` binds; `aclose()` stops serving and closes the
    episodes (not the arena, which the caller owns)."""

    def __init__(
        self, arena: Any, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None, max_turns: int = 4,
        max_episodes: int = 256, reward: str = "default",
    ):
        if not is_loopback(host) and not token:
            raise ValueError(
                f"refusing to serve on {host} without a token: anyone who can reach it could run code on this machine's devices. "
                f"Pass --token or set {TOKEN_ENV}, or bind 127.0.0.1"
            )
        if max_episodes < 1 or max_turns < 1:
            raise ValueError("--max-episodes and --max-turns must be at least 1")
        self.arena, self.host, self.port, self.token = arena, host, port, token
        self.max_turns, self.max_episodes, self.reward = max_turns, max_episodes, reward
        self.episodes: dict[str, _Episode] = {}
        self._device_cycle = itertools.cycle(arena.devices)
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self.started = time.time()

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._connection, self.host, self.port, limit=1 << 16)
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]
        return sock[0], sock[1]

    async def serve_forever(self) -> None:
        assert self._server is not None, "call start() first"
        async with self._server:
            await self._server.serve_forever()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await self._server.wait_closed()
        self.episodes.clear()

    # --- connections ---

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    request = await read_request(reader)
                except HttpError as exc:
                    writer.write(response_bytes(exc.status, exc.payload(), False))
                    await writer.drain()
                    return
                except asyncio.IncompleteReadError:
                    return
                if request is None:
                    return
                status, payload = await self.handle(request)
                writer.write(response_bytes(status, payload, request.keep_alive))
                await writer.drain()
                if not request.keep_alive:
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def handle(self, request: Request) -> tuple[int, dict[str, Any]]:
        """Route one request; every refusal is a JSON error naming the field and the fix."""
        routes = {
            "/health": ("GET", self._health), "/tasks": ("GET", self._tasks), "/schema": ("GET", self._schema),
            "/reset": ("POST", self._reset), "/step": ("POST", self._step), "/evaluate": ("POST", self._evaluate),
            "/state": (("GET", "POST"), self._state), "/close": ("POST", self._close),
        }
        try:
            if request.path not in routes:
                raise HttpError(404, f"no endpoint {request.path}: use one of {', '.join(routes)}")
            methods, handler = routes[request.path]
            if request.method not in (methods if isinstance(methods, tuple) else (methods,)):
                raise HttpError(405, f"{request.path} takes {' or '.join(methods) if isinstance(methods, tuple) else methods}, not {request.method}")
            if request.path != "/health":
                self._authorize(request)
            return 200, await handler(request)
        except HttpError as exc:
            return exc.status, exc.payload()
        except Exception as exc:  # noqa: BLE001 - a bug must answer, not drop the connection
            log.exception("arena serve: %s %s failed", request.method, request.path)
            return 500, {"error": {"status": 500, "field": None, "message": f"internal error ({type(exc).__name__}: {exc}); see the server's log"}}

    def _authorize(self, request: Request) -> None:
        if not self.token:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
            raise HttpError(401, "missing or wrong token: send the header `Authorization: Bearer <token>` (the server's --token)", "Authorization")

    # --- endpoints ---

    async def _health(self, request: Request) -> dict[str, Any]:
        return {"status": "healthy", "version": __version__, "devices": self.arena.devices, "slots": len(self.arena.slots),
                "episodes": len(self.episodes), "uptime_s": round(time.time() - self.started, 1)}

    async def _tasks(self, request: Request) -> dict[str, Any]:
        from core.env import signature
        from core.tasks import discover

        return {"tasks": [{
            "id": t.id, "description": t.description, "signature": signature(t), "languages": list(t.languages), "baseline": t.baseline,
            "visible_workloads": {"gpu": [w.to_json() for w in t.gpu.visible], "cpu": [w.to_json() for w in t.cpu.visible]},
        } for t in discover(self.arena.tasks_dir)]}

    async def _schema(self, request: Request) -> dict[str, Any]:
        return SCHEMA

    def _episode(self, body: dict[str, Any]) -> tuple[str, _Episode]:
        episode_id = _take(body, "episode_id", str, "the episode_id that /reset returned", required=True)
        episode = self.episodes.get(episode_id)
        if episode is None:
            raise HttpError(404, f"no episode `{episode_id}`: it was closed, evicted or never existed; start one with POST /reset", "episode_id")
        episode.last_used = time.monotonic()
        return episode_id, episode

    def _make_room(self) -> None:
        """Drop the least recently used finished episodes when full; refuse when every one is live."""
        if len(self.episodes) < self.max_episodes:
            return
        finished = sorted((e.last_used, eid) for eid, e in self.episodes.items() if e.env.episode is None or e.env.episode.done)
        if not finished:
            raise HttpError(429, f"{len(self.episodes)} episodes are open, the most allowed (--max-episodes): finish or POST /close some")
        del self.episodes[finished[0][1]]

    async def _reset(self, request: Request) -> dict[str, Any]:
        from core.env import EpisodeError, KernelEnv
        from core.tasks import UnknownTaskError

        body = request.json()
        _no_unknown(body, ("task_id", "seed", "max_turns", "device", "episode_id"))
        task_id = _take(body, "task_id", str, '"elementwise/axpy" (see GET /tasks)', required=True)
        seed = _seed(body)
        max_turns = _take(body, "max_turns", int, "a positive integer such as 4")
        max_turns = self.max_turns if max_turns is None else max_turns
        if max_turns < 1:
            raise HttpError(400, f"`max_turns` is {max_turns}: give 1 or more", "max_turns")
        device = _take(body, "device", str, f"one of {', '.join(self.arena.devices)}")
        if device is not None and device not in self.arena.devices:
            raise HttpError(400, f"`device` {device} is not served here: use one of {', '.join(self.arena.devices)}, or leave it out", "device")
        episode_id = _take(body, "episode_id", str, "a new, unused id (or leave it out)")
        if episode_id is not None and (episode_id in self.episodes or not 0 < len(episode_id) <= 255):
            raise HttpError(409, f"`episode_id` {episode_id[:60]} is in use or not 1-255 characters: leave it out to get a fresh one", "episode_id")
        self._make_room()
        env = KernelEnv(task_id, device=device or next(self._device_cycle), max_turns=max_turns, reward=self.reward, arena=self.arena)
        try:
            observation = await env.areset(seed=seed)
        except (UnknownTaskError, EpisodeError) as exc:
            raise HttpError(400, str(exc), "task_id") from None
        episode_id = episode_id or secrets.token_urlsafe(12)
        self.episodes[episode_id] = _Episode(env)
        return {"episode_id": episode_id, "observation": observation.to_json(), "reward": None, "done": False, "info": {"task_id": task_id, "device": env.device}}

    async def _step(self, request: Request) -> dict[str, Any]:
        from core.env import EpisodeError

        body = request.json()
        _no_unknown(body, ("episode_id", "action", "timeout_s", "request_id"))
        episode_id, episode = self._episode(body)
        action = _take(body, "action", dict, '{"code": "<the module\'s source>"} or {"final": true}', required=True)
        _no_unknown(action, ("code", "final"), "action.")
        final = _take(action, "final", bool, "true or false", where="action.") or False
        code = _take(action, "code", str, "the candidate module's Python source", required=not final, where="action.")
        if episode.lock.locked():
            raise HttpError(409, f"episode {episode_id} is already evaluating a step: wait for its response", "episode_id")
        async with episode.lock:
            try:
                observation, reward, done, info = await episode.env.astep(code, final=final)
            except EpisodeError as exc:
                raise HttpError(409, str(exc), "action") from None
            except (TypeError, ValueError) as exc:
                raise HttpError(400, str(exc), "action.code") from None
        return {"episode_id": episode_id, "observation": observation.to_json(), "reward": reward, "done": done, "info": info}

    async def _evaluate(self, request: Request) -> dict[str, Any]:
        from core.tasks import UnknownTaskError

        body = request.json()
        _no_unknown(body, ("task_id", "code", "seed", "visible_only", "device"))
        task_id = _take(body, "task_id", str, '"elementwise/axpy" (see GET /tasks)', required=True)
        code = _take(body, "code", str, "the candidate module's Python source", required=True)
        visible_only = _take(body, "visible_only", bool, "true or false") or False
        device = _take(body, "device", str, f"one of {', '.join(self.arena.devices)}")
        if device is not None and device not in self.arena.devices:
            raise HttpError(400, f"`device` {device} is not served here: use one of {', '.join(self.arena.devices)}", "device")
        try:
            rr = await self.arena.aevaluate(task_id, code, seed=_seed(body), device=device, visible_only=visible_only)
        except UnknownTaskError as exc:
            raise HttpError(400, str(exc), "task_id") from None
        except (TypeError, ValueError) as exc:
            raise HttpError(400, str(exc), "code") from None
        return rr.to_json(public=True)

    async def _state(self, request: Request) -> dict[str, Any]:
        body = dict(request.query) if request.method == "GET" else request.json()
        _no_unknown(body, ("episode_id",))
        episode_id, episode = self._episode(body)
        return {"episode_id": episode_id, **episode.env.state(), "busy": episode.lock.locked()}

    async def _close(self, request: Request) -> dict[str, Any]:
        body = request.json()
        _no_unknown(body, ("episode_id",))
        episode_id, _ = self._episode(body)
        del self.episodes[episode_id]
        return {"episode_id": episode_id, "closed": True}


_OBSERVATION = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"}, "prompt": {"type": "string"}, "starter": {"type": "string"}, "signature": {"type": "string"},
        "visible_workloads": {"type": "array", "items": {"type": "object"}}, "device": {"type": "string"},
        "turn": {"type": "integer"}, "max_turns": {"type": "integer"}, "feedback": {"type": "string"},
        "last": {"type": ["object", "null"], "description": "the latest turn: outcome, reward, stages, compile_error, mismatch, timings"},
        "best_turn": {"type": ["integer", "null"]}, "best_reward": {"type": ["number", "null"]}, "done": {"type": "boolean"},
        "final": {"type": ["object", "null"], "description": "set once the episode is over: the best candidate on every workload"},
    },
}
SCHEMA: dict[str, Any] = {
    "action": {
        "type": "object", "additionalProperties": False,
        "properties": {"code": {"type": "string", "description": "the candidate: one Python module defining run(*inputs)"},
                       "final": {"type": "boolean", "description": "end the episode after this action (code optional)"}},
    },
    "observation": _OBSERVATION,
    "state": {
        "type": "object",
        "properties": {"episode_id": {"type": "string"}, "task_id": {"type": "string"}, "step_count": {"type": "integer"},
                       "max_turns": {"type": "integer"}, "done": {"type": "boolean"}, "turn_rewards": {"type": "array"},
                       "best_turn": {"type": ["integer", "null"]}, "final_reward": {"type": ["number", "null"]}, "busy": {"type": "boolean"}},
    },
    "reset": {"type": "object", "required": ["task_id"], "additionalProperties": False,
              "properties": {"task_id": {"type": "string"}, "seed": {"type": "integer", "minimum": 0}, "max_turns": {"type": "integer", "minimum": 1},
                             "device": {"type": "string"}, "episode_id": {"type": "string"}}},
    "evaluate": {"type": "object", "required": ["task_id", "code"], "additionalProperties": False,
                 "properties": {"task_id": {"type": "string"}, "code": {"type": "string"}, "seed": {"type": "integer", "minimum": 0},
                                "visible_only": {"type": "boolean"}, "device": {"type": "string"}}},
    "reward": "null means an infrastructure fault: not the candidate's fault; retry the request",
}


# --- the command ---------------------------------------------------------------------------------


def _serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.rewards import UnknownReward, get_reward
    from core.rl import Arena

    from .run_cmd import executor_factory

    token = args.token or os.environ.get(TOKEN_ENV) or None
    devices = args.devices or ["cpu"]
    try:
        get_reward(args.reward)
        arena = Arena(devices, args.reward, args.tasks_dir, executor_factory(args.hosts), cpu_slots=args.cpu_slots)
        server = RLServer(arena, args.host, args.port, token, args.max_turns, args.max_episodes, args.reward)
    except (UnknownReward, ValueError) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT

    async def main() -> None:
        try:
            host, port = await server.start()
            auth = "token required" if token else "no token (loopback only)"
            out.print(f"arena serve: http://{host}:{port} — devices {', '.join(devices)} ({len(arena.slots)} slots), reward {args.reward}, {auth}", highlight=False)
            await server.serve_forever()
        finally:
            await server.aclose()
            await arena.aclose()

    try:
        asyncio.run(main())
    except OSError as exc:
        err.print(f"[red]error:[/] cannot serve on {args.host}:{args.port}: {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        out.print("stopped")
    return EXIT_PASSED
