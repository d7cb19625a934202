"""Timed rounds over shared memory (core/harness/shared_io.py, docs/integrity.md, issue 23):
the trusted worker draws each call's inputs into memory both workers map and alone knows the
round's seed and its sampled calls; the candidate's worker copies every call's outputs back.

The protocol tests run both sides in one process over a socketpair (the trusted side in a
thread); the end-to-end tests evaluate on the CPU device."""

from __future__ import annotations

import fcntl
import os
import socket
import threading

import pytest
import torch

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import channel, inputs, shared_io, shared_region, timing
from core.tasks.spec import load_task
from tests.cheats.catalogue import TASKS, by_name, outcome_problems

SPECS = [
    {"name": "x", "dtype": "float32", "shape": ["N"]},
    {"name": "b", "dtype": "float32", "shape": ["N"], "init": {"dist": "uniform"}},
    {"name": "alpha", "value": 2.0},
]
OUTS = [{"name": "y", "dtype": "float32", "shape": ["N"]}]
WORKLOAD = {"axes": {"N": 1000}, "shapes": {"x": [1000], "b": [1000], "y": [1000]}}
CPU = torch.device("cpu")


def _serve(sample: list[float], max_calls: int = 10) -> tuple[socket.socket, dict]:
    ours, theirs = socket.socketpair()
    out: dict = {}
    msg = {
        "workload": WORKLOAD,
        "seed": 1234,
        "first_index": 0,
        "max_calls": max_calls,
        "sample": sample,
        "timeout_s": 20,
    }

    def trusted() -> None:
        try:
            out["kept"] = shared_io.serve_round(
                theirs,
                msg,
                SPECS,
                OUTS,
                CPU,
                None,
                lambda serving, reason: out.update(serving=serving),
            )
        except shared_io.ProtocolError as exc:
            out["violation"] = str(exc)
        theirs.close()

    thread = threading.Thread(target=trusted)
    thread.start()
    out["thread"] = thread
    return ours, out


def _axpy(x: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    return alpha * x + b


def test_an_honest_round_hands_the_sampled_calls_outputs_to_the_trusted_side_and_no_seed_to_the_candidate():
    peer, out = _serve(sample=[0.0, 0.55])
    fresh = shared_io.SharedInputs(peer, SPECS, OUTS, WORKLOAD["shapes"], CPU)
    assert fresh.args[2] == 2.0 and all(isinstance(a, torch.Tensor) for a in fresh.args[:2])
    assert not any(k == "seed" for k in vars(fresh))  # nothing here could regenerate the round
    timed = timing.time_calls(
        _axpy, fresh, CPU, 5.0, 4, 4, 0, False, False, (), fresh.keep, fresh.picker
    )
    fresh.finish()
    out["thread"].join(10)
    assert out["serving"] and "violation" not in out, out
    calls, got, count, _ = out["kept"]
    assert count == len(timed["times_us"]) == 4
    assert calls == sorted({1 + k for k in timing.picks([0.0, 0.55], 4)}) == [1, 3]
    regen = inputs.FreshInputs(
        SPECS, WORKLOAD, 1234, CPU, None
    )  # the trusted side's private regeneration
    for index, y in zip(calls, got):
        x, b, alpha = regen(index)
        torch.testing.assert_close(y, alpha * x + b)


def test_every_call_sees_fresh_inputs_at_the_same_addresses():
    peer, out = _serve(sample=[0.5])
    fresh = shared_io.SharedInputs(peer, SPECS, OUTS, WORKLOAD["shapes"], CPU)
    seen = []

    def record(x, b, alpha):
        seen.append((x.data_ptr(), x.clone()))
        return alpha * x + b

    timing.time_calls(record, fresh, CPU, 5.0, 3, 3, 0, False, False, (), fresh.keep, fresh.picker)
    fresh.finish()
    out["thread"].join(10)
    assert len({ptr for ptr, _ in seen}) == 1
    assert not torch.equal(seen[0][1], seen[1][1]) and not torch.equal(seen[1][1], seen[2][1])


def _raw_round(peer: socket.socket, frames: list[dict]) -> None:
    channel.recv(peer, 10)  # the layout
    os.close(shared_region.recv_fd(peer))
    for frame in frames:
        channel.send(peer, frame)
        if not frame.get("end"):
            try:
                channel.recv(peer, 10)
            except channel.ChannelClosed:
                return


@pytest.mark.parametrize(
    "frames, says",
    [
        (
            [{"next": 1, "calls": 3}, {"next": 1, "done": 1}],
            "asked for the inputs of call 1 after those of call 1",
        ),
        ([{"next": 1, "calls": 3}, {"next": 2, "done": 2}], "reported the outputs of call 2"),
        (
            [{"next": 1, "calls": 3}, {"next": 2}, {"next": 3}, {"end": True, "done": 3}],
            "never reported the outputs of sampled call(s) [1, 2]",
        ),
        ([{"next": 1, "calls": 999}], "announced 999 calls"),
        ([{"next": "x"}], "where a call's request was expected"),
    ],
)
def test_a_candidate_worker_that_breaks_the_protocol_is_caught(frames, says):
    """The harness code in the candidate's process never does these; a candidate that drives the
    peer socket itself (to see inputs twice, or to skip the checked calls) is a violation."""
    peer, out = _serve(sample=[0.0, 0.4])
    _raw_round(peer, frames)
    peer.close()
    out["thread"].join(10)
    assert says in out.get("violation", ""), out


def test_the_shared_memory_cannot_be_shrunk_under_the_trusted_worker():
    region, _, fds = shared_region.create_region(4096, CPU)
    try:
        seals = fcntl.fcntl(fds[0], fcntl.F_GET_SEALS)
        assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_SEAL
        with pytest.raises(OSError):
            os.ftruncate(fds[0], 0)
    finally:
        os.close(fds[0])
        region.close()


FAST = Timing(alternations=2, budget_ms=40.0, min_calls=1, max_calls=20)


@pytest.fixture(scope="module")
def task():
    return load_task(TASKS["axpy"])


def test_a_candidate_searching_frames_and_gc_for_the_rounds_secrets_finds_nothing(task):
    """`seed_hunt` returns wrong outputs once it finds a round's seed or sampled calls: it
    passes with the trusted worker drawing the inputs, and is caught on the old path (where the
    seed and the sample were in its process: the probe does find them)."""
    cheat = by_name("seed_hunt")
    with Evaluator("cpu", timing=FAST) as evaluator:
        result = evaluator.evaluate(task, cheat.path)
    assert outcome_problems(cheat.expect, cheat.notes, result) == [], result
    assert not any(
        "inputs drawn in the candidate's process" in n
        for w in result.workloads
        for n in (w.notes or [])
    )
    with Evaluator("cpu", timing=Timing(**{**FAST.__dict__, "shared_io": False})) as evaluator:
        old = evaluator.evaluate(task, cheat.path)
    assert old.status == "failed" and any(
        f.startswith("timed_output_mismatch:") for f in old.integrity_flags
    ), old.integrity_flags
