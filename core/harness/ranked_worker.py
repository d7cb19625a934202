"""The rank processes of a multi-rank evaluation, one per rank and side (checker: ranked_checker.py).

A multi-rank task's candidate and baseline each run as `world_size` rank processes that form
a process group of their own (gloo on the CPU, NCCL on NVIDIA, RCCL through the same `nccl`
backend on AMD, XCCL on Intel), rendezvousing through a file in the evaluation's folder, so
no port is opened and the sandbox's empty network namespace (loopback only) is enough.
Candidate ranks are forked by the zygote like the single-device candidate worker and get the
same treatment (limits, no capabilities, the harness hidden, patches reported); baseline ranks
are forked from the harness parent and never see the candidate.

A candidate rank holds no seed that any check uses (ranked_inputs.py, issue 37): its
correctness inputs come from the checker as bytes, its timed inputs from the checker's region,
fetched after the barrier right before its timer (ranked_rounds.py); the compile's first call
and the estimate draw from seeds the parent draws for them alone. The baseline's ranks, which
are trusted, still draw their own from the parent's keyed seeds (`rank_seed`: HMAC-SHA256 under a
key that exists only in the parent's memory), and so does a candidate's on a device that cannot
share memory. The checker, a trusted process, gets every rank's seed, regenerates every rank's
inputs, runs the task's `reference.run_all(inputs_by_rank)` (every rank's outputs, computed in
one process without communication, so the reference never depends on the collective under test)
and judges each rank's outputs with the task's rule or check.py.

Timing is the single-device protocol made collective: fresh inputs before every call, a
barrier so that every rank enters the call together, then the L2 flush queued ahead of the
start event (the launch hides behind it, as on a single device), then device events (wall
clock on the CPU) around the call. The barrier goes through the parent (`parent_barrier`: a
message on the rank's own socket, answered when every rank has sent it), never through
torch.distributed, whose Python internals the candidate's process could patch to run the
collective inside the barrier, outside the timed call. The number of calls is fixed by the
parent for all ranks, since every rank must make every collective call. A candidate rank's
torch.distributed, torch and channel modules are watched (guard.Watch): a replaced function is
an integrity flag.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from core.harness import (
    channel,
    guard,
    inputs,
    jit_cache,
    oploop,
    ranked_inputs,
    shared_region,
    timing,
    workers,
)
from core.harness.protocol import Op, Reply, Request

# Bound at import, before any candidate code runs (as timing.py binds its clocks).
_init_process_group = dist.init_process_group
_destroy = dist.destroy_process_group
SEED_MASK = (1 << 62) - 1


def rank_seed(seed: int, rank: int, key: bytes = b"") -> int:
    """Rank `rank`'s seed for a request's `seed`: HMAC-SHA256 keyed with `key`, which the
    harness parent draws per evaluation and never sends to a rank (`arena tasks validate`,
    where no candidate runs, uses the empty key)."""
    digest = hmac.new(key, f"{seed}:{rank}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & SEED_MASK


class BarrierAborted(RuntimeError):
    """The parent called the barrier off: another rank failed before reaching it."""


def parent_barrier(conn: socket.socket, k: int) -> None:
    """Wait until every rank of this side reached barrier `k`: the parent answers `go` once all
    have asked (ranked.RankedEvaluation._all)."""
    channel.send(conn, {"barrier": k})
    reply, _ = channel.recv(conn)
    if reply.get("go") != k:
        raise BarrierAborted(
            f"barrier {k} called off by the harness: {reply.get('abort') or reply}"
        )


def rank_workload(workload: dict[str, Any], rank: int) -> dict[str, Any]:
    """A workload as rank `rank` draws it: a task's inputs.py also sees RANK among the axes."""
    return {"axes": {**workload["axes"], "RANK": rank}, "shapes": workload["shapes"]}


def backend_for(device_type: str) -> str:
    if device_type == "cpu":
        return "gloo"
    if device_type == "cuda":
        return "nccl"  # ROCm builds of torch map it onto RCCL
    if device_type == "xpu":
        return "xccl"
    raise ValueError(f"no collective backend for device type {device_type}")


def rank_device(device: dict[str, Any], rank: int) -> torch.device:
    """Rank r runs on the r-th GPU the harness sees, counting from the job's device."""
    base = torch.device(device["torch_device"])
    if base.type == "cpu":
        return base
    index = (base.index or 0) + rank
    count = torch.cuda.device_count() if base.type == "cuda" else torch.xpu.device_count()  # type: ignore[attr-defined]
    if index >= count:
        raise RuntimeError(
            f"rank {rank} needs {base.type}:{index}, but this harness sees {count} device(s): give a device group such as "
            f"`{base.type}:0-{rank}` or a smaller --world-size"
        )
    if base.type == "cuda":
        torch.cuda.set_device(index)
    return torch.device(base.type, index)


