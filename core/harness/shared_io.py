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
from collections.abc import Callable
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
) -> tuple[list[int], list[torch.Tensor], int, float]:
    """Serve one timed round of a worker (the candidate's, or the baseline's): `ready(serving,
    reason)` is called once the layout is sent (or the round cannot be served). A round that
    ends early (its worker left, killed or crashed, or broke the protocol) hands its region to
    `orphan`, not freed: that worker may still map it; the parent says when it is dead
    (trusted_worker.py). `free_stale` is what create_region frees before it retries an
    allocation. `pairs` with the message's `pair` (`open`, `close`): the alternation's region
    (RoundPairs). Returns the sampled calls, their outputs (private clones, in call order,
    outputs of one call together) and the round's number of calls, and the seconds spent
    drawing and writing inputs. Raises ProtocolError where the worker broke the protocol."""
    workload, first = msg["workload"], int(msg["first_index"])
    max_calls = int(msg["max_calls"])
    mode = msg.get("pair") if pairs is not None else None
    fresh = inputs.FreshInputs(specs, workload, int(msg["seed"]), device, custom)
    try:
        args = fresh(first)
        layout, out_slots, nbytes = plan(args, out_specs, workload["shapes"])
        paired = (
            pairs.take(pair_key(msg), nbytes) if pairs is not None and mode == "close" else None
        )
        if paired is not None:
            region, desc = paired.region, paired.desc
            fds = [] if paired.fd is None else [paired.fd]
        else:
            region, desc, fds = create_region(nbytes, device, free_stale)
    except Unshareable as exc:
        ready(False, str(exc))
        return [], [], 0, 0.0
    ended = False
    try:
        in_views = [
            region.view(Slot.from_json(x["slot"], nbytes)) if "slot" in x else None for x in layout
        ]
        out_views = [region.view(s) for s in out_slots]
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
        ready(True, None)
        served = _serve_calls(peer, msg, fresh, first, max_calls, in_views, out_views, device)
        ended = True
        return served
    finally:
        if ended and mode == "open" and pairs is not None:
            pairs.keep(Paired(pair_key(msg), region, desc, nbytes, fds[0] if fds else None))
        else:
            for fd in fds:
                os.close(fd)
            if ended or orphan is None:
                region.close()
            else:
                orphan(region)


def _serve_calls(
    peer: socket.socket,
    msg: dict[str, Any],
    fresh: inputs.FreshInputs,
    first: int,
    max_calls: int,
    in_views: list[torch.Tensor | None],
    out_views: list[torch.Tensor],
    device: torch.device,
) -> tuple[list[int], list[torch.Tensor], int, float]:
    sample = [float(u) for u in msg.get("sample", ())]
    timeout = float(msg.get("timeout_s") or PEER_TIMEOUT_S)
    last = None  # the index whose inputs the region holds now
    timed_served = False
    calls: int | None = None
    chosen: set[int] = set()
    kept: dict[int, list[torch.Tensor]] = {}
    serve_s = 0.0  # spent here drawing and writing inputs: the baseline's refills, not the candidate's time
    while True:
        try:
            m, _ = channel.recv(peer, timeout, 0)
        except (channel.ChannelClosed, channel.ChannelTimeout) as exc:
            raise ProtocolError(
                f"the candidate's worker left the round ({type(exc).__name__}: {exc})"
            ) from None
        if calls is None and m.get("calls") is not None:
            calls = int(m["calls"])
            if not 1 <= calls <= max_calls:
                raise ProtocolError(
                    f"the candidate's worker announced {calls} calls; the round allows 1 to {max_calls}"
                )
            chosen = {first + 1 + k for k in timing.picks(sample, calls)}
        done = m.get("done")
        if done is not None:
            if done != last or last is None or last <= first:
                raise ProtocolError(
                    f"the candidate's worker reported the outputs of call {done}; the inputs it holds are those of call {last}"
                )
            if calls is None:
                raise ProtocolError(
                    "the candidate's worker reported outputs before it said how many calls the round has"
                )
            if done in chosen:
                timing._sync(device.type)
                with trusted():
                    kept[done] = [_clone(v) for v in out_views]
        if m.get("end") and m.get("attach_failed") and last is None:
            raise AttachFailed(str(m["attach_failed"])[:300])
        if m.get("end"):
            break
        index = m.get("next")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ProtocolError(
                f"the candidate's worker sent {str(m)[:200]} where a call's request was expected"
            )
        if index == first and not timed_served:
            # The warm-up's inputs (again where a graph attempt fell back to eager timing).
            calls, chosen = None, set()
        elif first < index <= first + max_calls and (last is None or index > last):
            timed_served = True
        else:
            raise ProtocolError(
                f"the candidate's worker asked for the inputs of call {index} after those of call {last}"
            )
        t0 = _perf_counter()
        args = fresh(index)
        with trusted():
            for dst, src in zip(in_views, args):
                if dst is not None:
                    _copy(dst, src)
        timing._sync(device.type)  # written before the candidate's worker is told
        serve_s += _perf_counter() - t0
        last = index
        channel.send(peer, {"ready": index})
    missing = sorted(chosen - set(kept))
    if calls is None or missing:
        raise ProtocolError(
            f"the candidate's worker never reported the outputs of sampled call(s) {missing or 'of the round'}"
        )
    order = sorted(kept)
    return order, [t for i in order for t in kept[i]], calls, serve_s


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
