"""Alternations timed call by call (core/harness/interleaved.py, docs/evaluation.md): where the
baseline's calls wait on the host, each candidate call runs right after a baseline call, on
the one CPU both workers are pinned to, so that both sides meet the host at the same speed.

The protocol tests run the three workers' sides in one process over socketpairs (the trusted
side and the baseline in threads); the end-to-end tests force interleaving on the CPU device
(`Timing(baseline_worker=True, interleave=True)`), where the probe never finds host waits."""

from __future__ import annotations

import itertools
import socket
import threading
import time

import pytest
import torch

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import shared_io, timing
from core.tasks.discovery import find_task
from core.tasks.spec import load_task
from tests.cheats.catalogue import TASKS, by_name, outcome_problems
from tests.test_shared_io import CPU, OUTS, SPECS, WORKLOAD

SIDES = ("baseline", "candidate")


def _serve_interleaved(sample: list[float]) -> tuple[dict[str, socket.socket], dict]:
    ours, theirs = {}, {}
    for side in SIDES:
        ours[side], theirs[side] = socket.socketpair()
    out: dict = {}
    msg = {
        "workload": WORKLOAD,
        "seed": 77,
        "first_index": 100_000,
        "max_calls": 8,
        "timeout_s": 20,
    }
    msgs = {"baseline": {**msg, "sample": []}, "candidate": {**msg, "sample": sample}}

    def trusted() -> None:
        out["outcome"] = shared_io.serve_interleaved(
            theirs,
            msgs,
            SPECS,
            OUTS,
            CPU,
            None,
            lambda serving, reason: out.update(serving=serving),
            {},
        )
        for sock in theirs.values():
            sock.close()

    thread = threading.Thread(target=trusted)
    thread.start()
    out["thread"] = thread
    return ours, out


def _timed_side(
    peer: socket.socket, side: str, log: list, calls: int, spans: list | None = None
) -> threading.Thread:
    spans = [] if spans is None else spans

    def run() -> None:
        fresh = shared_io.SharedInputs(peer, SPECS, OUTS, WORKLOAD["shapes"], CPU)

        def axpy(x: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
            log.append((side, x.data_ptr(), x.clone()))
            spans.append((time.perf_counter(), None))
            time.sleep(0.005)  # the other side's next call must wait for this one
            spans[-1] = (spans[-1][0], time.perf_counter())
            return alpha * x + b

        timing.time_calls(
            axpy,
            fresh,
            CPU,
            50.0,
            calls,
            calls,
            100_000,
            False,
            False,
            (),
            fresh.keep,
            fresh.picker,
        )
        fresh.finish()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_two_sides_calls_alternate_on_the_same_inputs_each_in_a_region_of_its_own():
    peers, out = _serve_interleaved(sample=[0.0, 0.6])
    log: list = []
    spans: list = []  # each call's start and end
    workers = [_timed_side(peers[side], side, log, 4, spans) for side in SIDES]
    for thread in (*workers, out["thread"]):
        thread.join(20)
    assert out["serving"]
    assert [side for side, _, _ in log] == ["baseline", "candidate"] * 4
    # one call at a time: each starts once the one before it has returned
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))
    for k in range(0, 8, 2):  # call k of each side: the same draw
        assert torch.equal(log[k][2], log[k + 1][2])
    assert len({ptr for side, ptr, _ in log if side == "baseline"}) == 1
    assert {ptr for side, ptr, _ in log if side == "baseline"}.isdisjoint(
        ptr for side, ptr, _ in log if side == "candidate"
    )
    base, cand = out["outcome"]["baseline"], out["outcome"]["candidate"]
    assert base[0] == [] and base[2] == 4  # the baseline's outputs are not checked
    calls, got, count, _ = cand
    assert count == 4 and calls == sorted({100_001 + k for k in timing.picks([0.0, 0.6], 4)})
    for index, y in zip(calls, got):
        x, b, alpha = shared_io.inputs.FreshInputs(SPECS, WORKLOAD, 77, CPU, None)(index)
        torch.testing.assert_close(y, alpha * x + b)


