"""What one host's connections share: the `ChannelLimiter` that keeps the channels of a
connection below the server's MaxSessions (learned from its first refusal), and the `HostState`
kept across connections and event loops (the host's facts, its channel limit)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from remotes.facts import HostFacts

log = logging.getLogger("remotes")


class ChannelLimiter:
    """A semaphore for the channels of one connection that learns the server's MaxSessions.

    Once the server has refused a channel, the limit is the most channels that were ever open
    at once (at least one). Not the number open at the refusal: the refusal of a channel can
    arrive before the acceptances of channels opened with it, and OpenSSH frees a closed
    channel's slot a moment after confirming the close."""

    def __init__(self, limit: int, state: HostState | None = None):
        self.configured = limit
        self.state = state
        self.capped = False  # the server refused a channel: its MaxSessions is below `configured`
        self.in_use = 0  # permits held (channels open or opening)
        self.open = 0  # channels open now
        self.most_open = 0  # the most channels open at once so far
        self._changed = asyncio.Condition()

    @property
    def limit(self) -> int:
        return min(self.configured, max(1, self.most_open)) if self.capped else self.configured

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_use < self.limit)
            self.in_use += 1

    async def opened(self) -> None:
        async with self._changed:
            self.open += 1
            self.most_open = max(self.most_open, self.open)
            if self.capped and self.state is not None:
                self.state.channel_limit = self.limit
            self._changed.notify_all()

    async def release(self, was_open: bool) -> None:
        async with self._changed:
            self.in_use -= 1
            self.open -= int(was_open)
            self._changed.notify_all()

    async def refused(self) -> None:
        """The server refused a channel while this permit is held: give the permit back, wait
        for a channel to open or close (or a moment), and take one again under the new limit."""
        async with self._changed:
            if not self.capped:
                log.info(
                    "the server refused a channel: using at most as many as it has accepted at once"
                )
            self.capped = True
            if self.state is not None:
                self.state.channel_limit = self.limit
            self.in_use -= 1
            self._changed.notify_all()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 0.2)
            await self._changed.wait_for(lambda: self.in_use < self.limit)
            self.in_use += 1


@dataclass
class HostState:
    """What is learned about a host once and kept across connections and event loops."""

    facts: HostFacts | None = None
    channel_limit: int | None = None  # the server's MaxSessions as learned from a refusal
