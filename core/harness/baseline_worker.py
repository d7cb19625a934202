"""The baseline's worker: the task's baseline, timed exactly as the candidate is.

The speedup divides two medians, so both must be measured under the same conditions. The
baseline used to be timed inside the trusted worker, the process that also computes the
reference in float32, caches reference outputs, and serves the candidate's inputs. On the
H200 that process timed the same source 6-16% slower than the candidate's worker on torch
compositions of several launches, in CUDA graph replays too, and a memory-bound kernel read
1.5-2x apart depending on where its round's buffers happened to lie (docs/fidelity.md). So
the baseline gets a worker of its own, made like the candidate's:

- a fresh process holding only the baseline (hash-checked bytes, as the trusted worker reads
  them), its CUDA context, and the harness's timer; nothing else runs or is cached in it;
- the same timed round: `candidate_worker.time_shared` where the candidate's rounds go through
  shared memory (the trusted worker writes every call's inputs, a host wait before each call),
  `candidate_worker.time_own` where they do not (inputs drawn here, calls queued);
- the same memory: in the shared path both sides' rounds of one alternation run on the one
  region the trusted worker allocated for it (shared_io.py, `pair`), so where a buffer lies
  cannot favour either side.

It is the harness's own code (forked by the parent like the trusted worker, never by the
candidate's zygote, and never under the candidate's uid): a candidate can neither signal it
nor read its memory (not dumpable). One serves a whole batch, as the trusted worker does.
Every timed device has one, the CPU too: timed inside the trusted worker, the CPU's baseline
read 0.07-1.25 of itself (docs/fidelity.md, "The CPU device"). A `sim:` device predicts.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import torch

from core.harness import channel, jit_cache, oploop, shared_region, trace
from core.harness.candidate_worker import time_own, time_shared
from core.harness.protocol import Op
from core.harness.trusted_task import baseline_impl, chosen_impl
from core.harness.trusted_worker import install_trusted_triton
from core.harness.worker_process import PR_SET_DUMPABLE, libc, redirect_output
from core.harness.worker_tools import (
    device_of,
    entry,
    error_reply,
    module_from_source,
    pinned,
    read_task_file,
)

Answer = oploop.Answer


def uses_baseline_worker(job: dict[str, Any]) -> bool:
    """Where the baseline is timed in a worker of its own: a timed device (a GPU or the CPU;
    a `sim:` device predicts), one rank (`timing.baseline_worker` says otherwise where a test
    or a measurement asks)."""
    asked = job["timing"].get("baseline_worker")
    return (
        (job["device"].get("type") != "sim" if asked is None else bool(asked))
        and not job.get("world_size")
        and bool(job["stages"].get("performance"))
    )


def baseline_main(conn: socket.socket, job: dict[str, Any]) -> None:
    trace.set_role("baseline")
    started = time.monotonic()
    redirect_output(Path(job["workdir"]) / "baseline.log")
    try:
        libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no same-user process may read its memory
    except (OSError, AttributeError):
        pass
    install_trusted_triton(job)  # its kernels cached as the trusted worker caches them
    try:
        device = device_of(job)
        if device.type == "cpu":  # a Triton baseline runs in the interpreter, as in trusted_task
            from core.harness.triton_cpu import enable_interpreter

            enable_interpreter()
        source = read_task_file(job, "baseline.py")
        if source is None:
            raise FileNotFoundError("the task's baseline.py is missing")
        module = module_from_source(
            source, "arena_baseline", str(Path(job["task_dir"]) / "baseline.py")
        )
        custom = None
        inputs_source = read_task_file(job, "inputs.py")
        if inputs_source is not None:
            custom = module_from_source(
                inputs_source, "arena_task_inputs", str(Path(job["task_dir"]) / "inputs.py")
            ).make_inputs
        run = (  # the run's choice among task.yaml's `baselines:`, else baseline.py's own
            chosen_impl(module, job["baseline_impl"])
            if job.get("baseline_impl")
            else entry(module, "baseline.py")
        )
        if device.type == "cuda":  # the context, as the candidate's worker makes it (`warm`)
            torch.cuda.init()
            torch.empty((1,), device=device)
    except Exception as exc:  # noqa: BLE001 - the parent reports it as an infrastructure fault
        channel.send(conn, error_reply(exc))
        return
    worker = BaselineWorker(conn, job, device, module, custom, run)
    trace.record("setup", started, time.monotonic() - started)
    channel.send(conn, {"ok": True, "ready": True})
    oploop.serve(conn, worker.handle, error=error_reply)


class BaselineWorker:
    """What the baseline's worker holds between requests, and a handler per op."""

    def __init__(
        self,
        conn: socket.socket,
        job: dict[str, Any],
        device: torch.device,
        module: Any,
        custom: Any,
        run: Any,
    ):
        self.conn, self.device, self.module, self.custom = conn, device, module, custom
        self.run = run
        self.specs, self.outs = job["inputs"], job["outputs"]
        self.peer: socket.socket | None = None
        self.handle = oploop.dispatch(
            {
                Op.PEER.value: self.on_peer,
                Op.TIME.value: self.on_time,
                Op.SYNC.value: self.on_sync,
                Op.JIT.value: self.on_jit,
            }
        )

    def on_peer(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """The socket to the trusted worker of the candidate being timed (a batch's slots each
        have their own: a new one replaces the last)."""
        if self.peer is not None:
            self.peer.close()
        self.peer = socket.socket(fileno=shared_region.recv_fd(self.conn))
        return {"ok": True}, None

    def on_time(self, msg: dict[str, Any], _payload: Any) -> Answer:
        with pinned(msg.get("cpu")):  # the CPU the candidate's rounds run on too
            if msg.get("shared"):
                assert self.peer is not None, "join the trusted worker first (peer)"
                reply = time_shared(self.run, msg, self.specs, self.outs, self.device, self.peer)
            else:
                reply = time_own(self.run, msg, self.specs, self.outs, self.device, self.custom, {})
        return {**reply, "impl": baseline_impl(self.module)}, None

    def on_jit(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """What it compiled since it last said, for the parent's store (jit_cache.py)."""
        fresh, jit_cache.TrustedCache.fresh = jit_cache.TrustedCache.fresh, {}
        return jit_cache.pack(fresh)

    def on_sync(self, msg: dict[str, Any], _payload: Any) -> Answer:
        return {"ok": True, "sync": msg.get("nonce")}, None
