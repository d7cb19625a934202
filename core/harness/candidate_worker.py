"""The candidate's worker: imports the candidate and runs or times it, one op at a time.

Forked by the zygote (worker_process.Worker.spawn), it holds only `candidate_view` of the job:
its own path, the input and output specs, the device, its working folder. It learns a
workload's shapes and seed when asked to run it, never the other workloads' or the job file.
Before its module is imported the process is reduced to what it needs (limits, no
capabilities: worker_process.py), the harness is hidden and a snapshot of time's and torch's
functions is taken (worker_watch.py), so that replacing one at run time is reported: every
reply carries what the hooks found (`hooked`), and every reply but a timed round's the names
replaced since the last report (`tampered`).

Its ops (protocol.Op) each have a handler of `CandidateWorker`, answered by oploop.serve:
warm, compile, run (outputs packed for the check), attach and run_shared (correctness runs
over shared memory: shared_check.py), peer and time (a timed round: the old path draws the
inputs here and keeps the sampled calls' outputs for `kept`; the shared path gets them from
the trusted worker: shared_io.py), predict (sim: devices).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.harness import (
    autotune,
    guard,
    inputs,
    jit_cache,
    oploop,
    shared_check,
    shared_io,
    shared_region,
    timing,
    trace,
    triton_trace,
)
from core.harness.protocol import SIM_GPU_ENV, Op, Reply
from core.harness.worker_process import drop_capabilities, limit_resources, redirect_output
from core.harness.worker_tools import (
    device_of,
    entry,
    error_reply,
    import_file,
    is_compile_error,
    module_from_source,
    pinned,
    run_packed,
    sync,
)
from core.harness.worker_watch import hide_harness, replaced, report_hooks, watch, watch_hooks

Answer = oploop.Answer  # a reply and its payload (raw tensor bytes, or None)


def candidate_main(conn: socket.socket, job: dict[str, Any]) -> None:
    """`job` is `candidate_view(full_job)`."""
    trace.set_role("candidate")
    started = time.monotonic()
    workdir = Path(job["workdir"])
    redirect_output(workdir / "candidate.log")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(workdir / "torch_extensions")
    # Triton's cache: this candidate's own folder, seeded by the parent (jit_cache.py)
    os.environ["TRITON_CACHE_DIR"] = str(jit_cache.candidate_dir(workdir))
    device = device_of(job)
    sim = None
    predictor: Any = None
    if (
        job["device"].get("type") == "sim"
    ):  # a simulated GPU: the performance stage counts (docs/simulation.md)
        from core.harness.sim import predict as sim_predict

        predictor = sim_predict
        # Code that picks an implementation per device (a task's baseline.py: Liger where a GPU
        # is) takes the GPU's branch where that branch is Triton, which this device counts in
        # its interpreter: the GPU it stands for, by its id (docs/simulation.md, "The identity").
        os.environ[SIM_GPU_ENV] = str(job["device"].get("id") or "sim")
        if job["device"].get("properties"):  # torch.cuda's questions about it (sim/gpu_queries.py)
            from core.harness.sim import gpu_queries

            gpu_queries.install(job["device"]["properties"])
        sim = sim_predict.CompileCache(
            job["device"]["aot"], str(workdir / "triton_cache")
        )  # before the interpreter
    if device.type == "cpu":
        from core.harness.triton_cpu import enable_interpreter

        enable_interpreter()
    # `train`'s budget on @triton.autotune (None in `full`: every configuration), before any
    # candidate code: its kernels' autotuners are made when its module is imported.
    autotune.install(
        job.get("autotune_configs"),
        rep_ms=job.get("autotune_rep_ms"),
        compile_threads=autotune.compile_threads(job, device.type),
    )
    triton_trace.install()  # the trace on only: Triton's compiles, builds, autotune trials
    custom = None
    if job.get("task_inputs"):
        custom = module_from_source(
            job["task_inputs"].encode(), "arena_task_inputs", "<task inputs.py>"
        ).make_inputs
    limit_resources(job.get("memory_bytes") if device.type == "cpu" else None)
    drop_capabilities()
    snap = watch()
    hooks = watch_hooks(custom is not None)
    reported: set[str] = set()
    hide_harness()
    worker = CandidateWorker(conn, job, device, custom, hooks, sim, predictor)
    trace.record("setup", started, time.monotonic() - started)

    def after(op: str, reply: Reply) -> None:
        report_hooks(reply, hooks)  # type: ignore[arg-type]
        if op != Op.TIME:  # kept out of the timed round's wall clock; the next op reports it
            new = [name for name in replaced(snap) if name not in reported]
            if new:
                reported.update(new)
                reply["tampered"] = new
            tuned = autotune.LOG.report()
            if tuned:
                reply["autotune"] = tuned

    oploop.serve(conn, worker.handle, error=error_reply, after=after)


class CandidateWorker:
    """What the candidate's worker holds between requests, and a handler per op."""

    def __init__(
        self,
        conn: socket.socket,
        job: dict[str, Any],
        device: torch.device,
        custom: Any,
        hooks: guard.Hooks,
        sim: Any,
        predictor: Any,
    ):
        self.conn, self.job, self.device, self.custom, self.hooks = conn, job, device, custom, hooks
        self.sim, self.predictor = sim, predictor  # sim: devices: the compile cache, sim.predict
        self.specs, self.outs = job["inputs"], job["outputs"]
        self.run: Callable[..., Any] | None = None
        self.peer: socket.socket | None = None
        self.kept: dict[int, Any] = {}
        # where the trusted worker writes correctness inputs
        self.shared = shared_check.CandidateRegion()
        self.handle = oploop.dispatch(
            {
                Op.COMPILE.value: self.on_compile,
                Op.RUN.value: self.on_run,
                Op.WARM.value: self.on_warm,
                Op.ATTACH.value: self.on_attach,
                Op.DETACH.value: self.on_detach,
                Op.RUN_SHARED.value: self.on_run_shared,
                Op.PEER.value: self.on_peer,
                Op.TIME.value: self.on_time,
                Op.PREDICT.value: self.on_predict,
                Op.KEPT.value: self.on_kept,
            }
        )

    def on_compile(self, msg: dict[str, Any], _payload: Any) -> Answer:
        path = Path(self.job["candidate"])
        with trace.span("compile: import"):  # the module's own imports and top-level code
            self.run = run = entry(import_file(path, f"candidate_{os.getpid()}"), str(path))
        reply: dict[str, Any] = {"ok": True}
        try:  # the first call builds JIT kernels: a build failure is a compile failure
            with guard.trusted():  # (the seed is one no check uses: the parent's draw)
                args = inputs.correctness_inputs(
                    self.specs, msg["workload"], msg["seed"], self.device, self.custom
                )
            with trace.span("compile: first call"):  # JIT compiles, autotuning, launchers
                run(*args)
                sync(self.device)
        except Exception as exc:  # noqa: BLE001
            if is_compile_error(exc):
                reply = error_reply(exc)
            else:
                reply["first_call_error"] = f"{type(exc).__name__}: {exc}"
        return reply, None

    def on_run(self, msg: dict[str, Any], _payload: Any) -> Answer:
        assert self.run is not None, "compile first"
        return run_for_check(
            self.run,
            self.specs,
            self.outs,
            msg["workload"],
            msg["seed"],
            int(msg.get("repeat", 1)),
            self.device,
            self.custom,
        )

    def on_warm(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """Before any candidate code: the device's context, made now."""
        if self.device.type == "cuda":
            torch.cuda.init()
            torch.empty((1,), device=self.device)
        return {"ok": True, "isolation": self.job.get("isolation_note")}, None

    def on_attach(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """The region correctness runs share with the trusted worker."""
        fds = shared_check.recv_fds(self.conn, msg.get("region"))
        try:
            self.shared.attach(msg["region"], fds, self.device)
            return {"ok": True}, None
        except Exception as exc:  # noqa: BLE001 - the parent keeps the old path
            return {"ok": True, "attach_failed": f"{type(exc).__name__}: {exc}"[:300]}, None

    def on_detach(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """Unmap the region and give back what this worker's allocator cached: the trusted
        worker may then free the region, and a worker kept for its timing pins nothing."""
        gone = self.shared.detach()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True, "kept": not gone}, None

    def on_run_shared(self, msg: dict[str, Any], _payload: Any) -> Answer:
        assert self.run is not None, "compile first"
        return self.shared.run(self.run, msg, self.specs, self.outs, self.device), None

    def on_peer(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """The socket to the trusted worker, for timed rounds over shared memory."""
        self.peer = socket.socket(fileno=shared_region.recv_fd(self.conn))
        return {"ok": True}, None

    def on_time(self, msg: dict[str, Any], _payload: Any) -> Answer:
        with pinned(msg.get("cpu")):  # the CPU the baseline's rounds run on too
            if msg.get("shared"):
                assert self.run is not None and self.peer is not None, (
                    "compile first, then get the peer socket"
                )
                return time_shared(
                    self.run, msg, self.specs, self.outs, self.device, self.peer, self.hooks
                ), None
            assert self.run is not None, "compile first"
            return time_own(
                self.run,
                msg,
                self.specs,
                self.outs,
                self.device,
                self.custom,
                self.kept,
                self.hooks,
            ), None

    def on_predict(self, msg: dict[str, Any], _payload: Any) -> Answer:
        assert self.run is not None and self.sim is not None, "compile first, on a sim device"
        return self.predictor.predict_candidate(
            self.run,
            self.specs,
            msg["workload"],
            msg["seed"],
            self.custom,
            self.sim,
            exact=msg.get("exact") is not False,
            outputs=self.outs,
            scaled=msg.get("scaled") if isinstance(msg.get("scaled"), dict) else None,
            formula=msg.get("formula") if isinstance(msg.get("formula"), dict) else None,
        ), None

    def on_kept(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        return hand_over_kept(self.kept)


def run_for_check(
    fn: Callable[..., Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    repeat: int,
    device: torch.device,
    custom: Any,
) -> tuple[dict[str, Any], bytes]:
    """`repeat` calls on the same freshly drawn inputs, into poisoned memory; their outputs,
    checked for type and packed for the trusted side (a reply and its payload)."""
    return run_packed(
        fn,
        lambda: inputs.correctness_inputs(specs, workload, seed, device, custom),
        repeat,
        specs,
        outs,
        workload["shapes"],
        device,
    )


def hand_over_kept(kept: dict[int, Any]) -> tuple[dict[str, Any], bytes]:
    """The kept outputs of the sampled timed calls, packed, and forgotten here."""
    calls = sorted(kept)
    meta, payload = inputs.pack([t for i in calls for t in kept[i]])
    kept.clear()
    return {"ok": True, "calls": calls, "tensors": meta}, payload


def time_own(
    run: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
    kept: dict[int, Any],
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> dict[str, Any]:
    """Time a round; keep copies of the sampled calls' outputs for the trusted worker. `hooks`
    is asked before every refill, right after the previous call returned."""
    kept.clear()
    shapes = msg["workload"]["shapes"]
    fresh = inputs.FreshInputs(specs, msg["workload"], msg["seed"], device, custom, hooks)
    invalid: list[str] = []

    def keep(index: int, result: Any) -> None:
        try:
            kept[index] = inputs.snapshot(
                inputs.collect_outputs(result, outs, specs, fresh.args or [], shapes, device)
            )
        except inputs.OutputError as exc:
            invalid.append(f"call {index}: {exc}")

    sample = [float(u) for u in msg.get("sample", ())]
    timed = timing.time_round(run, fresh, device, timing.Round.from_request(msg), sample, keep)
    if invalid:
        kept.clear()
        return {"ok": False, "error": invalid[0], "timed_output_invalid": True}
    wanted = {msg["first_index"] + 1 + k for k in timing.picks(sample, len(timed["times_us"]))}
    for index in list(kept):
        if index not in wanted:  # left by a graph attempt that fell back to eager timing
            del kept[index]
    return {"ok": True, **timed, "kept": sorted(kept)}


def time_shared(
    run: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
    peer: socket.socket,
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> dict[str, Any]:
    """Time a round whose inputs the trusted worker writes (shared_io.py): this process gets
    no seed and no sampled calls; every call's outputs go back through shared memory."""
    try:
        fresh = shared_io.SharedInputs(peer, specs, outs, msg["workload"]["shapes"], device, hooks)
    except shared_io.AttachFailed as exc:
        return {"ok": True, "attach_failed": str(exc)}
    try:
        rnd = timing.Round.from_request(msg)
        timed = timing.time_round(run, fresh, device, rnd, (), fresh.keep, fresh.picker)
    finally:
        fresh.finish()
    if fresh.invalid:
        return {"ok": False, "error": fresh.invalid[0], "timed_output_invalid": True}
    return {"ok": True, **timed}
