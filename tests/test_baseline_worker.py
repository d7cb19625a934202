"""The baseline timed as the candidate is (core/harness/baseline_worker.py, docs/fidelity.md):
in a worker of its own, its inputs served by the trusted worker over the same protocol, each
alternation's two rounds on one region, and timing that does not stop inside one mode.

The protocol tests run in one process over socketpairs (the trusted side in a thread); the
end-to-end tests evaluate on the CPU device, where the baseline has a worker of its own too:
timed in the trusted worker on its own inputs while the candidate's were served, the task's
baseline submitted as the candidate read 0.08-0.89 of itself on 2 cores (docs/fidelity.md)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading

import pytest
import torch

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import shared_io, timing, trace
from core.tasks.discovery import find_task
from core.tasks.spec import load_task
from tests.test_shared_io import CPU, OUTS, SPECS, WORKLOAD, _axpy

TASK = "activation/silu_mul"


def _serve_paired(pairs: shared_io.RoundPairs, pair: str) -> tuple[socket.socket, dict]:
    ours, theirs = socket.socketpair()
    out: dict = {}
    msg = {
        "workload": WORKLOAD,
        "seed": 99,
        "first_index": 200_000,
        "max_calls": 6,
        "sample": [],
        "timeout_s": 20,
        "pair": pair,
    }

    def trusted() -> None:
        out["served"] = shared_io.serve_round(
            theirs, msg, SPECS, OUTS, CPU, None, lambda *_: None, pairs=pairs
        )
        theirs.close()

    out["thread"] = threading.Thread(target=trusted)
    out["thread"].start()
    return ours, out


def _one_side(pairs: shared_io.RoundPairs, pair: str) -> list[torch.Tensor]:
    """A consumer's round: the inputs of each call it was served, copied."""
    peer, out = _serve_paired(pairs, pair)
    fresh = shared_io.SharedInputs(peer, SPECS, OUTS, WORKLOAD["shapes"], CPU)
    seen: list[torch.Tensor] = []

    def record(*args: object) -> torch.Tensor:
        seen.append(args[0].clone())  # type: ignore[union-attr]
        return _axpy(*args)  # type: ignore[arg-type]

    timing.time_calls(
        record, fresh, CPU, 5.0, 4, 4, 200_000, False, False, (), fresh.keep, fresh.picker
    )
    fresh.finish()
    out["thread"].join(10)
    peer.close()
    return seen


def test_both_sides_of_an_alternation_run_on_one_region_and_see_the_same_inputs(monkeypatch):
    made: list[int] = []
    create = shared_io.create_region

    def counting(nbytes, device, free_stale=None):
        made.append(nbytes)
        return create(nbytes, device, free_stale)

    monkeypatch.setattr(shared_io, "create_region", counting)
    pairs = shared_io.RoundPairs()
    baseline = _one_side(pairs, "open")
    assert pairs.held is not None  # kept for the candidate's round of this alternation
    candidate = _one_side(pairs, "close")
    assert len(made) == 1, "the candidate's round allocated a region of its own"
    assert pairs.held is None  # freed once both sides ran on it
    assert len(baseline) == len(candidate) == 4  # the four timed calls (no warm-up on the CPU)
    for b, c in zip(baseline, candidate):
        assert torch.equal(b, c)


def test_a_kept_region_of_another_workload_or_call_is_freed_not_reused(monkeypatch):
    made: list[int] = []
    create = shared_io.create_region
    monkeypatch.setattr(
        shared_io, "create_region", lambda n, d, f=None: made.append(n) or create(n, d, f)
    )
    pairs = shared_io.RoundPairs()
    _one_side(pairs, "open")
    held = pairs.held
    assert held is not None and held.fd is not None
    stale = held.key
    held.key = (stale[0], stale[1] + 1, stale[2])  # as if the baseline had timed another round
    _one_side(pairs, "close")
    assert len(made) == 2 and pairs.held is None
    with pytest.raises(OSError):
        os.fstat(held.fd if held.fd is not None else -1)  # its descriptor was closed


def test_timing_does_not_stop_while_the_alternations_disagree_on_the_ratio():
    walls = {
        "baseline": [{"median_us": 93.0}, {"median_us": 93.2}],
        "candidate": [{"median_us": 146.0}, {"median_us": 92.8}],
    }
    tight = {"candidate": [100.0] * 200, "baseline": [100.0] * 200}  # each median known to ±0%
    assert not timing.settled(walls, tight, 0.01)  # a bimodal pair of rounds: time on
    walls["candidate"][0]["median_us"] = 93.1
    assert timing.settled(walls, tight, 0.01)
    assert timing.round_ratios(walls) == pytest.approx([93.0 / 93.1, 93.2 / 92.8])