@pytest.mark.parametrize(
    "frames, says",
    [
        (
            [{"next": 100_001, "calls": 3}, {"next": 100_001, "done": 100_001}],
            "the candidate's worker asked for the inputs of call 100001 after those of call 100001",
        ),
        (
            [{"next": 100_001, "calls": 3}, {"next": 100_002}, {"end": True, "done": 100_002}],
            "the candidate's worker never reported the outputs of sampled call(s) [100001]",
        ),
    ],
)
def test_a_candidate_that_breaks_the_protocol_drops_out_and_the_baseline_is_served_to_its_end(
    frames, says
):
    """The candidate's worker asks for a call twice, or ends without handing over a sampled
    call's outputs: its outcome is the violation, and the baseline, served on alone, is not
    left waiting (its worker is the batch's)."""
    from core.harness import channel, shared_region

    peers, out = _serve_interleaved(sample=[0.0])
    log: list = []
    baseline = _timed_side(peers["baseline"], "baseline", log, 3)
    cand = peers["candidate"]
    channel.recv(cand, 10)  # the layout
    shared_region.recv_fd(cand)
    for frame in frames:
        channel.send(cand, frame)
        if not frame.get("end"):
            try:
                channel.recv(cand, 10)
            except (channel.ChannelClosed, channel.ChannelTimeout):
                break
    baseline.join(20)
    out["thread"].join(20)
    outcome = out["outcome"]
    assert isinstance(outcome["candidate"], shared_io.ProtocolError)
    assert says in str(outcome["candidate"])
    assert outcome["baseline"][2] == 3 and len(log) == 3


def test_a_call_that_waits_on_the_device_or_outlasts_the_lead_flushes_is_host_bound(monkeypatch):
    """The probe queues about 8x a call's launch time of flushes ahead of it: a call that
    returns only once half of them ran waited on the device inside (on a GPU the flushes run
    while the host launches; here the wait is a sleep standing in for it)."""
    monkeypatch.setattr(timing, "_sync", lambda kind: None)
    flush = torch.zeros(16)
    args: list = []
    assert not timing.waits_on_host(lambda: None, args, flush, 100.0, 70.0, "cuda")
    assert timing.waits_on_host(lambda: time.sleep(0.01), args, flush, 100.0, 70.0, "cuda")
    launch_outlasts_lead = (timing.MAX_LEAD_FLUSHES + 2) * 70.0
    assert timing.waits_on_host(lambda: None, args, flush, launch_outlasts_lead, 70.0, "cuda")
    assert not timing.waits_on_host(lambda: time.sleep(0.01), args, flush, 100.0, 70.0, "cpu")


FORCED = Timing(
    alternations=3,
    budget_ms=20.0,
    min_calls=2,
    max_calls=6,
    baseline_worker=True,
    interleave=True,
)


def test_the_identity_interleaved_scores_its_rounds_and_says_how_it_was_timed():
    task = find_task("activation/silu_mul")
    with Evaluator("cpu", timing=FORCED) as ev:
        result = ev.evaluate(task, task.file("baseline.py"), seed=3)
    assert result.status == "passed", result.stages
    for w in result.workloads:
        interleaved = [r.get("interleaved", False) for r in w.baseline["rounds"]]
        assert interleaved == [False, True, True]  # the first round sizes the others
        assert [r["calls"] for r in w.baseline["rounds"][1:]] == [
            r["calls"] for r in w.candidate["rounds"][1:]
        ]
        assert any("timed call by call" in n for n in w.notes)


@pytest.mark.parametrize("name", ["cache_pointer", "thread_after_return"])
def test_the_timed_calls_checks_hold_in_interleaved_rounds(name):
    """Cheats the sampled timed calls catch are caught as well when those calls alternate."""
    cheat = by_name(name)
    with Evaluator("cpu", timing=FORCED) as ev:
        result = ev.evaluate(load_task(TASKS[cheat.task]), cheat.path)
    assert outcome_problems(cheat.expect, cheat.notes, result) == [], result


HANGS_WHEN_INTERLEAVED = """
import sys
import time

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    frame = sys._getframe(1)
    while frame is not None:  # a timed round past the first: the interleaved ones
        if getattr(frame.f_locals.get("rnd"), "first_index", 0) >= 100_000:
            time.sleep(120)
        frame = frame.f_back
    return torch.add(b, x, alpha=2)
"""


def test_a_candidate_that_hangs_in_an_interleaved_round_leaves_the_next_one_a_clean_baseline(
    tmp_path,
):
    """Its round ends at its limit; the baseline's round, which waited on its turns, is served
    to its end and read, so the batch's next candidate is timed next to the same warm worker."""
    import asyncio

    hang = tmp_path / "hangs.py"
    hang.write_text(HANGS_WHEN_INTERLEAVED)
    axpy = load_task(TASKS["axpy"])
    from tests.test_batch_concurrent import CANDIDATES

    with Evaluator("cpu", timing=FORCED) as ev:
        results = asyncio.run(
            ev.aevaluate_batch(axpy, [hang, CANDIDATES / "axpy_torch.py"], seed=2, profile="train")
        )
    timed = results[0].stages[-1]
    assert (timed.name, timed.status) == ("performance", "timeout"), results[0].stages
    assert "took more than" in (timed.message or "")
    assert results[1].status == "passed", results[1].stages
    assert all(r.get("interleaved") for w in results[1].workloads for r in w.baseline["rounds"][1:])
