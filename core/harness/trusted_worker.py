"""The trusted worker: the reference and the baseline, never the candidate.

Forked from the harness parent before any candidate code exists, it reads the task's files
(checked against the hashes in the job: worker_tools.read_task_file), computes the reference's
outputs in full float32 (`full_fp32`), judges the candidate's outputs (checking.py, with the
pools and the independence proof of trusted_checks.py), and draws the inputs of the runs and
timed rounds that go through shared memory (shared_check.py, shared_io.py). It times the
baseline only where a test or a measurement asks for that old path (`on_time`). It is
non-dumpable: no same-user process may read its memory.

Its ops (protocol.Op) each have a handler of `TrustedWorker`, answered by oploop.serve: expect,
check, check_timed, time, sync, trim, sim_values, predict_baseline answer once; stage and
probe_region answer themselves (a descriptor may follow the reply), regions answers with what
it holds (introspection), serve_round answers when
the round's layout is sent and again with its verdicts, and collect, drop and release take no
reply (the parent sends the next request after them).
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.harness import (
    autotune,
    channel,
    checking,
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
from core.harness.protocol import Op
from core.harness.trusted_checks import ReferenceCache, compare_all, independence, pool_key
from core.harness.trusted_task import TaskCode, baseline_impl, load_task
from core.harness.worker_process import PR_SET_DUMPABLE, libc, print_exc, redirect_output
from core.harness.worker_tools import error_reply, sync

Answer = oploop.Answer | None  # a reply, or None: answered already, or no reply
Entry = tuple[list[Any], list[torch.Tensor]]  # (inputs, reference outputs)
# Device memory the allocator may keep free after a reference (its float32 temporaries) before
# it is given back. A batch has one trusted worker per slot: each kept the peak of its largest
# reference, and five of them (38 and 29 GiB among them) left a member's reference no room on the
# H200 (fp8_blockscale_grouped_gemm, 2026-12-02).
REFERENCE_SLACK_BYTES = 1 << 30


def install_trusted_triton(job: dict[str, Any]) -> None:
    """Triton as a trusted process of the harness runs it (this worker, the baseline's)."""
    # The baseline's autotuners under the candidate's budget (autotune.py): the same code is
    # tuned alike on both sides in every profile.
    autotune.install(
        job.get("autotune_configs"),
        autotune.AutotuneLog(),
        rep_ms=job.get("autotune_rep_ms"),
        compile_threads=autotune.compile_threads(job, job["device"].get("type", "cpu")),
    )
    triton_trace.install()  # the trace on only
    # Triton's cache in this process's memory (jit_cache.py): what the parent's store holds
    # (inherited at fork), and what it compiles itself; never what lies on a shared disk.
    jit_cache.TrustedCache.install(
        jit_cache.STORE.trusted,
        os.path.join(tempfile.gettempdir(), jit_cache.TRUSTED_ROOT),
        job["device"].get("type", "cpu"),
    )


def give_back_slack(device: torch.device) -> None:
    """Return the allocator's free blocks to the device where they pass REFERENCE_SLACK_BYTES:
    what the reference freed is of no use to this worker's next request, and other workers of
    a batch may need it. Never in a timed process: only the trusted worker calls this."""
    if device.type != "cuda":
        return
    if (
        torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        > REFERENCE_SLACK_BYTES
    ):
        torch.cuda.empty_cache()


def trusted_main(conn: socket.socket, job: dict[str, Any]) -> None:
    trace.set_role("trusted")
    workdir = Path(job["workdir"])
    redirect_output(workdir / "trusted.log")
    try:
        libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no same-user process may read its memory
    except (OSError, AttributeError):
        pass
    install_trusted_triton(job)
    try:
        with trace.span("load_task"):
            task = load_task(job)
    except Exception as exc:  # noqa: BLE001 - the parent reports it as an infrastructure fault
        channel.send(conn, error_reply(exc))
        return
    channel.send(conn, {"ok": True, "ready": True})
    oploop.serve(conn, TrustedWorker(conn, job, task).handle, error=error_reply)


class TrustedWorker:
    """What the trusted worker keeps between requests, and a handler per op."""

    def __init__(self, conn: socket.socket, job: dict[str, Any], task: TaskCode):
        self.conn, self.job, self.task = conn, job, task
        self.device, self.custom, self.check = task.device, task.custom, task.check
        self.reference_run = task.reference_run
        # Evidence of stochastic outputs, per workload, over all the checked calls of one
        # candidate: a batch's candidates share this worker, so each `member` has a pool of its own.
        self.pools: dict[str, checking.Pool] = {}
        self.specs, self.out_specs = job["inputs"], job["outputs"]
        self.rule = job["correctness"]
        self.expected: dict[str, Entry] = {}  # key -> (inputs, reference outputs)
        # A batch's candidates share the job's workloads and seeds: each (workload, seed)'s inputs
        # and reference outputs are computed once and kept, within the job's byte budget.
        self.references = ReferenceCache(int(job.get("reference_cache_bytes") or 0))
        self.seen: dict[str, list[tuple[int, list[str], list[torch.Tensor]]]] = {}
        # To the workers whose timed rounds this one serves (shared_io.py), by role: the
        # candidate's worker and the baseline's (baseline_worker.py).
        self.peers: dict[str, socket.socket] = {}
        self.pairs = shared_io.RoundPairs()  # the alternation's region, shared by both sides
        # Correctness runs over shared memory (shared_check.py), by member + `workload#seed`: the
        # reference (or why it failed) of each staged run, and the outputs collected from its slots.
        self.regions = shared_check.CheckRegions(self.device)
        self.pending: dict[str, Entry | str] = {}
        self.collected: dict[str, list[torch.Tensor]] = {}
        self.handle = oploop.dispatch(
            {
                Op.EXPECT.value: self.on_expect,
                Op.STAGE.value: self.on_stage,
                Op.PROBE_REGION.value: self.on_probe_region,
                Op.COLLECT.value: self.on_collect,
                Op.DROP.value: self.on_drop,
                Op.RELEASE.value: self.on_release,
                Op.REGIONS.value: self.on_regions,
                Op.CHECK.value: self.on_check,
                Op.JUDGE.value: self.on_judge,
                Op.CHECK_TIMED.value: self.on_check_timed,
                Op.PEER.value: self.on_peer,
                Op.SERVE_ROUND.value: self.on_serve_round,
                Op.TIME.value: self.on_time,
                Op.SYNC.value: self.on_sync,
                Op.TRIM.value: self.on_trim,
                Op.JIT.value: self.on_jit,
                Op.SIM_VALUES.value: self.on_sim_values,
                Op.PREDICT_BASELINE.value: self.on_predict_baseline,
                Op.SIM_SHARE.value: self.on_sim_share,
            }
        )

    # --- helpers ---------------------------------------------------------------------------

    def pool_of(self, msg: dict[str, Any]) -> checking.Pool:
        member = msg.get("member")
        return self.pools.setdefault(
            member if isinstance(member, str) else "", checking.Pool(self.task.pooled)
        )

    def reference(self, args: list[Any]) -> list[torch.Tensor]:
        with torch.no_grad():
            result = self.reference_run(*args)
        give_back_slack(self.device)
        return list(result) if isinstance(result, (tuple, list)) else [result]

    def send_with_fd(self, reply: dict[str, Any], fds: list[int]) -> None:
        """A reply, followed by the region's descriptor where it is new (shared_check.py)."""
        if fds:
            shared_region.send_fd(self.conn, reply, fds[0])
            shared_check.close_fds(fds)
        else:
            channel.send(self.conn, reply)

    def verdict(
        self,
        msg: dict[str, Any],
        got: list[torch.Tensor],
        want: list[torch.Tensor],
        args: list[Any],
    ) -> dict[str, Any]:
        """One call's outputs against the reference, pooled with its workload's other calls."""
        return self.pool_of(msg).add(
            pool_key(msg["workload"]),
            compare_all(self.out_specs, got, want, args, self.rule, self.device, self.check),
        )

    def judge_timed(
        self, msg: dict[str, Any], calls: list[int], got: list[torch.Tensor]
    ) -> list[dict[str, Any]]:
        """The sampled timed calls' outputs against the reference on privately regenerated inputs."""
        fresh = inputs.FreshInputs(
            self.specs, msg["workload"], msg["seed"], self.device, self.custom
        )
        n = len(self.out_specs)
        results = []
        for j, index in enumerate(calls):
            args = fresh(index)
            ref = self.reference(args)
            verdicts = self.verdict(msg, got[j * n : (j + 1) * n], ref, args)
            results.append({"call": index, "outputs": verdicts})
        return results

    # --- correctness -------------------------------------------------------------------------

    def on_expect(self, msg: dict[str, Any], _payload: Any) -> Answer:
        self.expected.clear()  # one pending check at a time; a failed run leaves none behind
        if msg["key"] not in self.references:
            args = inputs.correctness_inputs(
                self.specs, msg["workload"], msg["seed"], self.device, self.custom
            )
            entry = (args, self.reference(args))
            sync(self.device)
            if not self.references.add(msg["key"], entry):
                self.expected[msg["key"]] = entry
        return {"ok": True}, None

    def on_stage(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """Draw a run's inputs (or take them from the cache), write them into the candidate
        worker's region and answer; then compute the reference, while the candidate runs."""
        if msg.get("first"):  # a new stage: what an earlier one left unjudged goes
            self.pending.clear()
            self.collected.clear()
        key, pkey = msg["key"], str(msg.get("member") or "") + msg["key"]
        cached = key in self.references
        args = (
            self.references.get(key)[0]
            if cached
            else inputs.correctness_inputs(
                self.specs, msg["workload"], msg["seed"], self.device, self.custom
            )
        )
        reply: dict[str, Any] = {"ok": True}
        fds: list[int] = []
        if isinstance(msg.get("region"), str):
            try:
                header, fds = self.regions.write(
                    msg["region"],
                    str(msg.get("member") or ""),
                    args,
                    int(msg.get("repeat", 1)),
                    self.out_specs,
                    msg["workload"]["shapes"],
                )
                reply.update(header)
            except shared_region.Unshareable as exc:
                reply["reason"] = str(exc)
            except shared_region.RegionOOM as exc:
                reply["oom"] = str(exc)
        self.send_with_fd(reply, fds)
        if cached:
            return None
        try:
            entry = (args, self.reference(args))
            sync(self.device)
        except Exception as exc:  # noqa: BLE001 - said when the run is judged (replied already)
            self.pending[pkey] = f"{type(exc).__name__}: {exc}"
            return None
        if not self.references.add(key, entry):
            self.pending[pkey] = entry
        return None

    def on_probe_region(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """Mapped before the candidate's code runs (runner.py)."""
        try:
            header, fds = self.regions.write(
                msg["region"], str(msg.get("member") or ""), [], 1, [], {}
            )
        except shared_region.Unshareable as exc:
            return {"ok": True, "reason": str(exc)}, None
        except shared_region.RegionOOM as exc:
            return {"ok": True, "oom": str(exc)}, None
        self.send_with_fd({"ok": True, **header}, fds)
        return None

    def on_collect(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """No reply: the parent sends the worker's next run after it."""
        self.collected[str(msg.get("member") or "") + msg["key"]] = self.regions.snapshot(
            msg["region"]
        )
        return None

    def on_drop(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """No reply: a run that will not be judged."""
        pkey = str(msg.get("member") or "") + msg["key"]
        self.pending.pop(pkey, None)
        self.collected.pop(pkey, None)
        return None

    def on_release(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """No reply: the candidate's worker unmapped it, could not map it, or (`gone`) is dead."""
        try:
            if msg.get("kept"):
                self.regions.keep_until_gone(msg["region"])
            else:
                self.regions.release(msg["region"], gone=bool(msg.get("gone")))
        except Exception:  # noqa: BLE001 - an op without a reply must not answer: logged
            print_exc()
        return None

    def on_regions(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """What this worker holds (introspection: shared_check.CheckRegions.held)."""
        return {"ok": True, **self.regions.held()}, None

    def _staged(
        self, msg: dict[str, Any]
    ) -> tuple[str, list[Any], list[torch.Tensor], int, dict[str, list[int]]]:
        """A run's key, its inputs and reference outputs, its number of runs and its shapes."""
        pkey = str(msg.get("member") or "") + msg["key"]
        staged = self.pending.pop(pkey, None)
        if isinstance(staged, str):
            raise RuntimeError(f"the reference failed: {staged}")
        args, want = (
            staged
            if staged is not None
            else self.expected.pop(msg["key"])
            if msg["key"] in self.expected
            else self.references.get(msg["key"])
        )
        return pkey, args, want, int(msg.get("runs", 1)), msg["workload"]["shapes"]

    def _verdicts(
        self,
        msg: dict[str, Any],
        args: list[Any],
        want: list[torch.Tensor],
        got: list[torch.Tensor],
        runs: int,
    ) -> Answer:
        n = len(self.out_specs)
        per_run = [self.verdict(msg, got[r * n : (r + 1) * n], want, args) for r in range(runs)]
        found = independence(
            self.seen.setdefault(msg["workload_key"], []),
            msg["seed"],
            self.out_specs,
            got[:n],
            want,
        )
        return {"ok": True, "runs": per_run, "independent": found}, None

    def on_check(self, msg: dict[str, Any], payload: Any) -> Answer:
        """The outputs the candidate's worker sent, against the reference."""
        _, args, want, runs, shapes = self._staged(msg)
        try:
            got = inputs.unpack(
                msg.get("tensors"), payload, inputs.expected_meta(self.out_specs, shapes) * runs
            )
        except inputs.OutputError as exc:
            return {"ok": True, "malformed": str(exc)}, None
        return self._verdicts(msg, args, want, got, runs)

    def on_judge(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """The outputs the candidate's worker wrote into its slots, against the reference."""
        pkey, args, want, runs, _ = self._staged(msg)
        return self._verdicts(msg, args, want, self.collected.pop(pkey), runs)

    # --- timed rounds ------------------------------------------------------------------------

    def on_check_timed(self, msg: dict[str, Any], payload: Any) -> Answer:
        calls = [int(i) for i in msg["calls"]]
        shapes = msg["workload"]["shapes"]
        try:
            got = inputs.unpack(
                msg.get("tensors"),
                payload,
                inputs.expected_meta(self.out_specs, shapes) * len(calls),
            )
        except inputs.OutputError as exc:
            return {"ok": True, "malformed": str(exc)}, None
        return {"ok": True, "results": self.judge_timed(msg, calls, got)}, None

    def on_peer(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """A worker's end of its socket to this one, sent by the parent (`for`: `candidate`,
        the default, or `baseline`); a new one replaces the last of that role."""
        role = str(msg.get("for") or "candidate")
        old = self.peers.pop(role, None)
        if old is not None:
            old.close()
        self.peers[role] = socket.socket(fileno=shared_region.recv_fd(self.conn))
        return {
            "ok": True,
            "shared": shared_region.cannot_share(self.device) is None,
            "reason": shared_region.cannot_share(self.device),
        }, None

    def on_jit(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """What this worker compiled since it last said (jit_cache.py), for the parent's store."""
        fresh, jit_cache.TrustedCache.fresh = jit_cache.TrustedCache.fresh, {}
        return jit_cache.pack(fresh)

    def on_serve_round(self, msg: dict[str, Any], _payload: Any) -> Answer:
        with shared_io.one_thread(self.device):
            return self._serve_round(msg)

    def _serve_round(self, msg: dict[str, Any]) -> Answer:
        if msg.get("interleave"):
            return self.serve_interleaved(msg)
        peer = self.peers.get(str(msg.get("peer") or "candidate"))
        assert peer is not None, "no peer socket"
        orphan = self._orphan(msg.get("consumer"))
        try:
            calls, got, count, serve_s = shared_io.serve_round(
                peer,
                msg,
                self.specs,
                self.out_specs,
                self.device,
                self.custom,
                self.ready,
                orphan,
                self.free_stale,
                self.pairs,
            )
        except shared_io.ProtocolError as exc:
            return {"ok": True, "violation": str(exc)}, None
        except shared_io.AttachFailed as exc:
            return {"ok": True, "attach_failed": str(exc)}, None
        if not count:
            return None
        results = self.judge_timed(msg, calls, got)
        return {"ok": True, "calls": count, "serve_s": serve_s, "results": results}, None

    def serve_interleaved(self, msg: dict[str, Any]) -> Answer:
        """Both sides' rounds of an alternation, call by call (shared_io.serve_interleaved):
        the candidate's verdict as serve_round's, the baseline's calls and refills beside it."""
        peers = {side: self.peers.get(side) for side in ("baseline", "candidate")}
        assert all(peers.values()), "no peer socket"
        msgs = {"baseline": {**msg, "sample": []}, "candidate": msg}
        consumers = {"baseline": msg.get("baseline_consumer"), "candidate": msg.get("consumer")}
        orphans = {side: self._orphan(consumers[side]) for side in consumers}
        self.pairs.clear()  # each side has its own region here
        outcome = shared_io.serve_interleaved(
            peers,  # type: ignore[arg-type]
            msgs,
            self.specs,
            self.out_specs,
            self.device,
            self.custom,
            self.ready,
            orphans,
            self.free_stale,
        )
        if not outcome:
            return None
        base = outcome["baseline"]
        baseline = (
            {"calls": base[2], "serve_s": base[3]}
            if isinstance(base, tuple)
            else {"violation": f"{type(base).__name__}: {base}"}
        )
        got = outcome["candidate"]
        if isinstance(got, shared_io.ProtocolError):
            return {"ok": True, "violation": str(got), "baseline": baseline}, None
        if isinstance(got, shared_io.AttachFailed):
            return {"ok": True, "attach_failed": str(got), "baseline": baseline}, None
        calls, kept, count, serve_s = got  # type: ignore[misc]
        results = self.judge_timed(msg, calls, kept)
        return {
            "ok": True,
            "calls": count,
            "serve_s": serve_s,
            "results": results,
            "baseline": baseline,
        }, None

    def ready(self, serving: bool, reason: str | None) -> None:
        """The parent's answer to serve_round once the layouts are sent (or none can be)."""
        channel.send(self.conn, {"ok": True, "serving": serving, "reason": reason})

    def _orphan(self, consumer: Any) -> Callable[[shared_region.Region], None] | None:
        """Where a region of a round its worker left goes: kept until that worker is dead."""
        if not isinstance(consumer, str):
            return None
        return lambda region: self.regions.orphan(consumer, region)

    def free_stale(self) -> None:
        """Before a region's allocation is retried: every stale region, the kept pair's too."""
        self.pairs.clear()
        self.regions.free_stale("")

    def on_time(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """The baseline timed here on its own inputs: the old path, only where the job's
        `timing.baseline_worker` is false (a test, a before/after measurement). Every timed
        device's baseline has a worker of its own (baseline_worker.py)."""
        fresh = inputs.FreshInputs(
            self.specs, msg["workload"], msg["seed"], self.device, self.custom
        )
        timed = timing.time_round(
            self.task.baseline_run, fresh, self.device, timing.Round.from_request(msg)
        )
        return {"ok": True, **timed, "impl": baseline_impl(self.task.baseline_module)}, None

    def on_trim(self, _msg: dict[str, Any], _payload: Any) -> Answer:
        """Give the device back what is kept only for speed: the cached references and the
        allocator's free blocks (a batch member ran out of memory beside them: concurrent.py).
        A later run computes its reference again."""
        self.references = ReferenceCache(self.references.budget)
        self.expected.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        return {"ok": True}, None

    def on_sync(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """A batch's next candidate starts from a clean channel (batch.py)."""
        return {"ok": True, "sync": msg.get("nonce")}, None

    # --- sim: devices ------------------------------------------------------------------------

    def on_sim_values(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """A sim: device's counted call against the reference."""
        from core.harness.sim import reference as sim_reference

        return sim_reference.serve(
            self.reference_run, self.job, self.custom, self.check, self.task.sources, msg
        ), None

    def on_sim_share(self, msg: dict[str, Any], _payload: Any) -> Answer:
        """The share of the task's byte formula a sim: device's counted call needs on its
        drawn inputs (reference.py's `bytes_share`), or None where the task does not say."""
        from core.harness.sim import gpu_inputs as sim_gpu_inputs

        return {
            "ok": True,
            "share": sim_gpu_inputs.drawn_share(
                self.task.bytes_share, self.specs, msg["workload"], msg["seed"], self.custom
            ),
        }, None

    def on_predict_baseline(self, msg: dict[str, Any], _payload: Any) -> Answer:
        from core.harness.sim import predict as sim_predict

        task = self.task
        reply = sim_predict.predict_baseline(
            task.baseline_run, self.specs, msg["workload"], msg["seed"], self.custom, msg["formula"]
        )
        impl = baseline_impl(task.baseline_module)
        return ({**reply, "impl": impl} if isinstance(reply, dict) else reply), None