def test_rounds_whose_ratios_have_not_settled_are_extended_up_to_the_extra_rounds():
    """`alternations` rounds at most when the ratio has settled (and as few as `min_rounds`),
    up to `extra_rounds` more while it has not, and only while another round fits the stage."""
    plan = (4, 2, 4, 0.01)  # train on a GPU: 4 rounds, at least 2, up to 4 more

    def rounds_run(settled_after: int | None, room: bool = True, plan=plan) -> int:
        done = 0
        while True:
            done += 1
            more = timing.more_rounds(
                done,
                plan,
                lambda done=done: settled_after is not None and done >= settled_after,
                lambda: room,
            )
            if not more:
                return done

    assert rounds_run(settled_after=1) == 2  # never fewer than min_rounds
    assert rounds_run(settled_after=3) == 3
    assert rounds_run(settled_after=6) == 6  # past the planned four while unsettled
    assert rounds_run(settled_after=None) == 8  # at most four more
    assert rounds_run(settled_after=None, room=False) == 4  # no room left in the stage
    assert rounds_run(settled_after=None, plan=(4, 2, 0, 0.01)) == 4  # no extra rounds asked
    assert (
        rounds_run(settled_after=None, plan=(4, 2, 4, 0.0)) == 4
    )  # target 0: every round, no more


def test_the_candidates_round_times_as_many_calls_as_the_baselines_unless_far_slower():
    """Both sides' medians over the same inputs: call k of an alternation gets the same drawn
    inputs on both sides, so a workload whose cost depends on them (drawn lengths, routing)
    is compared call for call. A candidate too slow to time them within MATCH_SLACK budgets
    times what its budget holds."""
    rnd = timing.Round(budget_ms=10.0, min_calls=3, max_calls=64, first_index=0, graph=False)
    assert rnd.calls_for(2.3) == 4  # its own count: 10 ms of 2.3 ms calls
    matched = timing.Round(10.0, 3, 64, 0, False, match_calls=5)
    assert matched.calls_for(2.3) == 5  # the baseline timed 5: so does the candidate
    assert matched.calls_for(9.0) == 3  # 5 calls of 9 ms: over MATCH_SLACK (4) budgets
    assert (
        timing.Round(10.0, 3, 64, 0, False, match_calls=500).calls_for(0.001) == 64
    )  # never past max


def test_a_round_with_a_wall_cap_counts_each_calls_refill_and_flushes():
    """`full` times 20 ms of device time a round; a 10 µs kernel whose refill and flushes cost
    the host 0.6 ms a call would fill it with 1,000 calls (0.6 s). The round's wall cap sizes
    it by what a call costs the host's clock instead; the candidate still matches the
    baseline's count (the cap shaped that count already)."""
    rnd = timing.Round.from_request(
        {"budget_ms": 20.0, "min_calls": 3, "max_calls": 1000, "first_index": 0, "graph": False}
    )
    assert rnd.wall_ms is None and rnd.calls_for(0.01, 0.6) == 1000  # no cap: device time only
    capped = timing.Round.from_request(
        {
            "budget_ms": 20.0,
            "min_calls": 3,
            "max_calls": 1000,
            "first_index": 0,
            "graph": False,
            "round_wall_ms": 80.0,
        }
    )
    assert capped.wall_ms == 80.0
    assert capped.calls_for(0.01, 0.6) == 133  # 80 ms of 0.6 ms calls
    assert capped.calls_for(2.0, 2.5) == 10  # a 2 ms kernel: its device budget binds first
    assert capped.calls_for(0.01, 100.0) == 3  # never fewer than min_calls
    assert capped.calls_for(0.01) == 1000  # no measured wall cost: the budget alone
    assert (
        timing.Round(20.0, 3, 1000, 0, False, match_calls=133, wall_ms=80.0).calls_for(0.01, 0.6)
        == 133
    )


def test_full_caps_a_rounds_wall_clock_on_a_gpu_and_train_keeps_its_call_cap():
    full, train = Timing.for_device("cuda", "full"), Timing.for_device("cuda", "train")
    assert full.round_wall_ms == 80.0 and full.to_job()["round_wall_ms"] == 80.0
    assert train.round_wall_ms is None and train.max_calls == 32
    assert Timing.for_device("cpu", "full").round_wall_ms is None  # the CPU's rounds are wall time


