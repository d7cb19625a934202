"""The parent's side of a multi-rank candidate's inputs from the checker (ranked_inputs.py,
ranked_rounds.py): every rank's correctness inputs drawn by the checker and sent to each rank
alone, and its timed rounds served by the checker over shared memory. Where the device cannot
share memory (not the CPU or CUDA), timed rounds keep the old path, inputs drawn in the ranks
from their keyed seeds, and the workload's notes say so."""

from __future__ import annotations

import socket
import time
from typing import Any

from core.harness.calls import _workload
from core.harness.faults import StageFailed
from core.harness.workers import Worker, WorkerDied

OLD_PATH_NOTE = "timed inputs drawn in the ranks' processes"


class RankShared:
    """Mixed into RankedEvaluation: its state is there."""

    world: int
    ranks: list[Worker]
    trusted: Worker | None
    peers_joined: str | bool | None

    def _checker_inputs(
        self, w: dict[str, Any], seed: int, deadline: float
    ) -> list[tuple[dict[str, Any], bytes]]:
        """Every rank's inputs of one correctness run, drawn by the checker from the rank
        seeds: (fields for the rank's request, its bytes), rank by rank."""
        assert self.trusted is not None
        reply, payload = self.trusted.request(
            {"op": "inputs", "workload": _workload(w), "rank_seeds": self._rank_seeds(seed)},  # type: ignore[attr-defined]
            max(0.1, deadline - time.monotonic()),
            max_payload=1 << 40,
        )
        if not reply.get("ok"):
            raise StageFailed(
                "error",
                f"the checker could not draw the ranks' inputs: {reply.get('error')}",
                "infrastructure",
            )
        data, found, offset = bytes(payload or b""), [], 0
        for metas, size in zip(reply["ranks"], reply["sizes"]):
            found.append(({"inputs": metas}, data[offset : offset + int(size)]))
            offset += int(size)
        return found

    def _join_peers(self, deadline: float) -> str | None:
        """A socket between the checker and each candidate rank (once): None when joined,
        else why the timed rounds keep the old path."""
        if self.peers_joined is not False:
            return self.peers_joined if isinstance(self.peers_joined, str) else None
        assert self.trusted is not None
        reason: str | None = None
        for rank, worker in enumerate(self.ranks):
            ours, theirs = socket.socketpair()
            try:
                self.trusted.send({"op": "peer", "rank": rank})
                _send_fd(self.trusted, theirs)
                reply, _ = self.trusted.recv(60.0)
                if not reply.get("ok") or not reply.get("shared"):
                    reason = str(reply.get("reason") or reply.get("error") or "no shared memory")
                    break
                worker.send({"op": "peer"})
                _send_fd(worker, ours)
                reply, _ = self._candidate_recv(worker, deadline)  # type: ignore[attr-defined]
                if not reply.get("ok"):
                    reason = f"rank {rank} did not take its peer socket: {reply.get('error')}"
                    break
            finally:
                ours.close()
                theirs.close()
        self.peers_joined = reason
        return reason

    def _serve_ranks(
        self, w: dict[str, Any], first: int, sample: list[float], deadline: float
    ) -> bool:
        """Ask the checker to serve every rank's round (it alone gets the seeds and the sampled
        calls): True when it does; False where this device keeps the old path."""
        if self._join_peers(deadline) is not None:
            return False
        timing = self.job["timing"]  # type: ignore[attr-defined]
        ack = self._trusted_call(  # type: ignore[attr-defined]
            {
                "op": "serve_ranks",
                "workload": _workload(w),
                "rank_seeds": self._rank_seeds(w["seed"]),  # type: ignore[attr-defined]
                "sample": sample,
                "first_index": first,
                "max_calls": int(timing["max_calls"]),
                "timeout_s": max(1.0, deadline - time.monotonic()),
            },
            deadline,
        )
        if not ack.get("serving"):
            raise StageFailed(
                "error",
                f"{w['label']}: the checker could not serve the ranks' timed round: {ack.get('reason')}",
                "infrastructure",
            )
        return True

    def _ranks_verdict(self, w: dict[str, Any], calls: int, deadline: float) -> int:
        """The checker's verdict once every rank's round ended: its sampled calls judged."""
        assert self.trusted is not None
        try:
            reply, _ = self.trusted.recv(max(0.1, deadline - time.monotonic()))
        except (WorkerDied, TimeoutError) as exc:
            raise StageFailed(
                "error", f"the checker failed while serving a timed round: {exc}", "infrastructure"
            ) from None
        label = w["label"]
        if reply.get("violation"):
            raise self._violation(  # type: ignore[attr-defined]
                "timed_output_mismatch", f"{label}: {reply['violation']}", label
            )
        if reply.get("refused") or not reply.get("ok"):
            raise StageFailed(
                "error",
                f"{label}: the checker's round failed: {reply.get('refused') or reply.get('error')}",
                "infrastructure",
            )
        if int(reply.get("count") or 0) != calls:
            raise self._violation(  # type: ignore[attr-defined]
                "timed_output_mismatch",
                f"{label}: the ranks' rounds had {reply.get('count')} calls; the parent asked for {calls}",
                label,
            )
        for result in reply.get("results") or []:
            for rank, outputs in enumerate(result["ranks"]):
                for name, outcome in outputs.items():
                    if not outcome["passed"]:
                        raise self._violation(  # type: ignore[attr-defined]
                            "timed_output_mismatch",
                            f"{label}: timed call {result['call']} returned a wrong `{name}` on rank {rank} "
                            f"({outcome.get('message')}), though the correctness runs passed",
                            label,
                        )
        return len(reply.get("calls") or [])


def _send_fd(worker: Worker, sock: socket.socket) -> None:
    try:
        socket.send_fds(worker.conn, [b"f"], [sock.fileno()])
    except OSError:
        raise WorkerDied(worker.name, worker.exit_reason()) from None
