"""The performance stage: each workload timed in rounds that alternate the candidate and the
warm baseline (adaptive stopping at the profile's confidence target), each candidate round
limited to K times the baseline's, its inputs served by the trusted worker where the device
allows (shared_round.py), and sampled timed calls checked against the reference (a timed call
must compute what the correctness runs did). A `sim:` device predicts instead (sim/stage.py)."""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from typing import TYPE_CHECKING, Any, cast

from core.harness import shared_round
from core.harness.baseline_rounds import (
    BaselineRound,
    BaselineWorkers,
    as_round,
    time_baseline,
)
from core.harness.baseline_worker import uses_baseline_worker
from core.harness.calls import CandidateCalls, _workload
from core.harness.faults import StageFailed
from core.harness.interleaved import split_wall, time_interleaved
from core.harness.timing import WIDE_SPREAD, more_rounds, picks, settled, summarize, wide

if TYPE_CHECKING:
    from core.harness.runner import Evaluation

TIMING_MODES = ("graph", "events", "queued", "wall")
_INTERLEAVED_NOTE = "timed call by call, alternating with the baseline, after its first round"


def timing_cpu(job: dict[str, Any]) -> int | None:
    """The one CPU both sides' timed rounds run on (worker_tools.pinned) on a GPU: the job's
    `timing.pin_cpu` (a number, `auto` for the last CPU this harness may use, or `off`; the
    engine takes it from `ARENA_TIMING_CPU`). None (no pinning) on the CPU and `sim:` devices,
    whose timed code computes on the host's cores."""
    if (job.get("device") or {}).get("type") in ("cpu", "sim"):
        return None
    asked = str((job.get("timing") or {}).get("pin_cpu", "auto")).strip().lower()
    if asked == "off":
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return None
    if asked.isdigit() and int(asked) in allowed:
        return int(asked)
    return max(allowed)