def test_a_timed_round_of_the_identity_matches_the_baselines_calls_in_every_round():
    task = find_task(TASK)
    tight = Timing(alternations=3, budget_ms=3.0, min_calls=1, max_calls=1000, min_rounds=3)
    with Evaluator("cpu", timing=tight) as ev:
        result = ev.evaluate(task, task.file("baseline.py"), seed=3, profile="train")
    assert result.status == "passed", result.stages
    for w in result.workloads:
        ours = [r["calls"] for r in w.candidate["rounds"]]
        assert ours == [r["calls"] for r in w.baseline["rounds"]], w.label


def test_only_ratios_far_apart_are_worth_extra_rounds():
    """Past the planned rounds, timing goes on only where the paired ratios' interval is more
    than WIDE_SPREAD wide (prefill attention's 0.93-1.05): a small kernel's few percent
    (silu_mul's 0.98-1.02) already give an estimate within the bound, and timing on cost it
    time."""

    def walls(ratios: list[float]) -> dict:
        return {
            "baseline": [{"median_us": 100.0 * r} for r in ratios],
            "candidate": [{"median_us": 100.0} for _ in ratios],
        }

    assert timing.wide(walls([0.965, 1.053, 0.955, 0.926]))
    assert not timing.wide(walls([0.98, 1.02, 1.0, 0.99]))
    assert not timing.wide(walls([0.5]))  # one round: nothing to compare


def test_a_gpu_profile_allows_extra_rounds_and_the_cpu_device_none():
    from core.evaluation.job import MAX_ROUNDS
    from core.evaluation.job import Timing as T

    train, full = T.for_device("cuda", "train"), T.for_device("cuda", "full")
    assert train.alternations + train.to_job()["extra_rounds"] == MAX_ROUNDS == 32
    assert full.alternations + full.to_job()["extra_rounds"] == MAX_ROUNDS
    assert T.for_device("cpu", "train").to_job()["extra_rounds"] == 0


def test_the_baseline_timed_in_its_own_worker_scores_the_identity_and_says_what_it_ran(tmp_path):
    """The task's baseline submitted as the candidate, both sides in workers of their own,
    each alternation's two rounds served on one region."""
    task = find_task(TASK)
    shared = Timing(
        alternations=2, budget_ms=20.0, min_calls=2, max_calls=6, min_rounds=2, baseline_worker=True
    )
    with Evaluator("cpu", timing=shared) as ev:
        result = ev.evaluate(task, task.file("baseline.py"), seed=5)
    assert result.status == "passed", result.stages
    for w in result.workloads:
        assert len(w.baseline["rounds"]) == len(w.candidate["rounds"]) == 2
        assert all("serve_s" in r for r in w.baseline["rounds"])  # served, as the candidate's
        assert all(r["median_us"] > 0 for r in w.baseline["rounds"])
    assert result.baseline_impl == "torch"


def test_every_timed_device_times_the_baseline_in_a_worker_of_its_own():
    """A GPU and the CPU device: the baseline's rounds served as the candidate's are. A `sim:`
    device predicts both sides (sim/stage.py), a multi-rank task times its ranks together."""
    from core.harness.baseline_worker import uses_baseline_worker

    def job(device: str, **more: object) -> dict:
        return {"device": {"type": device}, "timing": {}, "stages": {"performance": True}, **more}

    assert uses_baseline_worker(job("cuda")) and uses_baseline_worker(job("cpu"))
    assert not uses_baseline_worker(job("sim"))
    assert not uses_baseline_worker(job("cpu", world_size=2))
    assert not uses_baseline_worker({**job("cpu"), "timing": {"baseline_worker": False}})


def test_the_cpu_devices_default_timing_serves_the_baseline_as_the_candidate():
    """`train` on the CPU device as a trainer gets it, nothing forced: both sides' rounds are
    served (each round's refill seconds recorded)."""
    task = find_task(TASK)
    with Evaluator("cpu", timing=Timing.for_device("cpu", "train")) as ev:
        result = ev.evaluate(task, task.file("baseline.py"), seed=6, profile="train")
    assert result.status == "passed", result.stages
    for w in result.workloads:
        for side in (w.baseline, w.candidate):
            assert side["rounds"] and all("serve_s" in r for r in side["rounds"])


