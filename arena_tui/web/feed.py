"""The leaderboard's live feed: it tails the results store and tells every open event stream
(GET /api/events, server-sent events) when results land.

Two ways to learn of a write: this process's own (the server records its evaluations) arrive
at once through `Store.add_listener`; another process's (`arena run` filling the same store)
show as a change of `Store.data_version`, checked every `poll_s`. Either way the feed reads
what was recorded since the last result it saw (`Store.recorded_since`) and sends it as one
`results` event. The browser then fetches the boards again: no page reload, no polling loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from core.store.db import Store

HEARTBEAT_S = 15.0  # a comment line this often keeps proxies from closing an idle stream
QUEUE = 16  # events kept for a slow reader; older ones are dropped (the next one says "fetch again" too)


class StoreFeed:
    def __init__(self, store: Store, poll_s: float = 0.25):
        self.store, self.poll_s = store, poll_s
        self.version = 0  # how many `results` events so far: the event id
        self._queues: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._remove_listener: Any = None
        self._mark: str | None = None  # the last created_at seen
        self._seen_at_mark: set[int] = set()
        self.closed = False

    @property
    def subscribers(self) -> int:
        return len(self._queues)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        latest = await asyncio.to_thread(self.store.recorded_since, None)
        self._advance(latest)
        self._remove_listener = self.store.add_listener(
            lambda job_id: loop.call_soon_threadsafe(self._wake.set)
        )
        self._task = asyncio.create_task(self._tail(), name="leaderboard feed")

    async def close(self) -> None:
        """End every stream (each gets its end), stop tailing."""
        self.closed = True
        if self._remove_listener is not None:
            self._remove_listener()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for q in list(self._queues):
            self._put(q, None)

    def _advance(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows not seen yet, and move the mark past them (rows sharing the mark's
        millisecond are told apart by job id)."""
        new = [
            r
            for r in rows
            if not (r["created_at"] == self._mark and r["job_id"] in self._seen_at_mark)
        ]
        if rows:
            last = rows[-1]["created_at"]
            if last != self._mark:
                self._mark, self._seen_at_mark = last, set()
            self._seen_at_mark |= {r["job_id"] for r in rows if r["created_at"] == last}
        return new

    async def _tail(self) -> None:
        version = await asyncio.to_thread(lambda: self.store.data_version)
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_s)
            ours = self._wake.is_set()
            self._wake.clear()
            now = await asyncio.to_thread(lambda: self.store.data_version)
            if not ours and now == version:
                continue
            version = now
            new = self._advance(await asyncio.to_thread(self.store.recorded_since, self._mark))
            if new or ours:  # ours without new rows: a mark (infrastructure) changed a result
                self.publish({"results": new})

    def publish(self, data: dict[str, Any]) -> None:
        self.version += 1
        event = {"version": self.version, **data}
        for q in list(self._queues):
            self._put(q, event)

    @staticmethod
    def _put(q: asyncio.Queue[dict[str, Any] | None], event: dict[str, Any] | None) -> None:
        while True:
            try:
                q.put_nowait(event)
                return
            except asyncio.QueueFull:
                q.get_nowait()  # drop the oldest: every event means "fetch the boards again"

    async def stream(self) -> AsyncIterator[str]:
        """One client's stream: a `hello` with the current version, then a `results` event per
        landing; ends when the feed closes (the server stops)."""
        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE)
        self._queues.add(q)
        try:
            yield f"retry: 2000\nevent: hello\ndata: {json.dumps({'version': self.version})}\n\n"
            while not self.closed:
                try:
                    event = await asyncio.wait_for(q.get(), HEARTBEAT_S)
                except asyncio.TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if event is None:
                    return
                yield f"id: {event['version']}\nevent: results\ndata: {json.dumps(event)}\n\n"
        finally:
            self._queues.discard(q)
