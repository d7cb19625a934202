"""Running another benchmark's code at import time without letting it hang, break the import or
make its outcome depend on how busy the machine is.

Each problem converts in a forked child. Its limit is CPU time (`RLIMIT_CPU`), not wall-clock
time: a child on a machine shared with other work gets less of the CPU per second but the same
CPU seconds for the same work, so whether a problem converts does not change with the load. A
child that stops using the CPU altogether (a socket wait, a lock, a sleep) is a hang: it is
stopped when its CPU time has not moved for `idle_s` seconds, which load does not cause either
(a starved process still advances). Children run `workers` at a time, one torch thread each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.importers.report import Converted, Skipped

Outcome = Converted | Skipped
Item = tuple[Callable[..., Outcome], tuple[Any, ...], str]  # (function, its arguments, source)


@dataclass(frozen=True)
class Budget:
    """What one problem's conversion may use: `cpu_s` CPU seconds (all its threads; the kernel
    stops it past them), `idle_s` seconds without using the CPU at all before it counts as hung,
    and `memory_bytes` of memory of its own."""

    cpu_s: float = 120.0
    idle_s: float = 120.0
    memory_bytes: int = (
        4 << 30
    )  # RLIMIT_DATA: its allocations past this raise MemoryError (a reference at a
    # GPU-sized shape materialising a huge intermediate), never the machine's OOM killer


def isolated(
    fn: Callable[..., Outcome], args: tuple[Any, ...], source: str, budget: Budget
) -> Outcome:
    """`fn(*args)` in a forked child (see the module's docstring): a hang is a `hang`, CPU time
    past the budget a `cpu_limit`, a death a `crash`, each reported as that problem's outcome."""
    return isolated_all([(fn, args, source)], budget, workers=1)[0]


def isolated_all(
    items: Sequence[Item],
    budget: Budget,
    workers: int = 1,
    on_outcome: Callable[[int, Outcome], None] | None = None,
) -> list[Outcome]:
    """Every item in a child of its own, `workers` at a time; outcomes in the items' order, and
    `on_outcome(index, outcome)` as each finishes (in the order they finish)."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context(
        "fork"
    )  # torch is imported already and no GPU is touched: forking is cheap
    outcomes: list[Outcome | None] = [None] * len(items)
    pending = list(range(len(items)))[::-1]
    running: dict[int, _Child] = {}
    while pending or running:
        while pending and len(running) < max(1, workers):
            k = pending.pop()
            running[k] = _Child.start(ctx, items[k], budget)
        ready = wait(
            [c.receive for c in running.values()] + [c.process.sentinel for c in running.values()],
            timeout=1.0,
        )
        for k, child in list(running.items()):
            outcome = child.poll(ready, budget, items[k][2])
            if outcome is not None:
                del running[k]
                outcomes[k] = outcome
                if on_outcome:
                    on_outcome(k, outcome)
    return [o for o in outcomes if o is not None]


@dataclass
class _Child:
    process: Any
    receive: Any
    cpu_seen: float
    idle_since: float
    answer: Outcome | None = None

    @classmethod
    def start(cls, ctx: Any, item: Item, budget: Budget) -> _Child:
        fn, args, source = item
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_child, args=(send, fn, args, source, budget), daemon=True)
        process.start()
        send.close()
        return cls(process, receive, 0.0, time.monotonic())

    def poll(self, ready: list[Any], budget: Budget, source: str) -> Outcome | None:
        """The outcome once the child answered or ended; None while it runs."""
        if self.answer is None and (self.receive in ready or not self.process.is_alive()):
            try:  # an answer sent just before the child ended is read too (the pipe keeps it)
                if self.receive.poll(0):
                    self.answer = self.receive.recv()
            except (EOFError, OSError):  # it died before answering: its exit code says how
                pass
        if self.answer is not None or not self.process.is_alive():
            self.process.join(5.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
            return self.answer or _death(self.process.exitcode, source, budget)
        cpu = _cpu_seconds(self.process.pid)
        now = time.monotonic()
        if cpu is None or cpu > self.cpu_seen:
            self.cpu_seen, self.idle_since = cpu or self.cpu_seen, now
        elif now - self.idle_since > budget.idle_s:
            self.process.kill()
            self.process.join()
            return Skipped(
                source,
                "hang",
                f"its code stopped using the CPU for {budget.idle_s:.0f} s (it waits on something: a socket, a lock, a sleep)",
            )
        return None


def _death(exitcode: int | None, source: str, budget: Budget) -> Skipped:
    import signal

    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return Skipped(
            source,
            "cpu_limit",
            f"its conversion used more than {budget.cpu_s:.0f} CPU seconds (its code, or the probes of it, compute too much)",
        )
    return Skipped(
        source,
        "crash",
        f"the conversion's process died (exit code {exitcode}) running the problem's code",
    )


def _cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of process `pid` and its reaped children, from /proc (None
    where there is no /proc: the idle check then never fires)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _child(
    send: Any, fn: Callable[..., Any], args: tuple[Any, ...], source: str, budget: Budget
) -> None:
    import resource
    import warnings

    warnings.simplefilter(
        "ignore"
    )  # the problem's own code's warnings (numpy's in the interpreter) are not the import's
    # Level 4 loads configs and weights from a hub at import: use what is cached, never wait on a network.
    os.environ["HF_HUB_OFFLINE"] = "1"
    limit = max(1, int(budget.cpu_s))
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_DATA, (budget.memory_bytes, budget.memory_bytes))
    try:
        import torch

        torch.set_num_threads(1)  # the same CPU seconds for the same work, however many run
    except ImportError:
        pass
    try:
        result = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - reported as this problem's outcome, never raised
        result = Skipped(source, "crash", f"the importer raised {type(exc).__name__}: {exc}")
    send.send(result)
    send.close()