def test_the_cpu_timer_warms_up_in_a_workloads_first_round_only():
    """The candidate's worker ran the candidate in its correctness stages, the baseline's
    worker has not run the baseline: the first round's warm-up call (inputs `first_index`, as
    the GPU timers' warm-up) pays what a process pays once, on both sides alike."""
    seen: list[int] = []

    def fresh(i: int) -> list[torch.Tensor]:
        seen.append(i)
        return [torch.ones(4)]

    def run(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    for warm_up, first_call in ((True, 500), (False, 501)):
        seen.clear()
        rnd = timing.Round(1.0, 3, 3, 500, graph=False, warm_up=warm_up)
        got = timing.time_round(run, fresh, torch.device("cpu"), rnd)
        assert got["mode"] == "wall" and len(got["times_us"]) == 3
        assert seen[0] == first_call and seen[-3:] == [501, 502, 503]


def test_the_trusted_worker_serves_the_cpu_devices_rounds_on_one_thread():
    """Drawn on all of torch's threads, a refill left them spinning on the cores the timed call
    was about to use (a 0.3 ms rope call read 3.2 ms, on the candidate's side only)."""
    threads = torch.get_num_threads()
    with shared_io.one_thread(torch.device("cpu")):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads
    with shared_io.one_thread(torch.device("cuda", 0)):  # a GPU's refills run on the device
        assert torch.get_num_threads() == threads


def test_a_concurrent_batch_times_every_candidate_next_to_one_warm_baseline_worker(monkeypatch):
    """A batch's slots each have a trusted worker; the baseline's worker is the batch's, forked
    once before the slots' threads start and joined to whichever slot's trusted worker serves
    the candidate being timed."""
    from tests.test_batch_concurrent import CANDIDATES, FIXTURES

    monkeypatch.setenv("ARENA_BATCH_CONCURRENCY", "2")
    axpy = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    forced = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5, baseline_worker=True)
    paths = [CANDIDATES / "axpy_torch.py", CANDIDATES / "axpy_wrong.py"] * 2
    with Evaluator("cpu", timing=forced) as ev:
        results = asyncio.run(ev.aevaluate_batch(axpy, paths, seed=4, profile="train"))
    assert [r.status for r in results] == ["passed", "failed", "passed", "failed"]
    for r in (results[0], results[2]):
        assert r.workloads and all(
            "serve_s" in rnd for w in r.workloads for rnd in w.baseline["rounds"]
        )


def _traced(tmp_path, monkeypatch, candidate: str) -> tuple[str, list[dict]]:
    """One evaluation of the axpy fixture with the harness's trace on: its status, its spans."""
    from tests.test_batch_concurrent import CANDIDATES, FIXTURES

    monkeypatch.setenv(trace.ENV, "1")
    axpy = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    forced = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5, baseline_worker=True)
    with Evaluator("cpu", workdir=tmp_path / "ev", timing=forced) as ev:
        result = ev.evaluate(axpy, CANDIDATES / candidate, seed=3, profile="train")
        lines = (ev.root / trace.FILE_NAME).read_text().splitlines()
    return result.status, [json.loads(line) for line in lines]


def test_the_baseline_worker_loads_while_the_candidates_correctness_runs(tmp_path, monkeypatch):
    """Forked as the correctness stages begin, not at the first baseline round: its set-up
    (about 1.1 s with a CUDA context on an H200) is off the performance stage's path."""
    status, rows = _traced(tmp_path, monkeypatch, "axpy_torch.py")
    assert status == "passed"
    setup = next(r for r in rows if (r["role"], r["name"]) == ("baseline", "setup"))
    runs = [r for r in rows if (r["role"], r["name"]) == ("candidate", "run_shared")]
    assert runs and setup["start"] < runs[-1]["start"]


def test_a_candidate_that_fails_to_compile_never_forks_the_baselines_worker(tmp_path, monkeypatch):
    status, rows = _traced(tmp_path, monkeypatch, "axpy_syntax_error.py")
    assert status == "failed"
    assert not any(r["role"] == "baseline" for r in rows)


def _cannot_start(conn: socket.socket, _job: dict) -> None:
    from core.harness import channel

    channel.send(conn, {"ok": False, "error": "CUDA error: out of memory"})


def _starts(conn: socket.socket, _job: dict) -> None:
    from core.harness import channel

    channel.send(conn, {"ok": True, "ready": True})


