"""The ASGI app (`make_app`) and the server that runs it on uvicorn (`WebServer`).

Why Starlette rather than FastAPI: the RL endpoints keep their own error contract (a 4xx JSON
naming the field and the fix, checked field by field), which FastAPI's validation (422 with
pydantic's shape) would replace; and their JSON schemas already exist (GET /schema), so the
OpenAPI document is built from them (schema.py) rather than from models. Starlette gives the
routing, the streaming response for server-sent events and static files, and adds one small
dependency (anyio); uvicorn (h11) does HTTP/1.1: keep-alive, chunked bodies, slow clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from arena_tui.web import DEFAULT_PORT, TOKEN_ENV, board
from arena_tui.web.errors import INT_RANGE, HttpError, SafeJSONResponse, endpoint, error_payload
from arena_tui.web.feed import StoreFeed
from arena_tui.web.guard import Guard, Limits, is_loopback
from arena_tui.web.recorder import Recorder
from arena_tui.web.rl import RLService
from arena_tui.web.schema import openapi
from core.store.db import Store

log = logging.getLogger("arena.serve")
STATIC = Path(__file__).resolve().parent / "static"


def _board_routes(store: Store, feed: StoreFeed, tasks_dir: Path | None) -> list[BaseRoute]:
    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "leaderboard.html", headers={"Cache-Control": "no-cache"})

    # Every open page fetches the boards when results land: build them once per landing (the
    # feed's version) and answer the rest from that, rather than once per page.
    cache: dict[tuple[int, float, str], dict[str, Any]] = {}
    building: dict[tuple[int, float, str], asyncio.Future[dict[str, Any]]] = {}

    async def boards(request: Request) -> dict[str, Any]:
        from core.store.standings import DEFAULT_P, LeaderboardError

        by = request.query_params.get("by", "model")
        try:
            p = float(request.query_params.get("p", DEFAULT_P))
        except ValueError:
            raise HttpError(
                400,
                f"p is {request.query_params['p']!r}: give a number, e.g. /api/boards?p=1.5",
                "p",
            ) from None
        key = (feed.version, p, by)
        if key not in cache:
            if key not in building:
                building[key] = asyncio.ensure_future(
                    asyncio.to_thread(board.boards_json, store, p, by)
                )
            try:
                data = await asyncio.shield(building[key])
            except LeaderboardError as exc:
                raise HttpError(
                    400,
                    f"{exc}: e.g. /api/boards?p=1.5&by=vendor",
                    "p" if "p must" in str(exc) else "by",
                ) from None
            finally:
                building.pop(key, None)
            cache.clear()
            cache[key] = data
        return {**cache[key], "version": key[0]}

    async def result(request: Request) -> dict[str, Any]:
        job_id = request.path_params["job_id"]
        found = (
            await asyncio.to_thread(board.result_json, store, job_id, tasks_dir)
            if job_id <= INT_RANGE[1]  # SQLite's integers: a larger id names no job
            else None
        )
        if found is None:
            raise HttpError(
                404,
                f"no result for job {job_id}: it has none yet, or the store has no such job",
                "job_id",
            )
        return found

    async def events(request: Request) -> Response:
        return StreamingResponse(
            feed.stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return [
        Route("/", page, methods=["GET"]),
        Route("/leaderboard", page, methods=["GET"]),
        Route("/api/boards", endpoint(boards), methods=["GET"]),
        Route("/api/results/{job_id:int}", endpoint(result), methods=["GET"]),
        Route("/api/events", events, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def make_app(
    *,
    rl: RLService | None,
    store: Store | None,
    feed: StoreFeed | None,
    token: str | None,
    limits: Limits = Limits(),
    tasks_dir: Path | None = None,
) -> Starlette:
    """The app: the RL endpoints (unless `rl` is None: a read-only board), the leaderboard
    (when there is a store), OpenAPI at /openapi.json and /docs."""
    routes: list[BaseRoute] = list(rl.routes()) if rl is not None else []
    if store is not None and feed is not None:
        routes += _board_routes(store, feed, tasks_dir)
    doc = openapi(leaderboard_only=rl is None)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(doc)

    async def docs(request: Request) -> Response:
        return FileResponse(STATIC / "docs.html")

    routes += [
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
    ]
    paths = [r.path for r in routes if isinstance(r, Route) and "{" not in r.path]

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        path = request.url.path
        if exc.status_code == 405:
            allowed = [
                m for m in (exc.headers or {}).get("Allow", "").split(", ") if m and m != "HEAD"
            ]
            message = f"{path} takes {' or '.join(allowed)}, not {request.method}"
        elif exc.status_code == 404:
            message = f"no endpoint {path}: use one of {', '.join(paths)}"
        else:
            message = exc.detail
        return SafeJSONResponse(
            error_payload(exc.status_code, message),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if feed is not None:
            await feed.start()
        try:
            yield
        finally:
            if feed is not None:
                await feed.close()

    app = Starlette(routes=routes, exception_handlers={HTTPException: refused}, lifespan=lifespan)
    app.add_middleware(
        Guard,
        token=token,
        limits=limits,
        open_paths=frozenset({"/health"}),
        stream_paths=frozenset({"/api/events"}),
    )  # type: ignore[arg-type]
    return app


class _Uvicorn(uvicorn.Server):
    def capture_signals(self) -> Iterator[None]:  # type: ignore[override]
        # The command handles SIGINT/SIGTERM itself: it drains evaluations before uvicorn stops.
        return contextlib.nullcontext()  # type: ignore[return-value]


class WebServer:
    """`arena serve`: the RL endpoints over an Arena (None: `--leaderboard-only`), the board
    over a store (None: no board). `start()` binds (port 0: any free one), `aclose()` drains
    and stops; neither the arena nor the store is closed (the caller owns them)."""

    def __init__(
        self,
        arena: Any = None,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        max_turns: int = 4,
        max_episodes: int = 256,
        reward: str = "default",
        *,
        store: Store | None = None,
        tasks_dir: Path | None = None,
        limits: Limits = Limits(),
        grace_s: float = 30.0,
        record: bool = True,
        poll_s: float = 0.25,
    ):
        if arena is not None and not is_loopback(host) and not token:
            raise ValueError(
                f"refusing to serve on {host} without a token: anyone who can reach it could run code on this machine's devices. "
                f"Pass --token or set {TOKEN_ENV}, or bind 127.0.0.1 (or serve --leaderboard-only, which runs nothing)"
            )
        if arena is None and store is None:
            raise ValueError(
                "nothing to serve: give an arena (the RL endpoints) or a store (the leaderboard)"
            )
        self.host, self.port, self.token, self.limits, self.grace_s = (
            host,
            port,
            token,
            limits,
            grace_s,
        )
        spec = {
            "command": "serve",
            "devices": list(arena.devices) if arena is not None else [],
            "reward": reward,
        }
        self.recorder = (
            Recorder(store, spec) if (store is not None and arena is not None and record) else None
        )
        self.rl = (
            RLService(
                arena,
                max_turns=max_turns,
                max_episodes=max_episodes,
                reward=reward,
                recorder=self.recorder,
                max_queue=limits.max_queue,
            )
            if arena is not None
            else None
        )
        self.feed = StoreFeed(store, poll_s) if store is not None else None
        self.app = make_app(
            rl=self.rl, store=store, feed=self.feed, token=token, limits=limits, tasks_dir=tasks_dir
        )
        self._server: _Uvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self.drained: tuple[int, int] = (0, 0)  # (finished, cancelled) at shutdown

    @property
    def episodes(self) -> dict[str, Any]:
        return self.rl.episodes if self.rl is not None else {}

    async def start(self) -> tuple[str, int]:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say they are
        # TCP, and without it every response waits out the client's delayed ACK (~40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(2048)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            http="h11",
            ws="none",
            timeout_keep_alive=30,
            timeout_graceful_shutdown=5,
            limit_concurrency=self.limits.max_requests
            + self.limits.max_streams
            + 64,  # a backstop; the Guard answers first
        )
        self._server = _Uvicorn(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="arena serve")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise RuntimeError("the server stopped while starting")
            await asyncio.sleep(0.01)
        host, port = sock.getsockname()[:2]
        self.port = port
        return host, port

    async def serve_forever(self) -> None:
        assert self._task is not None, "call start() first"
        await self._task

    async def aclose(self, grace_s: float | None = None) -> None:
        """Refuse new evaluations, let those in flight finish for `grace_s` (default: the
        server's), cancel the rest (recorded as cancelled), end the event streams, stop."""
        if self.rl is not None:
            self.drained = await self.rl.drain(self.grace_s if grace_s is None else grace_s)
        if self.recorder is not None:
            await self.recorder.close()
        if self.feed is not None:
            await self.feed.close()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.rl is not None:
            self.rl.episodes.clear()
