"""A multi-rank evaluation: the stages of runner.Evaluation, run on `world_size` ranks.

The parent starts the checker first (it has read the reference before any candidate code
exists), then the baseline's ranks, then the candidate's ranks through the zygote; each side's
ranks form their own process group (ranked_worker.py). Every request goes to all ranks of a
side before any reply is read, since each call is collective; one deadline covers them all,
and when a rank fails to answer in time every rank of that side is killed with its process
group. Timing alternates the two sides round by round, as on a single device, and reports the
slowest rank's median (a collective is as fast as its slowest rank).

Two things only the parent holds (docs/integrity.md, class 2): the key of the ranks' seeds (a
request's seed becomes one seed per rank, `ranked_worker.rank_seed`; the checker gets all, and
draws the candidate's ranks' inputs itself: ranked_shared.py), and the barrier before every
timed call, which it answers over the ranks' own sockets once every rank of the side has reached
it. On CPU ranks it also meters the loopback traffic of each side's timed calls (traffic.py).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from core.harness import ranked_checker, ranked_worker, traffic
from core.harness.calls import _workload
from core.harness.correctness import verdict
from core.harness.faults import StageFailed, await_trusted
from core.harness.performance import _times
from core.harness.ranked_calls import RankCalls
from core.harness.ranked_shared import RankShared
from core.harness.runner import Evaluation
from core.harness.timing import picks, summarize
from core.harness.workers import TaskFileChanged, Worker, WorkerDied, candidate_view
from core.harness.zygote import Zygote, ZygoteError


class RankedEvaluation(RankShared, RankCalls, Evaluation):
    """An Evaluation whose candidate and baseline are `world_size` ranks each, checked by the
    checker (ranked_checker.py) in the trusted worker's place."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.world = int(self.job["world_size"])
        self.ranks: list[Worker] = []  # the candidate's
        self.baseline_ranks: list[Worker] = []
        self.seed_key = secrets.token_bytes(32)  # never leaves this process
        self.device_type = str(self.job["device"]["torch_device"]).split(":")[0]
        self.peers_joined: str | bool | None = False  # False: not yet; None: joined; else why not

    def _workers(self) -> list[Worker | None]:
        return [*self.ranks, *self.baseline_ranks, self.trusted]

    def _kill_candidate(self) -> None:
        for worker in self.ranks:
            worker.kill()

    # --- stages --------------------------------------------------------------------------

    def _start_workers(self, deadline: float) -> None:
        self.trusted = Worker.fork("trusted", ranked_checker.checker_main, self.job)
        await_trusted(self.trusted, self._remaining(deadline), "the checker", "the reference")
        for rank in range(self.world):
            self.baseline_ranks.append(
                Worker.fork(
                    f"baseline rank {rank}",
                    ranked_worker.rank_main,
                    self._rank_job("baseline", rank, self.job),
                )
            )
        try:
            view = candidate_view(self.job)
            if self.zygote is None:
                self.zygote = Zygote()
            for rank in range(self.world):
                self.ranks.append(
                    Worker.spawn(
                        f"rank {rank}", self.zygote, self._rank_job("candidate", rank, view)
                    )
                )
        except (TaskFileChanged, ZygoteError, WorkerDied) as exc:
            raise StageFailed(
                "error", f"could not start the candidate's ranks: {exc}", "infrastructure"
            ) from None
        for side, ranks in (("baseline", self.baseline_ranks), ("candidate", self.ranks)):
            replies = self._all_replies(ranks, deadline, side)
            error = self._first_error(replies)
            if error:
                raise StageFailed(
                    "error", f"the {side}'s process group did not form: {error}", "infrastructure"
                )

    def _compile(self, deadline: float) -> dict[str, Any]:
        self._start_workers(deadline)
        error = self._first_error(self._all(self.ranks, {"op": "import"}, deadline))
        if error:
            raise StageFailed("failed", error)
        first = self.job["stages"]["correctness"][0]
        replies = self._all(  # a seed no check uses (ranked_inputs.py)
            self.ranks,
            {"op": "first_call", "workload": _workload(first), "seed": self.compile_seed},
            deadline,
        )
        error = self._first_error(replies)
        if error:
            raise StageFailed("failed", error)
        notes = [
            f"rank {r}: {reply['first_call_error']}"
            for r, (reply, _) in enumerate(replies)
            if reply.get("first_call_error")
        ]
        return {"log": self._log("candidate-rank0.log"), "note": notes[0] if notes else None}

    def _check(
        self, stage: str, workloads: list[dict[str, Any]], deadline: float
    ) -> dict[str, Any]:
        assert self.trusted is not None
        failures = []
        for w in workloads:
            worst: dict[str, Any] | None = None
            message = None
            for j, seed in enumerate(w["seeds"]):
                repeat = 2 if j == 0 else 1  # the first seed runs twice on the same inputs
                replies = self._all(
                    self.ranks,
                    {"op": "run_given", "workload": _workload(w), "repeat": repeat},
                    deadline,
                    repeat * self._out_bytes(w),
                    own=self._checker_inputs(w, seed, deadline),
                )
                error = self._first_error(replies)
                if error:
                    message, worst = f"seed {seed}: {error.splitlines()[0]}", {"error": error}
                    break
                check = self._trusted_call(
                    {
                        "op": "check",
                        "workload": _workload(w),
                        "rank_seeds": self._rank_seeds(seed),
                        "runs": repeat,
                        "tensors": [reply.get("tensors") for reply, _ in replies],
                    },
                    deadline,
                    b"".join(bytes(p or b"") for _, p in replies),
                )
                if check.get("malformed"):
                    message, worst = (
                        f"seed {seed}: the candidate's ranks sent malformed outputs: {check['malformed']}",
                        {"error": check["malformed"]},
                    )
                    break
                message, worst = verdict(check["runs"], seed, worst, ranked=True)
                if message:
                    break
            passed = message is None
            self.emit(
                {
                    "type": "workload_checked",
                    "stage": stage,
                    "workload": w["label"],
                    "axes": w["axes"],
                    "passed": passed,
                    "message": message,
                    "worst": worst,
                }
            )
            if not passed:
                failures.append(f"{w['label']}: {message}")
        if failures:
            raise StageFailed(
                "failed",
                f"{len(failures)} of {len(workloads)} workload(s) wrong; first: {failures[0]}",
            )
        return {"workloads": len(workloads), "world_size": self.world}

    def _performance(self, deadline: float) -> dict[str, Any]:
        timing = self.job["timing"]
        rounds = int(timing["alternations"])
        sampled = int(timing.get("checked_calls", 2))
        checked_total = 0
        for w in self.job["stages"]["performance"]:
            per_rank: dict[str, list[list[float]]] = {
                "candidate": [[] for _ in range(self.world)],
                "baseline": [[] for _ in range(self.world)],
            }
            walls: dict[str, list[dict[str, float]]] = {"candidate": [], "baseline": []}
            calls: dict[str, int] = {}
            meters = {"candidate": traffic.Meter(), "baseline": traffic.Meter()}
            mode = None
            checked = 0
            for r in range(rounds):
                first = r * 100_000
                base_request = {"workload": _workload(w), "seed": w["seed"], "first_index": first}
                for side, ranks in (("candidate", self.ranks), ("baseline", self.baseline_ranks)):
                    is_candidate = side == "candidate"
                    if side not in calls:
                        estimate = (  # the candidate's from a seed no check uses
                            {**base_request, "seed": self.rng.getrandbits(62)}
                            if is_candidate
                            else base_request
                        )
                        replies = self._all(
                            ranks,
                            {"op": "estimate", **estimate},
                            deadline,
                            candidate=is_candidate,
                        )
                        self._raise_timing_error(replies, w, is_candidate)
                        slowest = max(float(reply.get("ms") or 0.0) for reply, _ in replies)
                        per_round = timing["budget_ms"] / rounds
                        calls[side] = max(
                            int(timing["min_calls"]),
                            min(int(timing["max_calls"]), int(per_round / max(slowest, 1e-4))),
                        )
                    sample = [self.rng.random() for _ in range(sampled)] if is_candidate else []
                    shared = is_candidate and self._serve_ranks(w, first, sample, deadline)
                    request = {"op": "time", **base_request, "calls": calls[side]}
                    if shared:  # no seed and no sample: the checker has both (ranked_rounds.py)
                        request = {
                            "op": "time",
                            "workload": _workload(w),
                            "first_index": first,
                            "calls": calls[side],
                            "shared": True,
                        }
                    elif is_candidate:
                        request["sample"] = sample
                    t0 = time.monotonic()
                    replies = self._all(
                        ranks, request, deadline, candidate=is_candidate, meter=meters[side]
                    )
                    wall = time.monotonic() - t0
                    if is_candidate and any(
                        reply.get("timed_output_invalid") for reply, _ in replies
                    ):
                        bad = next(
                            reply for reply, _ in replies if reply.get("timed_output_invalid")
                        )
                        raise self._violation(
                            "timed_output_mismatch",
                            f"{w['label']}: a timed call returned an invalid output where the correctness runs did not: {bad.get('error')}",
                            w["label"],
                        )
                    self._raise_timing_error(replies, w, is_candidate)
                    times = [_times(reply, calls[side]) for reply, _ in replies]
                    if any(len(t) != calls[side] for t in times):
                        raise StageFailed(
                            "failed",
                            f"{w['label']}: a rank sent a different number of timings than the calls it was asked for",
                        )
                    for rank, t in enumerate(times):
                        per_rank[side][rank] += t
                    # The slowest rank's own total: no rank may report more than the parent saw pass.
                    walls[side].append(
                        {
                            "wall_s": wall,
                            "reported_s": max(sum(t) for t in times) / 1e6,
                            "calls": calls[side],
                        }
                    )
                    if is_candidate:
                        mode = replies[0][0].get("mode")
                        checked += (
                            self._ranks_verdict(w, calls[side], deadline)
                            if shared
                            else self._check_timed_ranks(w, first, sample, calls[side], deadline)
                        )
            if self.device_type == "cpu":  # gloo on the loopback: every byte is counted
                found = traffic.problem(meters["candidate"], meters["baseline"], w["label"])
                if found:
                    raise StageFailed("failed", found)
            checked_total += checked
            figures = {side: _slowest_rank(per_rank[side]) for side in per_rank}
            self._emit_timed(w, mode, rounds, figures, walls, checked, [], {})
        return {
            "workloads": len(self.job["stages"]["performance"]),
            "checked_calls": checked_total,
            "world_size": self.world,
        }

    def _check_timed_ranks(
        self, w: dict[str, Any], first: int, sample: list[float], calls: int, deadline: float
    ) -> int:
        """Every rank's outputs of the round's sampled calls, checked against the reference on
        regenerated inputs (docs/integrity.md: timed-output checks)."""
        want = sorted(first + 1 + k for k in picks(sample, calls))
        replies = self._all(self.ranks, {"op": "kept"}, deadline, len(want) * self._out_bytes(w))
        for rank, (reply, _) in enumerate(replies):
            self._kept_calls(w, f"rank {rank}", reply, want)
        if not want:
            return 0
        check = self._trusted_call(
            {
                "op": "check_timed",
                "workload": _workload(w),
                "rank_seeds": self._rank_seeds(w["seed"]),
                "calls": want,
                "tensors": [reply.get("tensors") for reply, _ in replies],
            },
            deadline,
            b"".join(bytes(p or b"") for _, p in replies),
        )
        self._malformed_timed(w, check)
        for result in check["results"]:
            for rank, outputs in enumerate(result["ranks"]):
                for name, outcome in outputs.items():
                    if not outcome["passed"]:
                        raise self._violation(
                            "timed_output_mismatch",
                            f"{w['label']}: timed call {result['call']} returned a wrong `{name}` on rank {rank} ({outcome.get('message')}), "
                            "though the correctness runs passed: the output depends on something other than this call's inputs",
                            w["label"],
                        )
        return len(want)


def _slowest_rank(times_by_rank: list[list[float]]) -> dict[str, Any]:
    """The summary of the rank with the highest median, plus every rank's median."""
    summaries = [summarize(t) for t in times_by_rank]
    slowest = max(range(len(summaries)), key=lambda r: summaries[r].get("median_us", 0.0))
    return {
        **summaries[slowest],
        "slowest_rank": slowest,
        "rank_medians_us": [s.get("median_us") for s in summaries],
    }
