"""`arena serve`: the RL environment over HTTP (JSON), shaped like OpenEnv's HTTP environments,
and the live leaderboard page; `--leaderboard-only` serves the board alone (read-only).

    POST /reset    {task_id, seed?, max_turns?, device?, agent?}      -> {episode_id, observation, reward: null, done: false}
    POST /step     {episode_id, action: {code, final?}}              -> {episode_id, observation, reward, done, info}
    POST /evaluate {task_id, code, seed?, visible_only?} or {candidates: [...]}  -> one public result, or {results: [...]}
    GET  /state?episode_id=ID (or POST /state {episode_id})         -> the episode's bookkeeping
    POST /close    {episode_id}                                      -> {closed: true}
    GET  /tasks, GET /schema, GET /health, GET /openapi.json, GET /docs
    GET  / (the leaderboard), /api/boards, /api/results/{job_id}, /api/events (server-sent events)

The web code is in arena_tui/web/ (Starlette on uvicorn; docs/web.md). Bound to 127.0.0.1 by
default; any other address needs a token (`--token` or ARENA_SERVE_TOKEN), sent as
`Authorization: Bearer <token>` on every request but /health. Ctrl-C, SIGTERM or SIGHUP drains:
new evaluations are refused, those in flight get `--grace` seconds, the rest are cancelled
and recorded so; a second Ctrl-C cancels at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from arena_tui.signals import exit_code, install, signal_name
from arena_tui.stopping import retire_stale_serve_runs, say, sweep_leftovers
from arena_tui.web import DEFAULT_PORT, MIB, TOKEN_ENV
from core.model.result import EXIT_BAD_INPUT, EXIT_PASSED

# RLServer, WebServer and is_loopback come from __getattr__ below (the web stack loads lazily).
__all__ = ["RLServer", "WebServer", "is_loopback", "register"]  # noqa: F822 - lazy, from __getattr__


def __getattr__(name: str) -> Any:
    """The server's classes, imported on first use: `arena` starts without loading the web stack."""
    if name in ("RLServer", "WebServer"):  # RLServer: the name tests and scripts have used
        from arena_tui.web.app import WebServer

        return WebServer
    if name == "is_loopback":
        from arena_tui.web.guard import is_loopback

        return is_loopback
    raise AttributeError(name)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the RL environment over HTTP (reset/step/evaluate) and the live leaderboard page (docs/web.md)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; any other needs --token, unless --leaderboard-only)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}; 0: any free port)",
    )
    p.add_argument(
        "--device",
        action="append",
        dest="devices",
        metavar="ID",
        help="a device to evaluate on, repeatable: cpu, cuda:N, xpu:N, <host>/<device> (default cpu)",
    )
    p.add_argument("--hosts", type=Path, help="the hosts file for <host>/<device> devices")
    p.add_argument(
        "--token",
        help=f"the bearer token clients must send (default ${TOKEN_ENV}); required off loopback",
    )
    p.add_argument(
        "--reward",
        default="default",
        help="the reward function's name (default, gap_closed, sol, fast_p, fast_<p>; docs/rl.md)",
    )
    p.add_argument(
        "--max-turns",
        type=int,
        default=4,
        help="turns per episode unless /reset says otherwise (default 4)",
    )
    p.add_argument(
        "--max-episodes",
        type=int,
        default=256,
        help="open episodes at most; finished ones are dropped first (default 256)",
    )
    p.add_argument(
        "--cpu-slots", type=int, help="evaluations at once per CPU device (default: half the cores)"
    )
    p.add_argument(
        "--leaderboard-only",
        action="store_true",
        help="serve the leaderboard page alone: read-only, no evaluation endpoints, no token needed",
    )
    p.add_argument(
        "--no-record",
        action="store_true",
        help="keep no evaluation in the results store (by default full evaluations go to a run named serve)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="at shutdown, seconds in-flight evaluations get to finish before they are cancelled (default 30)",
    )
    p.add_argument(
        "--max-body-mib",
        type=float,
        default=16,
        metavar="MIB",
        help="the largest request body (default 16 MiB; a candidate is at most 1 MiB)",
    )
    p.add_argument(
        "--max-requests",
        type=int,
        default=256,
        help="requests handled at once, event streams aside; more get 503 (default 256)",
    )
    p.add_argument(
        "--max-streams",
        type=int,
        default=256,
        help="leaderboard event streams open at once; more get 503 (default 256)",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=256,
        help="evaluations waiting or running at once; more get 429 (default 256)",
    )
    p.set_defaults(func=_serve)


def _fail(err: Console, message: str) -> int:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return EXIT_BAD_INPUT


