"""Messages between the harness parent and its workers: a JSON header, optionally raw bytes.

JSON, not pickle, because the candidate worker is untrusted: unpickling what it sends would
run its code in the parent.
"""

from __future__ import annotations

import json
import os
from multiprocessing.connection import Connection
from typing import Any


class ChannelClosed(EOFError):
    """The other end went away (the worker died or closed its pipe)."""


class ChannelTimeout(TimeoutError):
    """No reply within the deadline."""


def send(conn: Connection, header: dict[str, Any], payload: bytes | None = None) -> None:
    conn.send_bytes(json.dumps({**header, "_payload": payload is not None}).encode())
    if payload is not None:
        conn.send_bytes(payload)


def recv(conn: Connection, timeout: float | None = None) -> tuple[dict[str, Any], bytes | None]:
    header = json.loads(_recv_bytes(conn, timeout))
    if not isinstance(header, dict):
        raise ChannelClosed("malformed message")
    payload = _recv_bytes(conn, timeout) if header.pop("_payload", False) else None
    return header, payload


def _recv_bytes(conn: Connection, timeout: float | None) -> bytes:
    if timeout is not None and not conn.poll(max(timeout, 0.0)):
        raise ChannelTimeout
    try:
        return conn.recv_bytes()
    except (EOFError, OSError) as exc:
        raise ChannelClosed(str(exc)) from None


class EventWriter:
    """Writes one JSON object per line to the engine's private events descriptor."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, event: dict[str, Any]) -> None:
        data = (json.dumps({"v": 1, **event}) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]
