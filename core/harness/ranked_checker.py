"""The checker of a multi-rank evaluation: the trusted process that judges every rank.

It gets every rank's seed (the parent derives them, `ranked_worker.rank_seed`; a rank gets
only its own), regenerates every rank's inputs, runs the task's
`reference.run_all(inputs_by_rank)` (every rank's outputs computed in one process without
communication, so the reference never depends on the collective under test) and judges each
rank's outputs with the task's rule or check.py, for the correctness runs and for the sampled
timed calls alike.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.harness import (
    channel,
    checking,
    inputs,
    oploop,
    ranked_inputs,
    ranked_rounds,
    shared_region,
    workers,
)
from core.harness.protocol import Op, Reply, Request
from core.harness.ranked_worker import rank_device, rank_inputs, rank_workload


def checker_main(conn: socket.socket, job: dict[str, Any]) -> None:
    """The trusted process: every rank's inputs, the reference's outputs for all of them, and
    the verdict on each rank's outputs."""
    workdir = Path(job["workdir"])
    workers.redirect_output(workdir / "trusted.log")
    try:
        workers.libc().prctl(workers.PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        device = rank_device(job["device"], 0)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        task_dir = Path(job["task_dir"])
        sources = {
            name: workers.read_task_file(job, name)
            for name in ("reference.py", "inputs.py", "check.py")
        }
        if sources["reference.py"] is None:
            raise FileNotFoundError("the task's reference.py is missing")
        module = workers.module_from_source(
            sources["reference.py"], "arena_reference", str(task_dir / "reference.py")
        )
        run_all = getattr(module, "run_all", None)
        if not callable(run_all):
            raise AttributeError(
                "reference.py of a multi-rank task defines no `run_all(inputs_by_rank)`"
            )
        custom = None
        if sources["inputs.py"] is not None:
            custom = workers.module_from_source(
                sources["inputs.py"], "arena_task_inputs", str(task_dir / "inputs.py")
            ).make_inputs
        check = (
            None
            if sources["check.py"] is None
            else checking.check_from_source(sources["check.py"], str(task_dir / "check.py"))
        )
    except Exception as exc:  # noqa: BLE001 - the parent reports it as an infrastructure fault
        channel.send(conn, workers.error_reply(exc))
        return
    channel.send(conn, {"ok": True, "ready": True})
    world, specs, out_specs, rule = (
        job["world_size"],
        job["inputs"],
        job["outputs"],
        job["correctness"],
    )

    def expected(
        make: Callable[[int], list[Any]],
    ) -> tuple[list[list[Any]], list[list[torch.Tensor]]]:
        by_rank = [make(r) for r in range(world)]
        with torch.no_grad():
            result = run_all(by_rank)
        if not isinstance(result, (list, tuple)) or len(result) != world:
            raise checking.CheckError(
                f"reference.run_all returned {type(result).__name__} for {world} ranks: it must return one output set per rank"
            )
        return by_rank, [list(r) if isinstance(r, (tuple, list)) else [r] for r in result]

    def judge_ranks(
        got: list[list[torch.Tensor]], args: list[list[Any]], want: list[list[torch.Tensor]]
    ) -> list[dict[str, Any]]:
        return [
            workers.compare_all(out_specs, got[r], want[r], args[r], rule, device, check)
            for r in range(world)
        ]

    def judge_timed(
        msg: dict[str, Any], calls: list[int], got: list[list[torch.Tensor]]
    ) -> list[dict[str, Any]]:
        """Each timed call's outputs of every rank (`got[r]`: rank r's, call after call)
        against the reference on every rank's inputs of that call, regenerated."""
        seeds = _rank_seeds(msg, world)
        fresh = [
            inputs.FreshInputs(specs, rank_workload(msg["workload"], r), seeds[r], device, custom)
            for r in range(world)
        ]
        n = len(out_specs)
        results = []
        for j, index in enumerate(calls):
            args, want = expected(functools.partial(rank_inputs, fresh, index))
            results.append(
                {
                    "call": index,
                    "ranks": judge_ranks([g[j * n : (j + 1) * n] for g in got], args, want),
                }
            )
        return results

    def handle(op: str, msg: Request, payload: oploop.Payload) -> tuple[Reply, oploop.Payload]:
        if op == Op.PEER:  # rank r's end of its peer socket, for timed rounds
            peers[int(msg["rank"])] = socket.socket(fileno=shared_region.recv_fd(conn))
            reason = shared_region.cannot_share(device)
            return {"ok": True, "shared": reason is None, "reason": reason}, None
        shapes = msg["workload"]["shapes"]
        per_rank = inputs.expected_meta(out_specs, shapes)
        if op == Op.CHECK:
            runs = int(msg.get("runs", 1))
            try:
                got = _unpack_ranks(msg, payload, per_rank * runs, world)
            except inputs.OutputError as exc:
                return {"ok": True, "malformed": str(exc)}, None
            seeds = _rank_seeds(msg, world)
            args, want = expected(
                lambda r: inputs.correctness_inputs(
                    specs, rank_workload(msg["workload"], r), seeds[r], device, custom
                )
            )
            n = len(out_specs)
            verdicts = [
                judge_ranks([g[i * n : (i + 1) * n] for g in got], args, want) for i in range(runs)
            ]
            return {"ok": True, "runs": verdicts}, None
        if op == Op.CHECK_TIMED:
            calls = [int(i) for i in msg["calls"]]
            try:
                got = _unpack_ranks(msg, payload, per_rank * len(calls), world)
            except inputs.OutputError as exc:
                return {"ok": True, "malformed": str(exc)}, None
            return {"ok": True, "results": judge_timed(msg, calls, got)}, None
        if op == Op.INPUTS:  # every rank's inputs of one correctness run (ranked_inputs.py)
            seeds = _rank_seeds(msg, world)
            metas, chunks = [], []
            for r in range(world):
                meta, data = ranked_inputs.pack_inputs(
                    inputs.correctness_inputs(
                        specs, rank_workload(msg["workload"], r), seeds[r], device, custom
                    )
                )
                metas.append(meta)
                chunks.append(data)
            return {"ok": True, "ranks": metas, "sizes": [len(c) for c in chunks]}, b"".join(chunks)
        if op == Op.SERVE_RANKS:
            return ranked_rounds.serve(conn, msg, peers, job, custom, judge_timed), None
        return oploop.unknown(op), None

    peers: dict[int, socket.socket] = {}
    oploop.serve(conn, handle, error=workers.error_reply)


def _rank_seeds(msg: dict[str, Any], world: int) -> list[int]:
    """Every rank's seed, as the parent derived them (only the checker gets them all)."""
    seeds = msg.get("rank_seeds")
    if not isinstance(seeds, list) or len(seeds) != world:
        raise ValueError(f"the parent sent {seeds!r} as the ranks' seeds; {world} were expected")
    return [int(s) for s in seeds]


def _unpack_ranks(
    msg: dict[str, Any],
    payload: bytes | bytearray | None,
    expected: list[dict[str, Any]],
    world: int,
) -> list[list[torch.Tensor]]:
    """The outputs of every rank, sent as one payload: rank 0's bytes, then rank 1's, …"""
    metas = msg.get("tensors")
    if not isinstance(metas, list) or len(metas) != world:
        raise inputs.OutputError(
            f"outputs of {len(metas) if isinstance(metas, list) else 'no'} ranks; {world} were expected"
        )
    data = memoryview(payload or b"")
    size = inputs.nbytes(expected)
    if len(data) != size * world:
        raise inputs.OutputError(
            f"{len(data)} bytes of outputs for {world} ranks; {size * world} were expected"
        )
    return [
        inputs.unpack(metas[r], data[r * size : (r + 1) * size], expected) for r in range(world)
    ]
