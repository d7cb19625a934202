"""Timed rounds whose inputs the trusted worker draws and writes into the candidate's buffers.

Before this path the candidate's own process drew every timed call's inputs from the round's
seed, and held the list of calls whose outputs would be checked: a candidate that read either
from the harness's frames or `gc` could precompute the round or do the work only on the checked
calls (docs/integrity.md, issue 23). Here neither enters the candidate's process:

- The trusted worker draws each call's inputs (the same generator and seeds as before, so its
  check regenerates them privately) and copies them into a region of memory that both workers
  map: a sealed memfd on the CPU (sent over their peer socket with SCM_RIGHTS), a CUDA IPC
  handle of its own allocation on a GPU. The candidate's worker only ever sees the current
  call's inputs, at fixed addresses (graph replays read them).
- After every timed call the candidate's worker copies the outputs into the region's output
  slots (it cannot know which calls are checked, so it copies all) and tells the trusted worker,
  which snapshots (clones) the slots of the calls the parent sampled before it writes the next
  inputs. No output byte crosses a socket.
- The two workers talk directly over a socketpair the parent made (`Peer`): per call one short
  frame each way, outside the timed region. The candidate's worker synchronizes its device
  before each frame (the trusted worker must see the output copy finished, and must not
  overwrite inputs a queued call still reads), so GPU calls no longer queue back to back.

The trusted worker believes nothing the candidate's worker says: a call index that repeats or
goes back, outputs reported for inputs it did not write, or a sampled call never reported is a
`timed_output_mismatch`. Devices that cannot share memory (`cannot_share`) keep the old path, and
the result's workload notes say so. The regions themselves, their layout and the descriptor
passing are shared_region.py's; this module is the timed round's protocol over them.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from core.harness import channel, inputs, timing
from core.harness.guard import NO_HOOKS, Hooks, trusted
from core.harness.shared_region import (
    Region,
    Slot,
    Unshareable,
    attach_region,
    carries_fd,
    create_region,
    plan,
    recv_fd,
    send_fd,
)

PEER_TIMEOUT_S = 600.0  # the parent's round limit ends a stalled round long before this
_TB = torch._C.TensorBase
_copy, _clone = _TB.copy_, _TB.clone
_perf_counter = time.perf_counter


class AttachFailed(RuntimeError):
    """The candidate's worker could not map the region (this round and the next take the old path)."""


class ProtocolError(ValueError):
    """The candidate's worker broke the round's protocol: proof of tampering with the harness."""


# --- the trusted worker's side ---------------------------------------------------------------


