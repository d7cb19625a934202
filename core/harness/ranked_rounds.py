"""Timed rounds of a multi-rank candidate whose inputs the checker writes (docs/integrity.md,
class 2; ranked_inputs.py says why no rank may hold a seed).

Each candidate rank is joined to the checker by a socket of its own (the parent makes the pair,
as for a single device's trusted worker). For a round the parent sends the checker every rank's
seed and the sampled calls; the checker serves each rank's round in a thread of its own with
shared_io.serve_round (a region per rank: a sealed memfd on the CPU, CUDA IPC on a GPU), answers
the parent once every rank has its layout, and, when every round has ended, judges the sampled
calls of all ranks together against `reference.run_all` on every rank's regenerated inputs.
A rank meets the others at the parent's barrier, then asks the checker for the call's inputs
(`shared_io.SharedInputs`), times the call and copies its outputs into the region: it never
holds a seed, nor its peers' inputs, nor knows which calls are checked.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import torch

from core.harness import channel, shared_io, timing
from core.harness.guard import NO_HOOKS, Hooks
from core.harness.ranked_worker import parent_barrier, rank_workload

JOIN_SLACK_S = 30.0  # beyond the round's own limit, for a rank's thread to end


def rank_device(device: dict[str, Any], rank: int) -> torch.device:
    """Rank `rank`'s device as the checker names it (without making it current)."""
    base = torch.device(device["torch_device"])
    if base.type == "cpu":
        return base
    return torch.device(base.type, (base.index or 0) + rank)


def serve(
    conn: socket.socket,
    msg: dict[str, Any],
    peers: dict[int, socket.socket],
    job: dict[str, Any],
    custom: Any,
    judge: Callable[[dict[str, Any], list[int], list[list[torch.Tensor]]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """The checker's side of one round: the first answer (every rank serving, or why not) goes
    out on `conn` as the ranks' layouts go out; the verdict is returned."""
    world = int(job["world_size"])
    seeds = [int(s) for s in msg["rank_seeds"]]
    ready: list[tuple[bool, str | None] | None] = [None] * world
    results: list[Any] = [None] * world
    arrived = threading.Condition()

    def one(r: int) -> None:
        def said(serving: bool, reason: str | None) -> None:
            with arrived:
                ready[r] = (serving, reason)
                arrived.notify_all()

        request = {
            **msg,
            "workload": rank_workload(msg["workload"], r),
            "seed": seeds[r],
        }
        try:
            results[r] = shared_io.serve_round(
                peers[r],
                request,
                job["inputs"],
                job["outputs"],
                rank_device(job["device"], r),
                custom,
                said,
            )
        except Exception as exc:  # noqa: BLE001 - the verdict says which rank broke the round
            results[r] = exc
            said(False, f"{type(exc).__name__}: {exc}"[:300])

    threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    with arrived:
        arrived.wait_for(lambda: all(x is not None for x in ready))
    refused = next((x[1] for x in ready if x is not None and not x[0]), None)
    channel.send(conn, {"ok": True, "serving": refused is None, "reason": refused})
    limit = float(msg.get("timeout_s") or shared_io.PEER_TIMEOUT_S) + JOIN_SLACK_S
    for t in threads:
        t.join(limit)
    return _verdict(msg, results, judge)


def _verdict(
    msg: dict[str, Any],
    results: list[Any],
    judge: Callable[[dict[str, Any], list[int], list[list[torch.Tensor]]], list[dict[str, Any]]],
) -> dict[str, Any]:
    for r, got in enumerate(results):
        if isinstance(got, shared_io.ProtocolError):
            return {"ok": True, "violation": f"rank {r}: {got}"}
        if isinstance(got, BaseException) or got is None:
            return {"ok": True, "refused": f"rank {r}: {got or 'its round did not end'}"}
    calls = {tuple(got[0]) for got in results}
    counts = {got[2] for got in results}
    if len(calls) != 1 or len(counts) != 1:
        return {
            "ok": True,
            "violation": "the ranks reported different rounds (calls or sampled calls): "
            f"{sorted(counts)} calls",
        }
    order = list(next(iter(calls)))
    return {
        "ok": True,
        "calls": order,
        "count": next(iter(counts)),
        "serve_s": max(got[3] for got in results),
        "results": judge(msg, order, [list(got[1]) for got in results]) if order else [],
    }


def time_shared(
    fn: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
    conn: socket.socket,
    peer: socket.socket,
    hooks: Hooks = NO_HOOKS,
) -> dict[str, Any]:
    """A rank's timed round: for each call, the parent's barrier, then the call's inputs from
    the checker, then the timed call, then its outputs into the region (every call's: which
    are checked is not known here)."""
    calls, first = int(msg["calls"]), int(msg["first_index"])
    fresh = shared_io.SharedInputs(peer, specs, outs, msg["workload"]["shapes"], device, hooks)
    fresh.picker(calls)
    gpu = device.type != "cpu"
    events = timing._Events(device.type) if gpu else None
    flush = timing.flush_buffer(device) if gpu else None
    times: list[float] = []
    try:
        for k in range(calls):
            hooks.check()
            parent_barrier(conn, k)  # every rank enters the call together
            args = fresh(first + 1 + k)  # fetched after the barrier, right before the timer
            if events is not None:
                timing._zero(flush)
                start, end = events.new(), events.new()
                events.record(start)
                result = fn(*args)
                events.record(end)
                timing._sync(device.type)
                times.append(events.elapsed_ms(start, end) * 1e3)
            else:
                t0 = timing._perf_counter()
                result = fn(*args)
                times.append((timing._perf_counter() - t0) * 1e6)
            fresh.keep(first + 1 + k, result)
            result = None
    finally:
        fresh.finish()
    if fresh.invalid:
        return {"ok": False, "error": fresh.invalid[0], "timed_output_invalid": True}
    return {"ok": True, "times_us": times, "mode": "events" if gpu else "wall"}
