"""The terminating signals, handled alike by `arena run`, `arena serve` and the app: SIGINT
(Ctrl-C), SIGTERM (`kill`, a service manager, a container stopping) and SIGHUP (the terminal
closed). Each stops the work the same way (harnesses and agents ended, results kept, the run
marked `interrupted`, the resume command printed) and the process exits with 128 + the
signal's number, as a shell reports a process killed by it: 130, 143, 129 (README, "Exit codes").
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_code(sig: int) -> int:
    return 128 + int(sig)


def signal_name(sig: int) -> str:
    return signal.Signals(sig).name


class Interrupted(Exception):
    """The work was stopped by a terminating signal."""

    def __init__(self, sig: int):
        super().__init__(f"interrupted by {signal_name(sig)}")
        self.signal = sig

    @property
    def exit_code(self) -> int:
        return exit_code(self.signal)


def install(
    on_signal: Callable[[int], None], loop: asyncio.AbstractEventLoop | None = None
) -> Callable[[], None]:
    """Call `on_signal(sig)` in the loop for each terminating signal (the running loop's
    handlers) until the returned function is called (Python's default ones come back then)."""
    loop = loop or asyncio.get_running_loop()
    installed = []
    for sig in TERMINATING:
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, not Unix
            pass

    def remove() -> None:
        for sig in installed:
            with contextlib.suppress(RuntimeError, ValueError):  # the loop has closed
                loop.remove_signal_handler(sig)
        installed.clear()

    return remove


@contextlib.contextmanager
def on_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """`install` for the length of the block."""
    remove = install(on_signal)
    try:
        yield
    finally:
        remove()


async def cancel_on_signal(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`await work()` in a task that the first terminating signal cancels, then raise
    Interrupted(sig) once its cleanup has run. Later signals are ignored: the cleanup (agents
    get 5 s to end, harnesses are killed) is short, and SIGKILL remains for the impatient."""
    task = asyncio.ensure_future(work())
    received: list[int] = []

    def stop(sig: int) -> None:
        if not received:
            received.append(sig)
            task.cancel()

    with on_signals(stop):
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not received:  # our caller was cancelled: pass it on
                task.cancel()
                raise
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise Interrupted(received[0]) from None