def _join_group(job: dict[str, Any], device: torch.device) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # ranks of one host meet on loopback
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    _init_process_group(
        backend_for(device.type),
        init_method=f"file://{job['store']}",
        rank=job["rank"],
        world_size=job["world_size"],
        timeout=datetime.timedelta(seconds=float(job["group_timeout_s"])),
    )


def rank_main(conn: socket.socket, job: dict[str, Any]) -> None:
    """A rank of the candidate (forked by the zygote) or of the baseline (forked by the parent)."""
    role, rank = job["role"], job["rank"]
    workdir = Path(job["workdir"])
    workers.redirect_output(workdir / f"{role}-rank{rank}.log")
    if role == "baseline":
        try:
            workers.libc().prctl(workers.PR_SET_DUMPABLE, 0, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    os.environ["TORCH_EXTENSIONS_DIR"] = str(workdir / "torch_extensions")
    if role == "candidate":  # Triton's cache: the candidate's own folder (jit_cache.py)
        os.environ["TRITON_CACHE_DIR"] = str(jit_cache.candidate_dir(workdir))
    else:  # the baseline's ranks: in memory, as the trusted worker's
        jit_cache.TrustedCache.install(
            jit_cache.STORE.trusted, os.path.join(tempfile.gettempdir(), jit_cache.TRUSTED_ROOT)
        )
    try:
        device = rank_device(job["device"], rank)
        if device.type == "cpu" and role == "candidate":
            from core.harness.triton_cpu import enable_interpreter

            enable_interpreter()
        # The candidate's view carries inputs.py's source; the baseline's full job has the file.
        inputs_source = (
            job["task_inputs"].encode()
            if job.get("task_inputs")
            else (workers.read_task_file(job, "inputs.py") if role == "baseline" else None)
        )
        custom = None
        if inputs_source:
            custom = workers.module_from_source(
                inputs_source, "arena_task_inputs", "<task inputs.py>"
            ).make_inputs
        fn: Callable[..., Any] | None = None
        if role == "baseline":
            source = workers.read_task_file(job, "baseline.py")
            if source is None:
                raise FileNotFoundError("the task's baseline.py is missing")
            fn = workers.entry(
                workers.module_from_source(
                    source, "arena_baseline", str(Path(job["task_dir"]) / "baseline.py")
                ),
                "baseline.py",
            )
        _join_group(job, device)
    except Exception as exc:  # noqa: BLE001 - the parent reports it as an infrastructure fault
        channel.send(conn, workers.error_reply(exc))
        return
    channel.send(conn, {"ok": True, "ready": True})
    candidate = role == "candidate"
    hooks = guard.NO_HOOKS
    if candidate:
        workers.limit_resources(job.get("memory_bytes") if device.type == "cpu" else None)
        workers.drop_capabilities()
        snap = workers.watch()
        hooks = workers.watch_hooks(
            custom is not None, guard.CHANNEL_REACH
        )  # torch.distributed is imported: watched too
        reported: set[str] = set()
        workers.hide_harness()
    specs, outs = job["inputs"], job["outputs"]
    kept: dict[int, list[torch.Tensor]] = {}
    peer: list[socket.socket | None] = [None]

    def handle(op: str, msg: Request, _payload: oploop.Payload) -> tuple[Reply, oploop.Payload]:
        nonlocal fn
        if (
            op == Op.IMPORT
        ):  # no collective here: a rank whose import fails must not leave the others waiting
            path = Path(job["candidate"])
            fn = workers.entry(workers.import_file(path, f"candidate_{os.getpid()}"), str(path))
            return {"ok": True}, None
        if op == Op.FIRST_CALL:  # builds JIT kernels; every rank calls, as every call is collective
            assert fn is not None, "import first"
            try:
                args = inputs.correctness_inputs(
                    specs, rank_workload(msg["workload"], rank), int(msg["seed"]), device, custom
                )
                fn(*args)
                workers.sync(device)
            except Exception as exc:  # noqa: BLE001
                return (
                    workers.error_reply(exc)
                    if workers.is_compile_error(exc)
                    else {"ok": True, "first_call_error": f"{type(exc).__name__}: {exc}"}
                ), None
            return {"ok": True}, None
        if op == Op.RUN:  # the baseline's ranks (trusted): inputs from their own seed
            assert fn is not None, "import first"
            w, seed = rank_workload(msg["workload"], rank), int(msg["seed"])
            return workers.run_for_check(
                fn, specs, outs, w, seed, int(msg.get("repeat", 1)), device, custom
            )
        if op == Op.RUN_GIVEN:  # inputs the checker drew (ranked_inputs.py)
            assert fn is not None, "import first"
            return ranked_inputs.run_given(fn, msg, _payload, specs, outs, device)
        if op == Op.PEER:  # the socket to the checker, for timed rounds over shared memory
            peer[0] = socket.socket(fileno=shared_region.recv_fd(conn))
            return {"ok": True}, None
        if op == Op.ESTIMATE:
            assert fn is not None, "import first"
            return {
                "ok": True,
                "ms": _estimate(fn, msg, specs, rank, device, custom, conn, hooks),
            }, None
        if op == Op.TIME and msg.get("shared"):
            assert fn is not None and peer[0] is not None, "import first, then the peer socket"
            from core.harness import ranked_rounds

            return ranked_rounds.time_shared(
                fn, msg, specs, outs, device, conn, peer[0], hooks
            ), None
        if op == Op.TIME:
            assert fn is not None, "import first"
            return _time_rank(
                fn, msg, specs, outs, rank, device, custom, kept, candidate, conn, hooks
            ), None
        if op == Op.KEPT:
            return workers.hand_over_kept(kept)
        return oploop.unknown(op), None

    def after(op: str, reply: Reply) -> None:
        if not candidate:
            return
        workers.report_hooks(reply, hooks)
        if op != Op.TIME:  # kept out of the timed round's wall clock; the next op reports it
            new = [name for name in workers.replaced(snap) if name not in reported]
            if new:
                reported.update(new)
                reply["tampered"] = new

    oploop.serve(conn, handle, error=workers.error_reply, after=after, on_exit=_destroy)


def _fresh(
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    rank: int,
    device: torch.device,
    custom: Any,
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> inputs.FreshInputs:
    """This rank's inputs: `msg["seed"]` is its own seed, derived in the parent."""
    return inputs.FreshInputs(
        specs, rank_workload(msg["workload"], rank), int(msg["seed"]), device, custom, hooks
    )


def _estimate(
    fn: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    rank: int,
    device: torch.device,
    custom: Any,
    conn: socket.socket,
    hooks: guard.Hooks,
) -> float:
    """Milliseconds of one call after a warm-up call, both entered together by every rank."""
    fresh = _fresh(msg, specs, rank, device, custom, hooks)
    args = fresh(msg["first_index"])
    for k, timed in enumerate((False, True)):
        hooks.check()
        parent_barrier(conn, -1 - k)
        workers.sync(device)
        t0 = timing._perf_counter()
        fn(*args)
        workers.sync(device)
        if timed:
            return (timing._perf_counter() - t0) * 1e3
    raise AssertionError("unreachable")


def rank_inputs(fresh: list[Any], index: int, rank: int) -> Any:
    """Rank `rank`'s inputs of call `index`."""
    return fresh[rank](index)


def _time_rank(
    fn: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    rank: int,
    device: torch.device,
    custom: Any,
    kept: dict[int, list[torch.Tensor]],
    keep: bool,
    conn: socket.socket,
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> dict[str, Any]:
    """`calls` timed calls; call k gets inputs first_index + 1 + k, as on a single device. The
    sampled calls' outputs are checked for type and copied right after the call, untimed."""
    kept.clear()
    calls, first = int(msg["calls"]), int(msg["first_index"])
    fresh = _fresh(msg, specs, rank, device, custom, hooks)
    chosen = timing.picks([float(u) for u in msg.get("sample", ())], calls) if keep else set()
    gpu = device.type != "cpu"
    events = timing._Events(device.type) if gpu else None
    flush = timing.flush_buffer(device) if gpu else None
    times: list[float] = []
    for k in range(calls):
        hooks.check()  # the barrier's channel code must be the harness's own
        parent_barrier(
            conn, k
        )  # every rank enters the call together: a collective's time starts when all can start
        # Refilled after the barrier, right before the timer: the barrier's wait (a round trip
        # through the parent) must not be a window in which a candidate's thread, seeing the new
        # values, ships them to its peers untimed (tests/cheats/rank_prefetch_thread.py). Every
        # rank refills the same shapes, so they still start together.
        args = fresh(first + 1 + k)
        workers.sync(device)
        if events is not None:
            # The flush is queued after the barrier and before the start event, as on a single
            # device: the call's launch (tens of µs of host work in torch.distributed) happens
            # while the flush runs, so the timer measures the collective, not its launch. Every
            # rank queues the same flush, so they still start together.
            timing._zero(flush)
            start, end = events.new(), events.new()
            events.record(start)
            result = fn(*args)
            events.record(end)
            workers.sync(device)
            times.append(events.elapsed_ms(start, end) * 1e3)
        else:
            t0 = timing._perf_counter()
            result = fn(*args)
            times.append((timing._perf_counter() - t0) * 1e6)
        if k in chosen:
            try:
                kept[first + 1 + k] = inputs.snapshot(
                    inputs.collect_outputs(
                        result, outs, specs, args, msg["workload"]["shapes"], device
                    )
                )
            except inputs.OutputError as exc:
                kept.clear()
                return {
                    "ok": False,
                    "error": f"call {first + 1 + k}: {exc}",
                    "timed_output_invalid": True,
                }
        result = None
    return {"ok": True, "times_us": times, "mode": "events" if gpu else "wall"}
