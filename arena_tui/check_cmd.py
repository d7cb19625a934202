"""`arena check`: from inside an agent's workspace, send solution.py to the running arena and
print the visible stages' results (core/agents/check_server.py serves it).

The socket's path comes from `ARENA_CHECK_SOCKET`, which the arena sets for the agent; the
files sent are `solution.py` and its sibling CUDA/HIP sources from the socket's folder (the
workspace), or from `--workspace`. Progress goes to stderr, the report to stdout. Exit codes:
0 the solution passed the visible stages, 1 it failed one, 2 no arena to ask (not inside an
attempt), 3 the arena could not run the check.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from core.model.result import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INFRASTRUCTURE, EXIT_PASSED

SOCKET_ENV = "ARENA_CHECK_SOCKET"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="inside an agent's workspace: score solution.py on the visible workloads"
    )
    p.add_argument(
        "--workspace",
        type=Path,
        help="the folder holding solution.py (default: the socket's folder)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds to wait for the report (default 3600)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from core.agents.check_server import connect_unix
    from core.model.candidate import NATIVE_SOURCES

    raw = os.environ.get(SOCKET_ENV)
    if not raw:
        err.print(
            f"[red]error:[/] {SOCKET_ENV} is not set: `arena check` works inside an agent's workspace while its attempt runs",
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    socket_path = Path(raw)
    workspace = args.workspace or socket_path.parent
    solution = workspace / "solution.py"
    if not solution.is_file():
        err.print(
            f"[red]error:[/] {escape(str(solution))} does not exist: write your solution there",
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    files = {solution.name: solution.read_text(encoding="utf-8", errors="replace")}
    files.update(
        {
            p.name: p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(workspace.iterdir())
            if p.suffix in NATIVE_SOURCES and p.is_file()
        }
    )
    try:
        sock = connect_unix(socket_path, timeout=args.timeout)
    except OSError as exc:
        err.print(
            f"[red]error:[/] cannot reach the arena at {escape(raw)} ({exc.strerror or exc}): has the attempt ended?",
            soft_wrap=True,
        )
        return EXIT_INFRASTRUCTURE
    err.print(
        f"checking {escape(str(solution))} (waits for a free device slot)...", highlight=False
    )
    with sock, sock.makefile("rwb") as stream:
        stream.write((json.dumps({"op": "check", "files": files}) + "\n").encode())
        stream.flush()
        try:
            for line in stream:
                message = json.loads(line)
                if message.get("type") == "progress":
                    err.print(f"  {escape(message['text'])}", highlight=False)
                elif message.get("type") == "report":
                    out.print(escape(message["text"]), highlight=False, soft_wrap=True)
                    return EXIT_PASSED if message.get("ok") else EXIT_FAILED
                elif message.get("type") == "error":
                    err.print(f"[red]error:[/] {escape(message.get('text', ''))}", soft_wrap=True)
                    return EXIT_INFRASTRUCTURE
        except (OSError, ValueError) as exc:
            err.print(f"[red]error:[/] the connection to the arena broke: {exc}", soft_wrap=True)
            return EXIT_INFRASTRUCTURE
    err.print("[red]error:[/] the arena closed the connection without a report", soft_wrap=True)
    return EXIT_INFRASTRUCTURE
