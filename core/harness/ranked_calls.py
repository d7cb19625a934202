"""How the parent talks to every rank of a side of a multi-rank evaluation (ranked.py): each
request goes to all ranks (a request's seed becomes each rank's own seed) before any reply is
read, the ranks' barriers are answered on the way, one deadline covers them all, and a late or
dead rank fails the side (the candidate's, or the baseline's as the harness's fault)."""

from __future__ import annotations

import select
from typing import Any

from core.harness import ranked_worker
from core.harness.calls import CandidateCalls
from core.harness.faults import StageFailed
from core.harness.workers import Worker, WorkerDied, WorkerTimeout


class RankCalls(CandidateCalls):
    """The rank-wide calls; the state is RankedEvaluation's."""

    world: int
    ranks: list[Worker]  # the candidate's
    baseline_ranks: list[Worker]
    seed_key: bytes  # never leaves this process

    def _rank_seeds(self, seed: int) -> list[int]:
        return [ranked_worker.rank_seed(int(seed), r, self.seed_key) for r in range(self.world)]

    def _per_rank(self, header: dict[str, Any]) -> list[dict[str, Any]]:
        """One header per rank; a request's seed becomes that rank's own seed."""
        if "seed" not in header:
            return [header] * self.world
        return [{**header, "seed": seed} for seed in self._rank_seeds(header["seed"])]

    def _rank_job(self, role: str, rank: int, base: dict[str, Any]) -> dict[str, Any]:
        side = "candidate" if role == "candidate" else "baseline"
        return {
            **base,
            "role": role,
            "rank": rank,
            "world_size": self.world,
            "store": str(self.workdir / f"{side}.rendezvous"),
            "group_timeout_s": self.job["limits"]["compile_s"],
        }

    def _all(
        self,
        ranks: list[Worker],
        header: dict[str, Any],
        deadline: float,
        max_payload: int = 0,
        candidate: bool = True,
        own: list[tuple[dict[str, Any], bytes]] | None = None,
        meter: Any = None,
    ) -> list[tuple[dict[str, Any], bytearray | None]]:
        """Send to every rank (its own seed, if the request has one; `own[r]`: fields and a
        payload for rank r alone), then read every reply, answering the ranks' barriers on the
        way (`_serve_barriers`; `meter` sees each call's window: traffic.py)."""
        replies: list[tuple[dict[str, Any], bytearray | None] | None] = [None] * len(ranks)
        try:
            for r, (worker, h) in enumerate(zip(ranks, self._per_rank(header))):
                extra, payload = own[r] if own is not None else ({}, None)
                worker.send({**h, **extra}, payload)
            self._serve_barriers(ranks, replies, deadline, max_payload, meter)
        except WorkerTimeout:
            waiting = [r for r, reply in enumerate(replies) if reply is None]
            late = waiting[:1] + [r for r in waiting[1:] if not _answered(ranks[r])]
            message = (
                f"{'candidate' if candidate else 'baseline'} rank(s) {', '.join(map(str, late))} of {len(ranks)} did not finish within the "
                "stage's time limit (a rank stuck on its own and a rank waiting for it in a collective look the same)"
            )
            raise StageFailed(
                "timeout", message, "candidate" if candidate else "infrastructure"
            ) from None
        except WorkerDied as died:
            if candidate:
                raise StageFailed("crashed", f"the candidate's {died.name} {died.reason}") from None
            raise StageFailed(
                "error", f"the baseline's {died.name} {died.reason}", "infrastructure"
            ) from None
        done = [r for r in replies if r is not None]
        if candidate:
            for rank, (reply, _) in enumerate(done):
                self._raise_hooks(reply, f"rank {rank}: ")
                self._note_tampering(reply)
        return done

    def _serve_barriers(
        self,
        ranks: list[Worker],
        replies: list[tuple[dict[str, Any], bytearray | None] | None],
        deadline: float,
        max_payload: int,
        meter: Any = None,
    ) -> None:
        """Read every rank's reply into `replies`. A rank's `{"barrier": k}` is held until every
        rank has sent the same k, then all are told `go`; a rank that replies while others wait
        at a barrier ends the round, and the waiting ranks are told to abort."""
        at_barrier: dict[int, int] = {}
        while any(reply is None for reply in replies):
            poller = select.poll()
            index = {}
            for r, worker in enumerate(ranks):
                if replies[r] is None and r not in at_barrier:
                    poller.register(worker.conn.fileno(), select.POLLIN)
                    index[worker.conn.fileno()] = r
            if not index:  # everyone still running waits at a barrier that cannot complete
                for r in list(at_barrier):
                    ranks[r].send(
                        {"abort": "another rank finished the request without reaching this barrier"}
                    )
                at_barrier.clear()
                continue
            ready = poller.poll(self._remaining(deadline) * 1000)
            if not ready:
                raise WorkerTimeout("no rank answered in time")
            for fd, _ in ready:
                r = index[fd]
                msg, payload = ranks[r].recv(self._remaining(deadline), max_payload)
                if "barrier" in msg and "ok" not in msg:
                    if meter is not None and not at_barrier:
                        meter.arrive()  # the first rank out of its call: that call's window ends
                    at_barrier[r] = msg["barrier"]
                    if len(at_barrier) == len(ranks) and len(set(at_barrier.values())) == 1:
                        if meter is not None:  # every rank enters the next call now
                            meter.go()
                        for worker in ranks:
                            worker.send({"go": msg["barrier"]})
                        at_barrier.clear()
                    elif len(set(at_barrier.values())) > 1:
                        for waiting in list(at_barrier):
                            ranks[waiting].send(
                                {
                                    "abort": f"the ranks reached different barriers: {sorted(set(at_barrier.values()))}"
                                }
                            )
                        at_barrier.clear()
                else:
                    if meter is not None:
                        meter.arrive()  # a rank finished the round: the last call's window ends
                    replies[r] = (msg, payload)

    @staticmethod
    def _first_error(replies: list[tuple[dict[str, Any], Any]]) -> str | None:
        for rank, (reply, _) in enumerate(replies):
            if not reply.get("ok"):
                return f"rank {rank}: {reply.get('error')}\n{reply.get('traceback', '')}".strip()
        return None

    def _all_replies(
        self, ranks: list[Worker], deadline: float, side: str
    ) -> list[tuple[dict[str, Any], Any]]:
        try:
            return [worker.recv(self._remaining(deadline)) for worker in ranks]
        except (WorkerTimeout, WorkerDied) as exc:
            raise StageFailed(
                "error", f"the {side}'s ranks did not start: {exc}", "infrastructure"
            ) from None

    def _raise_timing_error(
        self, replies: list[tuple[dict[str, Any], Any]], w: dict[str, Any], candidate: bool
    ) -> None:
        error = self._first_error(replies)
        if error is None:
            return
        if candidate:
            raise StageFailed(
                "failed", f"{w['label']}: the candidate failed while being timed: {error}"
            )
        raise StageFailed(
            "error",
            f"{w['label']}: the baseline failed while being timed: {error}",
            "infrastructure",
        )


def _answered(worker: Worker) -> bool:
    """Whether a reply is waiting from `worker` (read and dropped: the stage is failing)."""
    try:
        worker.recv(0.05)
        return True
    except (WorkerTimeout, WorkerDied):
        return False
