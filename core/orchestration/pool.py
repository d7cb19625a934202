"""One evaluator per scheduler slot, shared by `arena run` (core.orchestration.runs) and the RL
arena (core.rl.arena).

An evaluator owns a warm harness on its slot's device; making one probes the device and reads
the engine's data, which blocks for seconds. That happens in a worker thread
(`asyncio.to_thread`), never on the event loop: during `arena run` the loop is the app's, and
under the RL arena it serves every other episode. A slot whose evaluator failed (its harness
died, its job was cancelled) is dropped and gets a fresh one on its next job. A job cancelled
while its slot's evaluator is being made cannot stop that thread: what it makes is closed once
made, and `aclose` waits for it, so a run's folder is removed after its last writer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from core.evaluation.evaluator import Evaluator
from core.evaluation.executors import Executor, HarnessError
from core.evaluation.job import Timing
from core.orchestration.scheduler import InfrastructureFault, Slot

ExecutorFactory = Callable[[str, Path], Executor]  # (device id, working folder) -> an executor


class EvaluatorPool:
    """`await pool.get(slot)` gives the slot's evaluator, made on first use; `drop(slot)` stops
    it; `close()` stops them all. `keep_folders`: each evaluator works in its slot's folder
    under `root` (kept); otherwise in a temporary one it removes on close."""

    def __init__(
        self,
        factory: ExecutorFactory,
        root: Callable[[], Path],
        *,
        timing: Timing | None = None,
        keep_folders: bool = True,
        baseline_impl: str | None = None,
    ):
        self.factory = factory
        self._root = root
        self.timing = timing
        self.baseline_impl = baseline_impl  # the run's choice among tasks' `baselines:`
        self.keep_folders = keep_folders
        self._evaluators: dict[Slot, Evaluator] = {}
        self._closing: set[asyncio.Future[None]] = set()  # harnesses `drop` is stopping
        # Evaluators still being made for a `get` that was cancelled meanwhile: the thread goes
        # on, and what it makes (a harness, the slot's folder) is closed once it is there.
        self._orphans: set[asyncio.Future[Evaluator]] = set()

    def folder(self, slot: Slot) -> Path:
        return self._root() / f"{slot.device.replace('/', '_').replace(':', '_')}-{slot.index}"

    async def get(self, slot: Slot) -> Evaluator:
        evaluator = self._evaluators.get(slot)
        if evaluator is None:
            # probing a device blocks for seconds: in a thread, which a cancel cannot stop
            making = asyncio.ensure_future(asyncio.to_thread(self._make, slot))
            try:
                evaluator = await asyncio.shield(making)
            except asyncio.CancelledError:
                self._orphans.add(making)
                making.add_done_callback(self._close_orphan)
                raise
            self._evaluators[slot] = evaluator
        return evaluator

    def _close_orphan(self, making: asyncio.Future[Evaluator]) -> None:
        """A cancelled `get`'s evaluator, made after all: stopped in a thread (`aclose` waits)."""
        self._orphans.discard(making)
        if making.cancelled() or making.exception() is not None:
            return  # nothing was made (the exception is seen: no "never retrieved" warning)
        closing = asyncio.get_running_loop().run_in_executor(None, making.result().close)
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def _make(self, slot: Slot) -> Evaluator:
        folder = self.folder(slot)
        try:
            executor = self.factory(slot.device, folder)
        except Exception as exc:
            raise InfrastructureFault(f"{slot.device}: {exc}") from exc
        return Evaluator(
            executor=executor,
            workdir=folder if self.keep_folders else None,
            timing=self.timing,
            baseline_impl=self.baseline_impl,
        )

    def drop(self, slot: Slot) -> None:
        """Stop the slot's harness and everything it started (after a harness error or a cancel).
        Killing a harness waits for it to die, which takes up to seconds: inside a running
        loop that happens in a worker thread (`aclose` waits for it), so the loop goes on
        serving the other slots and requests; the slot gets a fresh evaluator at once."""
        evaluator = self._evaluators.pop(slot, None)
        if evaluator is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            evaluator.executor.close()
            return
        closing = loop.run_in_executor(None, evaluator.executor.close)
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    @contextlib.contextmanager
    def guarded(self, slot: Slot) -> Iterator[None]:
        """Around a job's evaluation on `slot`: a harness error is an infrastructure fault (the
        scheduler retries the job on another slot); it or a cancellation drops the slot's
        evaluator, which stops its harness and everything it started."""
        try:
            yield
        except HarnessError as exc:
            self.drop(slot)
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            self.drop(slot)
            raise

    def evaluators(self) -> list[Evaluator]:
        return list(self._evaluators.values())

    def close(self) -> None:
        evaluators, self._evaluators = list(self._evaluators.values()), {}
        for evaluator in evaluators:
            evaluator.close()

    async def aclose(self) -> None:
        if self._orphans:  # each, once made, is put among those closing (its callback runs first)
            await asyncio.wait(set(self._orphans))
        if self._closing:
            await asyncio.wait(set(self._closing))  # every dropped harness is dead too
        evaluators, self._evaluators = list(self._evaluators.values()), {}
        for evaluator in evaluators:
            await asyncio.to_thread(evaluator.close)  # a harness takes a moment to die
