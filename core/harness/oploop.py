"""The one op loop every harness worker runs: receive a request, answer it, until `exit` or
until the parent closes the channel.

A worker supplies `handle(op, msg, payload) -> (reply, payload)` (`dispatch` makes one from a
handler per op); an exception there is the
candidate's (or the task's) failure and is answered with `error(exc)`, never raised, so the
parent always gets one reply per request. A handler that returns None has answered already
(the trusted worker's replies that a descriptor follows, or a round answered twice) or serves
an op that takes no reply. `after(op, reply)` adds what every reply of that worker carries (the
candidate's tamper report)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from core.harness import channel, trace
from core.harness.protocol import Op, Reply, Request

Payload = bytes | bytearray | memoryview | None
Answer = tuple[Reply | dict[str, Any], Payload]
Handler = Callable[[str, Request, Payload], Answer | None]


def unknown(op: str) -> Reply:
    return {"ok": False, "error": f"unknown op {op}"}


def dispatch(handlers: dict[str, Callable[[dict[str, Any], Payload], Answer | None]]) -> Handler:
    """A `handle` that calls `handlers[op](msg, payload)` and answers any other op `unknown`."""

    def handle(op: str, msg: Request, payload: Payload) -> Answer | None:
        handler = handlers.get(op)
        return (unknown(op), None) if handler is None else handler(msg, payload)  # type: ignore[arg-type]

    return handle


def serve(
    conn: socket.socket,
    handle: Handler,
    *,
    error: Callable[[BaseException], Reply | dict[str, Any]],
    after: Callable[[str, Any], None] | None = None,
    on_exit: Callable[[], None] | None = None,
) -> None:
    while True:
        try:
            msg, payload = channel.recv(conn)
        except channel.ChannelClosed:
            return
        op = str(msg.get("op"))
        if op == Op.EXIT:
            channel.send(conn, {"ok": True})
            if on_exit is not None:
                on_exit()
            return
        answer: Answer | None
        try:
            with trace.span(op):
                answer = handle(op, msg, payload)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - reported to the parent, not raised
            answer = error(exc), None
        if answer is None:  # answered by the handler itself, or an op without a reply
            continue
        reply, out = answer
        if after is not None:
            after(op, reply)
        channel.send(conn, dict(reply), out)
