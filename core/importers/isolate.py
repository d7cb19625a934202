"""Running another benchmark's code at import time without letting it hang or break the import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.importers.report import Converted, Skipped


def isolated(
    fn: Callable[..., Converted | Skipped], args: tuple[Any, ...], source: str, timeout_s: float
) -> Converted | Skipped:
    """`fn(*args)` in a forked child: a problem's code runs with the importer's rights but cannot
    hang the import, leak its globals into the next problem or take the process down. A hang is a
    `timeout`, a death a `crash`, each reported as that problem's outcome."""
    import multiprocessing as mp

    ctx = mp.get_context(
        "fork"
    )  # torch is imported already and no GPU is touched: forking is cheap
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    child.start()
    send.close()
    outcome: Converted | Skipped | None = None
    answered = receive.poll(timeout_s)
    if answered:
        try:
            outcome = receive.recv()
        except EOFError:  # the child died before it could answer
            outcome = None
    child.join(1.0)
    if child.is_alive():
        child.kill()
        child.join()
    if outcome is not None:
        return outcome
    if not answered:
        return Skipped(
            source,
            "timeout",
            f"did not finish converting within {timeout_s:.0f} s (its code hangs, or runs too long)",
        )
    return Skipped(
        source,
        "crash",
        f"the conversion's process died (exit code {child.exitcode}) running the problem's code",
    )


def _child(send: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    import os

    # Level 4 loads configs and weights from a hub at import: use what is cached, never wait on a network.
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        result = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - reported as this problem's outcome, never raised
        result = Skipped(str(args[1]), "crash", f"the importer raised {type(exc).__name__}: {exc}")
    send.send(result)
    send.close()
