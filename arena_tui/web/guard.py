"""The door every request passes: the token, the size of bodies and how many requests run at
once. A pure ASGI middleware, so that it answers before any route reads a byte, in the same
JSON error shape as the endpoints."""

from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arena_tui.web import MIB
from arena_tui.web.errors import BodyTooLarge, error_payload


@dataclass(frozen=True)
class Limits:
    """What one server accepts (docs/web.md, "Limits")."""

    max_body: int = 16 * MIB  # a candidate is at most 1 MiB (core/rl/arena.py); a batch holds many
    max_requests: int = 256  # requests being handled at once, event streams aside
    max_streams: int = 256  # open event streams (the leaderboard page holds one per tab)
    max_queue: int = 256  # evaluations waiting or running (the scheduler's queue)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


async def _send_json(
    send: Send, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Token (every path but `open_paths`), body size (413), requests at once (503) and event
    streams at once (`stream_paths`, 503)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        limits: Limits,
        open_paths: frozenset[str],
        stream_paths: frozenset[str],
    ):
        self.app, self.token, self.limits = app, token, limits
        self.open_paths, self.stream_paths = open_paths, stream_paths
        self.requests = 0
        self.streams = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"].rstrip("/") or "/"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.token and path not in self.open_paths and not self._authorized(headers, scope):
            await _send_json(
                send,
                401,
                error_payload(
                    401,
                    "missing or wrong token: send the header `Authorization: Bearer <token>` (the server's --token)",
                    "Authorization",
                ),
                {"WWW-Authenticate": "Bearer"},
            )
            return
        limit = self.limits.max_body
        length = headers.get("content-length")
        digits = length is not None and length.isascii() and length.isdigit()
        if length is not None and (not digits or int(length) > limit):
            await _send_json(
                send,
                413 if digits else 400,
                error_payload(
                    413 if digits else 400,
                    f"the body is {length} bytes, more than the {limit} allowed: a candidate is at most 1 MiB; split a batch"
                    if digits
                    else f"Content-Length is {length!r}: give the body's size in bytes",
                ),
            )
            return
        stream = path in self.stream_paths
        if stream and self.streams >= self.limits.max_streams:
            await _send_json(
                send,
                503,
                error_payload(
                    503,
                    f"{self.streams} event streams are open, the most allowed (--max-streams): retry later",
                ),
                {"Retry-After": "5"},
            )
            return
        if not stream and self.requests >= self.limits.max_requests:
            await _send_json(
                send,
                503,
                error_payload(
                    503,
                    f"{self.requests} requests are being handled, the most allowed (--max-requests): retry in a moment",
                ),
                {"Retry-After": "1"},
            )
            return
        if stream:
            self.streams += 1
        else:
            self.requests += 1
        try:
            if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                receive = await self._buffered(receive, send, limit)
                if receive is None:
                    return
            await self.app(scope, receive, send)
        finally:
            if stream:
                self.streams -= 1
            else:
                self.requests -= 1

    @staticmethod
    async def _buffered(upstream: Receive, send: Send, limit: int) -> Receive | None:
        """A chunked body, read here up to the limit so that an oversize one is refused (413)
        whichever route it was sent to; the app then reads it from memory. None: refused."""
        chunks: list[bytes] = []
        seen, more = 0, True
        while more:
            message = await upstream()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            more = message.get("more_body", False)
            if seen > limit:
                await _send_json(
                    send, 413, BodyTooLarge(limit).error().payload(), {"Connection": "close"}
                )
                return None
        buffered: list[Message] = [
            {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        ]

        async def replay() -> Message:
            return buffered.pop() if buffered else await upstream()

        return replay

    def _authorized(self, headers: dict[str, str], scope: Scope) -> bool:
        assert self.token
        scheme, _, value = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token.encode()
        )