def test_a_baseline_worker_forked_ahead_that_could_not_start_is_forked_once_more(monkeypatch):
    """Forked ahead, it makes its device context while the candidate's correctness runs beside
    it; one that could not start then is forked again at its first round, not reported as the
    harness's failure."""
    from core.harness import baseline_rounds
    from core.harness.worker_process import Worker

    mains = [_cannot_start, _starts]
    real = Worker.fork.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        baseline_rounds.Worker,
        "fork",
        classmethod(lambda cls, name, _main, job: real(cls, name, mains.pop(0), job)),
    )
    workers = baseline_rounds.BaselineWorkers({})
    workers.prefork()
    try:
        worker = workers.get(10.0)
        assert worker.returncode is None and not mains  # the second fork is the one kept
    finally:
        workers.close()


def test_work_is_queued_ahead_of_a_call_whose_launch_outlasts_the_flush():
    """A call's event time is the device's only if the device is still busy when the host has
    launched it: a wrapper that takes 250 µs to launch after a 70 µs flush gets about 300 µs
    more work queued ahead of it; a quick launch gets none, and the lead is bounded."""
    assert timing.lead_flushes(host_us=10.0, flush_us=70.0) == 0
    assert timing.lead_flushes(host_us=250.0, flush_us=70.0) == 5  # 6 flushes ≥ 1.5 × 250 µs
    assert timing.lead_flushes(host_us=1e6, flush_us=70.0) == timing.MAX_LEAD_FLUSHES
    assert timing.lead_flushes(host_us=250.0, flush_us=0.0) == 0  # no flush measured: none


def test_the_baseline_workers_own_failure_is_the_one_reported(tmp_path):
    """A baseline that fails in its own worker ends the shared round early; the result says why
    the baseline failed, not only that the round ended without its outputs (an imported task's
    inputs.py failed so on the H200 and said nothing more)."""
    import shutil

    from tests.test_batch_concurrent import FIXTURES

    task_dir = tmp_path / "tasks" / "elementwise" / "axpy"
    shutil.copytree(FIXTURES / "tasks" / "elementwise" / "axpy", task_dir)
    (task_dir / "baseline.py").write_text(
        "import sys\nimport torch\n\n\n"
        "def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
        "    if sys.modules['core.harness.trace']._role == 'baseline':\n"
        "        raise RuntimeError('the baseline broke in its own worker')\n"
        "    return torch.add(b, x, alpha=2)\n"
    )
    forced = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5, baseline_worker=True)
    with Evaluator("cpu", timing=forced) as ev:
        result = ev.evaluate(load_task(task_dir), task_dir / "starter.py", seed=3)
    assert result.status == "infrastructure_error", result.stages
    assert "the baseline broke in its own worker" in result.stage("performance").message


def test_both_sides_release_their_allocators_cache_before_a_workloads_first_round_only(
    monkeypatch,
):
    """A batch's baseline worker is warm from the batch's earlier candidates; a fresh
    candidate's worker is not, and a workload whose drawn inputs decide its blocks' sizes read
    0.72-0.89 in its first rounds on the H200. Both sides give their cached blocks back before
    a workload's first round (the parent asks for it there only), so both start alike."""
    released: list[str] = []
    monkeypatch.setattr(timing, "release_cached", released.append)
    first = {"budget_ms": 1.0, "min_calls": 1, "max_calls": 2, "first_index": 0, "graph": False}
    for request, want in (({**first, "release_cache": True}, ["cpu"]), (first, [])):
        released.clear()
        rnd = timing.Round.from_request(request)
        timing.time_round(lambda x: x + 1, lambda i: [torch.ones(4)], CPU, rnd)
        assert released == want
    # the host probe (one more warm-up call) is likewise asked for, never run by default
    assert not timing.Round.from_request(first).probe_host
    assert timing.Round.from_request({**first, "probe_host": True}).probe_host


def test_the_release_runs_the_allocator_function_bound_before_any_candidate_code(monkeypatch):
    """A candidate that replaces torch.cuda.empty_cache in its process keeps nothing: the
    harness calls the C function it bound at import, after the device's queued work."""
    calls: list[str] = []
    monkeypatch.setattr(timing, "_cuda_empty_cache", lambda: calls.append("empty"))
    monkeypatch.setattr(timing, "_sync", lambda kind: calls.append(f"sync {kind}"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("patched"))
    timing.release_cached("cuda")
    timing.release_cached("cpu")
    assert calls == ["sync cuda", "empty"]
