"""A run executed by its one owner (core/store/leases.py), stopped cleanly by the first fault of
its store's disk.

`owned(store, run_id, work)` takes the run's lease (RunOwnedError, before anything runs, when
another live process holds it), renews it every `HEARTBEAT_S` while `work` runs, and watches
the store: the first write that fails for the disk's sake (StorageFault: full, read-only, an
I/O error), wherever it happened (a result, an event, a job's state), cancels `work`, whose
own cleanup stops the harnesses and agents and keeps what was committed, and is then raised
to the caller as that one fault. A lease that another process took over meanwhile (this one
was judged gone) stops the work the same way, with a RunOwnedError."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from core.store import rows
from core.store.db import Store
from core.store.errors import RunOwnedError, StoreError

T = TypeVar("T")


async def keep_lease(store: Store, run_id: str, on_lost: Callable[[StoreError], None]) -> None:
    """Renew the run's lease every HEARTBEAT_S until cancelled; tell `on_lost` once and stop if
    another process holds it now. A heartbeat the disk refuses is skipped: the run's own
    writes report that fault."""
    while True:
        await asyncio.sleep(rows.HEARTBEAT_S)
        try:
            ours = await asyncio.to_thread(store.heartbeat, run_id)
            if ours:
                continue
            lease = await asyncio.to_thread(store.lease, run_id)
        except StoreError:
            continue
        holder = lease.describe() if lease is not None else "no process (it was finished)"
        on_lost(
            RunOwnedError(
                f"run {run_id} was taken over by {holder}: this process was judged gone and stops working on it"
            )
        )
        return


async def owned(store: Store, run_id: str, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`await work()` holding the run's lease; see the module's doc for how it stops."""
    store.take_lease(run_id)
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[StoreError] = loop.create_future()

    def stop_with(exc: StoreError) -> None:  # from any thread: the writer's
        def first() -> None:
            if not stop.done():
                stop.set_result(exc)

        with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
            loop.call_soon_threadsafe(first)

    remove = store.add_fault_listener(stop_with)
    keeper = asyncio.ensure_future(keep_lease(store, run_id, stop_with))
    body = asyncio.ensure_future(work())
    either: set[asyncio.Future[Any]] = {body, stop}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not body.done():
            body.cancel()  # its cleanup ends harnesses and agents, keeps what was committed
            await asyncio.wait({body})
            _retrieved(body)
            raise stop.result()
        return body.result()
    except asyncio.CancelledError:  # Ctrl-C, a signal: the work records the run interrupted
        body.cancel()
        await asyncio.wait({body})
        _retrieved(body)
        raise
    finally:
        remove()
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a cancelled task's outcome as seen: what it raised while stopping is not news."""
    if not task.cancelled():
        task.exception()