class PerformanceStage(CandidateCalls):
    """`_performance` (runner.Evaluation's stage of that name) and its timed-output checks."""

    baselines: BaselineWorkers | None  # set in runner.Evaluation._setup (a batch's, or its own)
    own_baselines: bool

    def _performance(self, deadline: float) -> dict[str, Any]:
        timing = self.job["timing"]
        if timing.get("kind") == "predicted":  # a sim: device predicts instead of timing
            from core.harness.sim.stage import predict_performance

            return predict_performance(cast("Evaluation", self), deadline)
        if self.second is not None:  # nothing of the candidate runs beside the timed calls
            self._end_worker(self.second)
            self.second = None
        rounds = int(timing["alternations"])
        min_rounds = max(1, min(rounds, int(timing.get("min_rounds", rounds))))
        target = float(
            timing.get("ci_target", 0.0)
        )  # 0: every round runs (the protocol before adaptive stopping)
        # Rounds past `alternations` while the paired ratios lie far apart (job.Timing)
        extra = int(timing.get("extra_rounds", 0)) if target > 0 else 0
        sampled = int(timing.get("checked_calls", 2))
        checked_total = 0
        pin = timing_cpu(self.job)
        for w in self.job["stages"]["performance"]:
            sides: dict[str, list[float]] = {"candidate": [], "baseline": []}
            walls: dict[str, list[dict[str, float]]] = {"candidate": [], "baseline": []}
            graph = bool(w.get("graph"))
            mode = None
            notes: list[str] = []
            checked = 0
            impl = None
            done = 0
            interleave = False  # its rounds timed call by call (interleaved.py)
            for r in range(rounds + extra):
                first = r * 100_000
                request = {
                    "op": "time",
                    "workload": _workload(w),
                    "seed": w["seed"],
                    "graph": graph,
                    "first_index": first,
                    "budget_ms": timing["budget_ms"] / rounds,
                    "min_calls": timing["min_calls"],
                    "max_calls": timing["max_calls"],
                    "round_wall_ms": timing.get("round_wall_ms"),
                    "sync_each_call": timing.get("sync_each_call", False),
                    "cpu": pin,  # both sides' rounds on one CPU: the host's part the same
                    "release_cache": r == 0,  # both sides' allocators alike (timing.release_cached)
                    "probe_host": r == 0,  # does it wait on the host? (timing.waits_on_host)
                    "warm_up": r == 0,  # the CPU's timer: one untimed call first
                    # a graph round's capture moved each round, on both sides (timing.Round)
                    "placement_per_round": timing.get("placement") == "per_round",
                    "stream_per_round": timing.get("placement") == "new_stream",
                    "code_per_round": timing.get("placement") == "new_code",
                    # a graph round timed inside its graph, on both sides (timing.Round)
                    "events_inside": timing.get("events") == "inside",
                }
                # Inputs drawn by the trusted worker into shared memory where the device allows
                # (shared_round.py): the seed and the sampled calls never reach the candidate.
                not_shared = shared_round.reason_not_shared(self, deadline)
                # K× the baseline's earlier rounds: a candidate's first round of a workload may
                # pay what the warm baseline already paid (a new shape's JIT), so it gets the
                # per-call limit, as before
                round_limit, limit_note = self._round_limit(w["label"], walls["baseline"])
                # An extra round checks one call: each checked call costs the trusted worker a
                # reference (a grouped fp8 GEMM's: most of its 0.3 s a round), and a noisy
                # workload takes up to 28 of them; every round still has one.
                checks = sampled if r < rounds else min(sampled, 1)
                sample = [self.rng.random() for _ in range(checks)]
                got = (
                    self._interleaved_round(
                        request, sample, walls, round_limit, limit_note, deadline, notes
                    )
                    if interleave and not_shared is None
                    else None
                )
                if got is not None:
                    base, reply, wall, served = got
                else:
                    not_shared = shared_round.reason_not_shared(self, deadline)
                    base, reply, wall, served, not_shared = self._paired_round(
                        request, sample, not_shared, graph, notes, round_limit, limit_note, deadline
                    )
                    graph = bool(request["graph"])
                if r == 0:
                    # A workload whose calls wait on the host is timed call by call from its
                    # next round on (interleaved.py): never graphs, whose replays do not.
                    asked = timing.get("interleave")
                    interleave = (
                        bool(base.get("host_bound") if asked is None else asked)
                        and not graph
                        and not not_shared
                        and uses_baseline_worker(self.job)
                    )
                    note = _INTERLEAVED_NOTE + (
                        ": its calls wait on the host" if asked is None else ""
                    )
                    if interleave and note not in notes:
                        notes.append(note)
                if reply.get("timed_output_invalid"):
                    raise self._violation(
                        "timed_output_mismatch",
                        f"{w['label']}: a timed call returned an invalid output where the correctness runs did not: {reply.get('error')}",
                        w["label"],
                    )
                if not reply.get("ok"):
                    raise StageFailed(
                        "failed",
                        f"{w['label']}: the candidate failed while being timed: {reply.get('error')}",
                    )
                times = _times(reply, int(timing["max_calls"]))
                if reply.get("mode") not in TIMING_MODES:
                    raise StageFailed(
                        "failed",
                        f"{w['label']}: the candidate's worker sent a malformed timing mode",
                    )
                mode = reply.get("mode")
                checked += (
                    self._check_timed(w, first, sample, times, deadline)
                    if served is None
                    else self._judge_served(w, served, times)
                )
                if graph and mode != "graph":  # both sides are timed the same way
                    graph = False
                    request["graph"] = False
                    notes.append(
                        f"timed without CUDA graphs: {reply.get('graph_error', 'capture failed')}"
                    )
                    # The baseline's graph round is replaced by an eager one, on a region of
                    # its own (the candidate has mapped the alternation's).
                    base = self._baseline_round(request, not not_shared, False, deadline)
                walls["candidate"].append(
                    {
                        "wall_s": wall,
                        "reported_s": sum(times) / 1e6,
                        "calls": len(times),
                        "median_us": statistics.median(times),
                        **({"serve_s": float(served.get("serve_s") or 0.0)} if served else {}),
                    }
                )
                sides["candidate"] += times
                walls["baseline"].append(base["wall"])
                sides["baseline"] += base["times_us"]
                impl = base["impl"] or impl
                done = r + 1
                if not more_rounds(
                    done,
                    (rounds, min_rounds, extra, target),
                    functools.partial(settled, walls, sides, target),
                    functools.partial(self._worth_another, walls, deadline),
                ):
                    break
            if done > rounds:
                notes.append(
                    f"timed in {done} rounds: the interval of the first {rounds} rounds' paired ratios was over {WIDE_SPREAD:.0%} wide"
                )
            checked_total += checked
            figures = {side: summarize(sides[side]) for side in sides}
            self._emit_timed(w, mode, done, figures, walls, checked, notes, {"impl": impl})
        return {"workloads": len(self.job["stages"]["performance"]), "checked_calls": checked_total}

    def _paired_round(
        self,
        request: dict[str, Any],
        sample: list[float],
        not_shared: str | None,
        graph: bool,
        notes: list[str],
        round_limit: float,
        limit_note: str | None,
        deadline: float,
    ) -> tuple[dict[str, Any], dict[str, Any], float, dict[str, Any] | None, str | None]:
        """One alternation as two rounds: the baseline's, then the candidate's on the same
        region (both sides meet the same memory), the candidate's limited to K× the baseline's
        rounds (plus a floor for graph capture and warm-up), so a call that hangs ends the
        stage in seconds, not at the stage's limit (docs/evaluation.md). Returns the baseline's
        round, the candidate's reply, its wall clock, the trusted worker's verdict (None on
        the old path) and why the round took the old path (None: it did not)."""
        base = self._baseline_round(request, not_shared is None, True, deadline)
        if graph and base["mode"] != "graph":  # both sides are timed the same way
            request["graph"] = False
            notes.append(
                f"timed without CUDA graphs: {base.get('graph_error') or 'the baseline could not be captured'}"
            )
        not_shared = not_shared or shared_round.serve(self, request, sample, deadline, pair="close")
        if not_shared and f"{shared_round.OLD_PATH_NOTE} ({not_shared})" not in notes:
            notes.append(f"{shared_round.OLD_PATH_NOTE} ({not_shared})")
        t0 = time.monotonic()
        # else the stage's own limit comes first, and its message
        by_round = t0 + round_limit < deadline
        # the calls the baseline's round timed: the candidate's times the same inputs
        matched = {**request, "match_calls": len(base["times_us"])}
        header = (
            {**matched, "sample": sample}
            if not_shared
            else {**{k: v for k, v in matched.items() if k != "seed"}, "shared": True}
        )
        reply, _ = self._candidate_call(
            header,
            t0 + round_limit if by_round else deadline,
            limit_note=limit_note if by_round else None,
        )
        wall = time.monotonic() - t0
        served = None if not_shared else shared_round.verdict(self, deadline)
        if served is not None and reply.get("attach_failed"):
            # this candidate worker cannot map it: the old path from here on
            not_shared = self._attach_failed(reply, notes)
            t0 = time.monotonic()
            reply, _ = self._candidate_call(
                {**matched, "sample": sample},
                t0 + round_limit if by_round else deadline,
                limit_note=limit_note if by_round else None,
            )
            wall, served = time.monotonic() - t0, None
            base = self._baseline_round(request, False, False, deadline)
        if served is not None:  # the trusted worker's input refills are not the candidate's time
            wall = max(0.0, wall - float(served.get("serve_s") or 0.0))
        return base, reply, wall, served, not_shared

    def _attach_failed(self, reply: dict[str, Any], notes: list[str]) -> str:
        """The candidate's worker could not map a round's region: refused where an earlier
        worker of it did (sharing_proven), else the old path from here on; why, as a note."""
        if self.sharing_proven:
            raise self._refused(str(reply["attach_failed"])[:300])
        self._shared_reason = reason = (
            f"the candidate's worker could not map the shared memory: {reply['attach_failed']}"
        )
        notes.append(f"{shared_round.OLD_PATH_NOTE} ({reason})")
        return reason

    def _interleaved_round(
        self,
        request: dict[str, Any],
        sample: list[float],
        walls: dict[str, list[dict[str, float]]],
        round_limit: float,
        limit_note: str | None,
        deadline: float,
        notes: list[str],
    ) -> tuple[dict[str, Any], dict[str, Any], float, dict[str, Any] | None] | None:
        """One alternation timed call by call (interleaved.py), both sides the calls of the
        baseline's last round: the baseline's round as _baseline_round's, the candidate's
        reply, its share of the wall clock, the trusted worker's verdict. None where it could
        not be interleaved (the caller times it as two rounds)."""
        assert self.baselines is not None
        last = walls["baseline"][-1]
        got = time_interleaved(
            self,
            self.baselines,
            {**request, "match_calls": int(last["calls"])},
            sample,
            round_limit + float(last["wall_s"]),
            limit_note,
            deadline,
        )
        if got is None:
            return None
        if got.reply.get("attach_failed"):
            self._attach_failed(got.reply, notes)
            return None
        # the candidate's reply is judged by the caller; here its sum only shares out the wall
        reported = (
            sum(t for t in got.reply.get("times_us") or () if isinstance(t, (int, float))) / 1e6
        )
        base_wall, wall = split_wall(got.wall_s, sum(got.base.times_us) / 1e6, reported)
        base = _as_base(
            got.base, {"wall_s": base_wall, "serve_s": got.base.serve_s, "interleaved": True}
        )
        return base, got.reply, wall, got.served

    @staticmethod
    def _worth_another(walls: dict[str, list[dict[str, float]]], deadline: float) -> bool:
        """Past the planned rounds: whether the paired ratios are still far apart (timing.wide)
        and one more round of both sides fits well inside the stage's limit (an extra round is
        for the ratio's sake, never a reason for the stage to run out of time)."""
        if not wide(walls):
            return False
        last = sum(float(side[-1]["wall_s"]) for side in walls.values() if side)
        return time.monotonic() + 4 * last + 1.0 < deadline

    def _baseline_workers(self) -> BaselineWorkers:
        """The baseline's worker this evaluation times against: a batch's, else its own."""
        if self.baselines is None:
            self.baselines = BaselineWorkers(self.job)
            self.own_baselines = True
        return self.baselines

    def _load_baseline(self) -> None:
        """Fork the baseline's worker as the correctness stages begin: it loads while they
        run, not on the performance stage's path (its set-up: about 0.1 s on 2 CPU cores, about
        1.1 s with its CUDA context on an H200). A candidate that fails to compile never pays
        for it; a batch's is forked once (prefork does nothing while one is loading or alive)."""
        if uses_baseline_worker(self.job):
            self._baseline_workers().prefork()

    def _baseline_round(
        self, request: dict[str, Any], shared: bool, pair: bool, deadline: float
    ) -> dict[str, Any]:
        """One baseline round in the baseline's own worker (baseline_rounds.py), over shared
        memory where the candidate's round is; in the trusted worker where a job asks
        (`timing.baseline_worker`: false). Its times, its wall clock entry (the candidate's
        rounds are held to K× it), its mode and which of task.yaml's `baselines:` ran."""
        t0 = time.monotonic()
        if not uses_baseline_worker(self.job):
            got = as_round(self._trusted_call(request, deadline), time.monotonic() - t0, 0.0)
            return _as_base(got, {"wall_s": got.wall_s})
        got = time_baseline(self, self._baseline_workers(), request, shared, pair, deadline)
        return _as_base(
            got, {"wall_s": got.wall_s, **({"serve_s": got.serve_s} if got.serve_s else {})}
        )

    def _emit_timed(
        self,
        w: dict[str, Any],
        mode: Any,
        rounds: int,
        figures: dict[str, dict[str, Any]],
        walls: dict[str, list[dict[str, float]]],
        checked: int,
        notes: list[str],
        baseline_extra: dict[str, Any],
    ) -> None:
        """A workload's `workload_timed` event: each side's summary (`figures`), its rounds'
        walls, and the calls checked (ranked.py reports its slowest rank's figures)."""
        self.emit(
            {
                "type": "workload_timed",
                "workload": w["label"],
                "axes": w["axes"],
                "mode": mode,
                "rounds": rounds,
                "candidate": {
                    **figures["candidate"],
                    "wall_s": sum(x["wall_s"] for x in walls["candidate"]),
                    "rounds": walls["candidate"],
                    "checked_calls": checked,
                },
                "baseline": {
                    **figures["baseline"],
                    "wall_s": sum(x["wall_s"] for x in walls["baseline"]),
                    "rounds": walls["baseline"],
                    **baseline_extra,
                },
                "notes": notes,
            }
        )

    def _round_limit(
        self, label: str, baseline_rounds: list[dict[str, float]]
    ) -> tuple[float, str | None]:
        """Seconds a candidate's timed round may take, and what a timeout then says: K× the
        baseline's slowest round of the workload so far plus a floor (graph capture, warm-up);
        before the first baseline round, the job's per-call limit; else the stage's limit."""
        timing, limits = self.job["timing"], self.job.get("limits") or {}
        factor, floor = timing.get("round_factor"), float(timing.get("round_floor_s") or 5.0)
        if factor and baseline_rounds:
            base = max(x["wall_s"] for x in baseline_rounds)
            limit = float(factor) * base + floor
            return (
                limit,
                f"a timed round of {label} took more than {limit:.1f} s ({factor:g}× the baseline's round of {base:.2f} s, plus {floor:g} s)",
            )
        if limits.get("call_s"):
            return (
                float(limits["call_s"]),
                f"the first timed round of {label} took more than the per-call limit of {float(limits['call_s']):g} s",
            )
        return math.inf, None

    def _check_timed(
        self,
        w: dict[str, Any],
        first: int,
        sample: list[float],
        times: list[float],
        deadline: float,
    ) -> int:
        """Check the outputs the candidate's worker kept of the round's sampled calls against
        the reference on regenerated inputs. Returns how many calls were checked."""
        want = sorted(first + 1 + k for k in picks(sample, len(times)))
        reply, payload = self._candidate_call(
            {"op": "kept"}, deadline, len(want) * self._out_bytes(w)
        )
        self._kept_calls(w, "the candidate's worker", reply, want)
        if not want:
            return 0
        check = self._trusted_call(
            {
                "op": "check_timed",
                "workload": _workload(w),
                "member": self.key_prefix,
                "seed": w["seed"],
                "calls": want,
                "tensors": reply.get("tensors"),
            },
            deadline,
            payload,
        )
        self._malformed_timed(w, check)
        return self._timed_results(w, check["results"])

    def _kept_calls(
        self, w: dict[str, Any], who: str, reply: dict[str, Any], want: list[int]
    ) -> None:
        """`who`'s answer to `kept` holds the outputs of exactly the round's sampled calls
        (ranked.py asks every rank)."""
        if not reply.get("ok"):
            raise StageFailed(
                "failed",
                f"{w['label']}: {who} could not return the outputs of the sampled timed calls: {reply.get('error')}",
            )
        if reply.get("calls") != want:
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: {who} returned the outputs of calls {reply.get('calls')}, not of the sampled calls {want}",
                w["label"],
            )

    def _malformed_timed(self, w: dict[str, Any], check: dict[str, Any]) -> None:
        """The trusted worker (or the checker) could not read the kept outputs it was sent."""
        if check.get("malformed"):
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: malformed outputs of timed calls: {check['malformed']}",
                w["label"],
            )

    def _judge_served(self, w: dict[str, Any], served: dict[str, Any], times: list[float]) -> int:
        """The trusted worker's verdict on a round it served (shared_io.py)."""
        if served.get("violation"):
            raise self._violation(
                "timed_output_mismatch", f"{w['label']}: {served['violation']}", w["label"]
            )
        if served.get("calls") != len(times):
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: the candidate's worker reported {len(times)} timed calls; the trusted worker served {served.get('calls')}",
                w["label"],
            )
        return self._timed_results(w, served["results"])

    def _timed_results(self, w: dict[str, Any], results: list[dict[str, Any]]) -> int:
        for result in results:
            for name, outcome in result["outputs"].items():
                if not outcome["passed"]:
                    raise self._violation(
                        "timed_output_mismatch",
                        f"{w['label']}: timed call {result['call']} returned a wrong `{name}` ({outcome.get('message')}), "
                        "though the correctness runs passed: the output depends on something other than this call's inputs "
                        "(a cache keyed by address, shape or call count; work finished after the call returned; another stream)",
                        w["label"],
                    )
        return len(results)


def _as_base(got: BaselineRound, wall: dict[str, Any]) -> dict[str, Any]:
    """A baseline round as the stage keeps it: its times, its wall clock entry (`wall`, with
    the reported time, calls and median added), its mode, impl and whether it waits on the
    host."""
    times = got.times_us
    wall.update(reported_s=sum(times) / 1e6, calls=len(times), median_us=statistics.median(times))
    return {
        "times_us": times,
        "wall": wall,
        "mode": got.mode,
        "impl": got.impl,
        "graph_error": got.graph_error,
        "host_bound": got.host_bound,
    }


def _times(reply: dict[str, Any], max_calls: int) -> list[float]:
    times = reply.get("times_us")
    if (
        not isinstance(times, list)
        or not 0 < len(times) <= max_calls
        or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
            for t in times
        )
    ):
        raise StageFailed("failed", "the candidate's worker sent malformed timings")
    return [float(t) for t in times]