@dataclass
class Paired:
    """A round's region kept for the other side's round of the same alternation."""

    key: tuple[str, int, int]
    region: Region
    desc: dict[str, Any]
    nbytes: int
    fd: int | None = None  # a region's descriptor (memfd, cuda_vmm), for the second consumer

    def close(self) -> None:
        self.region.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class RoundPairs:
    """The trusted worker's region of the alternation in progress. The baseline's round of an
    alternation runs first (`pair: open`) and its region is kept; the candidate's round of the
    same workload, first call and seed (`pair: close`) then runs on that same memory, and frees
    it. Where a buffer lies in device memory moved a memory-bound kernel's time by up to 2x
    between rounds on the H200 (docs/fidelity.md): on one region both sides meet the same
    placement, so it cancels in their ratio. The candidate never maps a region before the
    baseline's round on it (it could keep a view and write into the baseline's inputs)."""

    def __init__(self) -> None:
        self.held: Paired | None = None

    def take(self, key: tuple[str, int, int], nbytes: int) -> Paired | None:
        held, self.held = self.held, None
        if held is not None and (held.key != key or held.nbytes != nbytes):
            held.close()
            return None
        return held

    def keep(self, paired: Paired) -> None:
        self.clear()
        self.held = paired

    def clear(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None


def pair_key(msg: dict[str, Any]) -> tuple[str, int, int]:
    return (
        json.dumps(msg["workload"]["shapes"], sort_keys=True),
        int(msg["first_index"]),
        int(msg["seed"]),
    )


Served = tuple[list[int], list[torch.Tensor], int, float]  # serve_round's result


@dataclass
class _Opened:
    """One worker's region for a round, its views and the inputs' generator."""

    region: Region
    desc: dict[str, Any]
    fds: list[int]
    nbytes: int
    fresh: inputs.FreshInputs
    in_views: list[torch.Tensor | None]
    out_views: list[torch.Tensor]

    def close(self, ended: bool, orphan: Callable[[Region], None] | None) -> None:
        """Free the region, or hand it to `orphan` where its worker left the round early and
        may still map it (the parent says when it is dead: trusted_worker.py)."""
        for fd in self.fds:
            os.close(fd)
        if ended or orphan is None:
            self.region.close()
        else:
            orphan(self.region)


def _open(
    peer: socket.socket,
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    out_specs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
    free_stale: Callable[[], None] | None,
    paired: Callable[[int], Paired | None] = lambda _nbytes: None,
) -> _Opened:
    """A region for one worker's round (the alternation's, where `paired` holds one of this
    size), and its layout sent to that worker. Raises Unshareable where none can be made."""
    fresh = inputs.FreshInputs(specs, msg["workload"], int(msg["seed"]), device, custom)
    args = fresh(int(msg["first_index"]))
    layout, out_slots, nbytes = plan(args, out_specs, msg["workload"]["shapes"])
    held = paired(nbytes)
    if held is not None:
        region, desc, fds = held.region, held.desc, [] if held.fd is None else [held.fd]
    else:
        region, desc, fds = create_region(nbytes, device, free_stale)
    opened = _Opened(
        region,
        desc,
        fds,
        nbytes,
        fresh,
        [region.view(Slot.from_json(x["slot"], nbytes)) if "slot" in x else None for x in layout],
        [region.view(s) for s in out_slots],
    )
    try:
        header = {
            "layout": {
                "inputs": layout,
                "outputs": [s.to_json() for s in out_slots],
                "region": desc,
            }
        }
        if fds:
            send_fd(peer, header, fds[0])
        else:
            channel.send(peer, header)
    except BaseException:
        opened.close(False, None)
        raise
    return opened


@contextmanager
def one_thread(device: torch.device) -> Iterator[None]:
    """On the CPU device, the trusted worker serves a timed round on one of torch's threads.

    Drawn and written on all of them, each call's inputs left this process's OpenMP threads
    spinning (GNU OpenMP waits actively for a while after a parallel region) on the cores the
    timed call was about to use: on 2 cores a 0.3 ms rope call read 3.2 ms in the candidate's
    served rounds and never in the baseline's (the identity read 0.08-0.15, docs/fidelity.md).
    On one thread no parallel region starts, so nothing of this process competes with the
    timed call. A GPU's refills run on the device: nothing changes there."""
    if device.type != "cpu":
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def serve_round(
    peer: socket.socket,
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    out_specs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
    ready: Callable[[bool, str | None], None],
    orphan: Callable[[Region], None] | None = None,
    free_stale: Callable[[], None] | None = None,
    pairs: RoundPairs | None = None,
) -> Served:
    """Serve one timed round of a worker (the candidate's, or the baseline's): `ready(serving,
    reason)` is called once the layout is sent (or the round cannot be served). A round that
    ends early (its worker left, killed or crashed, or broke the protocol) hands its region to
    `orphan`, not freed: that worker may still map it; the parent says when it is dead
    (trusted_worker.py). `free_stale` is what create_region frees before it retries an
    allocation. `pairs` with the message's `pair` (`open`, `close`): the alternation's region
    (RoundPairs). Returns the sampled calls, their outputs (private clones, in call order,
    outputs of one call together) and the round's number of calls, and the seconds spent
    drawing and writing inputs. Raises ProtocolError where the worker broke the protocol."""
    mode = msg.get("pair") if pairs is not None else None
    key = pair_key(msg)

    def paired(nbytes: int) -> Paired | None:
        return pairs.take(key, nbytes) if pairs is not None and mode == "close" else None

    try:
        opened = _open(peer, msg, specs, out_specs, device, custom, free_stale, paired)
    except Unshareable as exc:
        ready(False, str(exc))
        return [], [], 0, 0.0
    ready(True, None)
    calls = _Calls(peer, msg, opened, device)
    served: Served | None = None
    try:
        while not calls.ended:
            calls.step()
        served = calls.result()
        return served
    finally:
        if served is not None and mode == "open" and pairs is not None:
            pairs.keep(
                Paired(
                    key,
                    opened.region,
                    opened.desc,
                    opened.nbytes,
                    opened.fds[0] if opened.fds else None,
                )
            )
        else:
            opened.close(served is not None, orphan)


def serve_interleaved(
    peers: dict[str, socket.socket],
    msgs: dict[str, dict[str, Any]],
    specs: list[dict[str, Any]],
    out_specs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
    ready: Callable[[bool, str | None], None],
    orphans: dict[str, Callable[[Region], None] | None],
    free_stale: Callable[[], None] | None = None,
) -> dict[str, Served | Exception]:
    """Serve the baseline's and the candidate's rounds of one alternation call by call: each
    side's next call's inputs are written only once the other side's call has returned, so
    the two alternate on their shared CPU and meet the same host (timing.waits_on_host says
    why that matters). Each side has a region of its own: the candidate never maps the
    baseline's, which it could write into while the baseline's call runs.

    `peers` and `msgs` are keyed `baseline` (served first) and `candidate`. A side that breaks
    the protocol or leaves drops out (its ProtocolError or AttachFailed is its outcome, its
    region goes to its `orphans` entry) and the other is served to its end, so that neither
    worker is left waiting. Returns each side's outcome: serve_round's tuple, or the error."""
    opened: dict[str, _Opened] = {}
    try:
        for side in ("baseline", "candidate"):
            opened[side] = _open(
                peers[side], msgs[side], specs, out_specs, device, custom, free_stale
            )
    except Unshareable as exc:
        for region in opened.values():
            region.close(True, None)
        ready(False, str(exc))
        return {}
    except BaseException:
        for region in opened.values():
            region.close(False, None)
        raise
    ready(True, None)
    calls = {
        side: _Calls(peers[side], msgs[side], opened[side], device, f"the {side}'s worker")
        for side in ("baseline", "candidate")
    }
    outcome: dict[str, Served | Exception] = {}
    held: dict[str, dict[str, Any]] = {}  # a side's request, read once its call returned
    turns = ["baseline", "candidate"]
    try:
        while turns:
            side = turns[0]
            try:
                calls[side].answer(held.pop(side) if side in held else calls[side].receive())
                if calls[side].ended:
                    outcome[side] = calls[side].result()
                else:
                    # Its call runs now; its next request comes once the call has returned (its
                    # worker synchronizes first), and only then may the other side's call run.
                    held[side] = calls[side].receive()
            except (ProtocolError, AttachFailed) as exc:
                outcome[side] = exc
            turns.pop(0)
            if side not in outcome:
                turns.append(side)
    finally:
        for side, region in opened.items():
            region.close(isinstance(outcome.get(side), tuple), orphans.get(side))
    return outcome


class _Calls:
    """The trusted side of one worker's round: each message of that worker answered in turn
    (`step`), everything it says checked against what was served."""

    def __init__(
        self,
        peer: socket.socket,
        msg: dict[str, Any],
        opened: _Opened,
        device: torch.device,
        who: str = "the candidate's worker",
    ):
        self.peer, self.opened, self.device, self.who = peer, opened, device, who
        self.first, self.max_calls = int(msg["first_index"]), int(msg["max_calls"])
        self.sample = [float(u) for u in msg.get("sample", ())]
        self.timeout = float(msg.get("timeout_s") or PEER_TIMEOUT_S)
        self.last: int | None = None  # the index whose inputs the region holds now
        self.timed_served = False
        self.calls: int | None = None
        self.chosen: set[int] = set()
        self.kept: dict[int, list[torch.Tensor]] = {}
        # spent here drawing and writing inputs: the side's refills, not its timed calls
        self.serve_s = 0.0
        self.ended = False

    def step(self) -> None:
        """Read the worker's next message and answer it."""
        self.answer(self.receive())

    def receive(self) -> dict[str, Any]:
        """The worker's next message: once its last call returned, the next call's request."""
        try:
            m, _ = channel.recv(self.peer, self.timeout, 0)
        except (channel.ChannelClosed, channel.ChannelTimeout) as exc:
            raise ProtocolError(
                f"{self.who} left the round ({type(exc).__name__}: {exc})"
            ) from None
        return m

    def answer(self, m: dict[str, Any]) -> None:
        """Check a message of the worker's and answer it: the next call's inputs, or the end."""
        first, last = self.first, self.last
        if self.calls is None and m.get("calls") is not None:
            self.calls = int(m["calls"])
            if not 1 <= self.calls <= self.max_calls:
                raise ProtocolError(
                    f"{self.who} announced {self.calls} calls; the round allows 1 to {self.max_calls}"
                )
            self.chosen = {first + 1 + k for k in timing.picks(self.sample, self.calls)}
        done = m.get("done")
        if done is not None:
            if done != last or last is None or last <= first:
                raise ProtocolError(
                    f"{self.who} reported the outputs of call {done}; the inputs it holds are those of call {last}"
                )
            if self.calls is None:
                raise ProtocolError(
                    f"{self.who} reported outputs before it said how many calls the round has"
                )
            if done in self.chosen:
                timing._sync(self.device.type)
                with trusted():
                    self.kept[done] = [_clone(v) for v in self.opened.out_views]
        if m.get("end") and m.get("attach_failed") and last is None:
            raise AttachFailed(str(m["attach_failed"])[:300])
        if m.get("end"):
            self.ended = True
            return
        index = m.get("next")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProtocolError(
                f"{self.who} sent {str(m)[:200]} where a call's request was expected"
            )
        if index == first and not self.timed_served:
            # The warm-up's inputs (again where a graph attempt fell back to eager timing).
            self.calls, self.chosen = None, set()
        elif first < index <= first + self.max_calls and (last is None or index > last):
            self.timed_served = True
        else:
            raise ProtocolError(
                f"{self.who} asked for the inputs of call {index} after those of call {last}"
            )
        t0 = _perf_counter()
        args = self.opened.fresh(index)
        with trusted():
            for dst, src in zip(self.opened.in_views, args):
                if dst is not None:
                    _copy(dst, src)
        timing._sync(self.device.type)  # written before the worker is told
        self.serve_s += _perf_counter() - t0
        self.last = index
        channel.send(self.peer, {"ready": index})

    def result(self) -> Served:
        """The sampled calls, their outputs' clones, the round's calls, the refills' seconds."""
        missing = sorted(self.chosen - set(self.kept))
        if self.calls is None or missing:
            raise ProtocolError(
                f"{self.who} never reported the outputs of sampled call(s) {missing or 'of the round'}"
            )
        order = sorted(self.kept)
        return order, [t for i in order for t in self.kept[i]], self.calls, self.serve_s


# --- the candidate's side --------------------------------------------------------------------


class SharedInputs:
    """What the timer calls for each call's inputs (`fresh`), its `picker` and `keep`: the
    inputs come from the trusted worker, every call's outputs go back into the region."""

    def __init__(
        self,
        peer: socket.socket,
        specs: list[dict[str, Any]],
        out_specs: list[dict[str, Any]],
        shapes: dict[str, list[int]],
        device: torch.device,
        hooks: Hooks = NO_HOOKS,
    ):
        self.peer, self.specs, self.out_specs, self.shapes, self.device, self.hooks = (
            peer,
            specs,
            out_specs,
            shapes,
            device,
            hooks,
        )
        header, _ = channel.recv(peer, PEER_TIMEOUT_S)
        layout = header.get("layout")
        if not isinstance(layout, dict):
            raise RuntimeError(f"the trusted worker sent no layout: {str(header)[:200]}")
        desc = layout["region"]
        fds = [recv_fd(peer)] if carries_fd(desc) else []
        try:
            self.region = attach_region(desc, fds, device)
        except Exception as exc:  # noqa: BLE001 - said to both sides; the parent times the round the old way
            reason = f"{type(exc).__name__}: {exc}"[:300]
            channel.send(peer, {"end": True, "attach_failed": reason})
            raise AttachFailed(reason) from None
        size = int(desc["nbytes"])
        self.args: list[Any] = [
            self.region.view(Slot.from_json(x["slot"], size)) if "slot" in x else x["value"]
            for x in layout["inputs"]
        ]
        self.outs = [self.region.view(Slot.from_json(s, size)) for s in layout["outputs"]]
        self.calls: int | None = None
        self.done: int | None = None
        self.invalid: list[str] = []

    def _say(self, header: dict[str, Any]) -> None:
        timing._sync(self.device.type)  # the last call and its output copy are finished
        channel.send(self.peer, {**header, "done": self.done, "calls": self.calls})
        self.done = None

    def __call__(self, index: int) -> list[Any]:
        self.hooks.check()
        self._say({"next": index})
        reply, _ = channel.recv(self.peer, PEER_TIMEOUT_S)
        if reply.get("ready") != index:
            raise RuntimeError(f"the trusted worker answered {str(reply)[:200]} for call {index}")
        return self.args

    def picker(self, calls: int) -> set[int]:
        self.calls = calls
        # Every call's outputs are handed over: which are checked is not known here.
        return set(range(calls))

    def keep(self, index: int, result: Any) -> None:
        try:
            outs = inputs.collect_outputs(
                result, self.out_specs, self.specs, self.args, self.shapes, self.device
            )
        except inputs.OutputError as exc:
            self.invalid.append(f"call {index}: {exc}")
            return
        with trusted():
            for dst, src in zip(self.outs, outs):
                _copy(dst, src)
        self.done = index

    def finish(self) -> None:
        self.hooks.check()
        self._say({"end": True})
        self.args, self.outs = [], []
        self.region.close()
