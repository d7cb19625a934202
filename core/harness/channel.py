"""Messages between the harness parent and its workers: a JSON header, optionally raw bytes.

A frame is two 8-byte big-endian lengths (header, payload; all ones for "no payload"), the JSON
header, then the payload. JSON, not pickle, because the candidate worker is untrusted:
unpickling what it sends would run its code in the parent. The reader enforces a deadline on
the whole frame and caps both lengths, so a worker that writes garbage, half a frame or a
length of 2^63 into its socket ends its own evaluation (`ChannelClosed`, `ChannelTimeout`)
and can neither hang nor exhaust the parent.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from typing import Any

_FRAME = struct.Struct("!QQ")
NO_PAYLOAD = (1 << 64) - 1
MAX_HEADER = 16 << 20


class ChannelClosed(EOFError):
    """The other end went away, or sent something that is not a frame of this protocol."""


class ChannelTimeout(TimeoutError):
    """No complete reply within the deadline."""


def send(
    sock: socket.socket,
    header: dict[str, Any],
    payload: bytes | bytearray | memoryview | None = None,
) -> None:
    data = json.dumps(header).encode()
    sock.sendall(_FRAME.pack(len(data), NO_PAYLOAD if payload is None else len(payload)) + data)
    if payload is not None and len(payload):
        sock.sendall(payload)


def recv(
    sock: socket.socket, timeout: float | None = None, max_payload: int | None = None
) -> tuple[dict[str, Any], bytearray | None]:
    """One frame; `timeout` covers all of it; a payload longer than `max_payload` is refused
    before a byte of it is read."""
    deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
    head_len, payload_len = _FRAME.unpack(_read_exact(sock, _FRAME.size, deadline))
    if head_len > MAX_HEADER:
        raise ChannelClosed(f"malformed message: a header of {head_len} bytes")
    if payload_len != NO_PAYLOAD and max_payload is not None and payload_len > max_payload:
        raise ChannelClosed(
            f"malformed message: a payload of {payload_len} bytes where at most {max_payload} were expected"
        )
    try:
        header = json.loads(bytes(_read_exact(sock, head_len, deadline)))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ChannelClosed("malformed message: the header is not JSON") from None
    if not isinstance(header, dict):
        raise ChannelClosed("malformed message: the header is not a JSON object")
    payload = None if payload_len == NO_PAYLOAD else _read_exact(sock, payload_len, deadline)
    return header, payload


def _read_exact(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise ChannelTimeout
        try:
            k = sock.recv_into(view[got:], n - got)
        except (ConnectionError, OSError) as exc:
            raise ChannelClosed(str(exc)) from None
        if k == 0:
            raise ChannelClosed("the other end closed the channel")
        got += k
    return buf


class EventWriter:
    """Writes one JSON object per line to the engine's private events descriptor."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, event: dict[str, Any]) -> None:
        data = (json.dumps({"v": 1, **event}) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data) :]