def _serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    from arena_tui.web.app import WebServer
    from arena_tui.web.guard import Limits, is_loopback
    from arena_tui.wiring import executor_factory
    from core.rl.arena import Arena
    from core.rl.rewards import UnknownReward, get_reward
    from core.store.db import Store, StoreError

    token = args.token or os.environ.get(TOKEN_ENV) or None
    devices = args.devices or ["cpu"]
    for name in ("max_requests", "max_streams", "max_queue"):
        if getattr(args, name) < 1:
            return _fail(
                err, f"--{name.replace('_', '-')} is {getattr(args, name)}: give 1 or more"
            )
    if args.max_body_mib <= 0 or args.grace < 0:
        return _fail(err, "--max-body-mib must be positive and --grace 0 or more")
    limits = Limits(
        max_body=int(args.max_body_mib * MIB),
        max_requests=args.max_requests,
        max_streams=args.max_streams,
        max_queue=args.max_queue,
    )
    if (
        not args.leaderboard_only and not is_loopback(args.host) and not token
    ):  # before any harness starts
        return _fail(
            err,
            f"refusing to serve on {args.host} without a token: anyone who can reach it could run code on this machine's devices. "
            f"Pass --token or set {TOKEN_ENV}, or bind 127.0.0.1 (or serve --leaderboard-only, which runs nothing)",
        )
    try:  # a board alone only reads: a read-only store will do
        store = Store.open(args.db, mode="auto" if args.leaderboard_only else "rw")
    except StoreError as exc:
        return _fail(err, str(exc))
    sweep_leftovers(out)  # what a killed server left: its folders, its run
    if not args.leaderboard_only:
        retire_stale_serve_runs(store, out)
    arena = None
    try:
        if not args.leaderboard_only:
            get_reward(args.reward)
            arena = Arena(
                devices,
                args.reward,
                args.tasks_dir,
                executor_factory(args.hosts),
                cpu_slots=args.cpu_slots,
            )
        server = WebServer(
            arena,
            args.host,
            args.port,
            token,
            args.max_turns,
            args.max_episodes,
            args.reward,
            store=store,
            tasks_dir=args.tasks_dir,
            limits=limits,
            grace_s=args.grace,
            record=not args.no_record,
        )
    except (UnknownReward, ValueError) as exc:
        store.close()
        return _fail(err, str(exc))

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        presses = 0

        def on_signal(sig: int) -> None:
            nonlocal presses
            presses += 1
            received.append(sig)
            stop.set()
            if presses > 1 and server.rl is not None:
                server.rl.draining = True
                for task in list(server.rl._inflight):  # a second signal: cancel now
                    task.cancel()

        remove_handlers = install(on_signal, loop)  # SIGINT, SIGTERM, SIGHUP alike
        try:
            host, port = await server.start()
            shown = f"[{host}]" if ":" in host else host
            if arena is None:
                out.print(
                    f"arena serve: the leaderboard at http://{shown}:{port}/ (read-only), store {store.path}",
                    highlight=False,
                    soft_wrap=True,
                )
            else:
                auth = "token required" if token else "no token (loopback only)"
                out.print(
                    f"arena serve: http://{shown}:{port} — devices {', '.join(devices)} ({len(arena.slots)} slots), reward {args.reward}, "
                    f"{auth}; the leaderboard at /, the API at /docs",
                    highlight=False,
                    soft_wrap=True,
                )
            waiter = asyncio.create_task(stop.wait())
            await asyncio.wait({waiter, server._task}, return_when=asyncio.FIRST_COMPLETED)  # type: ignore[arg-type]
            waiter.cancel()
            if server.rl is not None and server.rl.queued:
                out.print(
                    f"arena serve: stopping; {server.rl.queued} evaluation(s) in flight get {args.grace:g} s (Ctrl-C again: cancel now)",
                    highlight=False,
                )
        finally:
            await server.aclose()
            if arena is not None:
                await arena.aclose()  # every harness ends here
            remove_handlers()
            finished, cancelled = server.drained
            if finished or cancelled:
                say(
                    out,
                    f"arena serve: {finished} evaluation(s) finished, {cancelled} cancelled"
                    + (
                        f" (recorded in run {server.recorder.run_id})"
                        if server.recorder and server.recorder.run_id
                        else ""
                    ),
                )

    received: list[int] = []
    try:
        asyncio.run(main())
    except OSError as exc:
        return _fail(err, f"cannot serve on {args.host}:{args.port}: {exc}")
    finally:
        store.close()
    if received:  # stopped by a signal: 128 + its number, as for `arena run` (README)
        say(out, f"stopped by {signal_name(received[0])}")
        return exit_code(received[0])
    say(out, "stopped")
    return EXIT_PASSED
