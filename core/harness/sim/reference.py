"""The trusted worker's side of a `sim:` device's value check: the reference at GPU size on the
CPU, computed once per (task files, workload, seed) and cached, compared with the counted call's
known elements (sim_values) under the task's tolerance rule (compare.compare: atol, rtol,
min_match).

Where the reference does not finish within its budget (`ARENA_SIM_REFERENCE_S`, default
`BUDGET_S` seconds per workload), the reply says the check was skipped and why, and the
workload's notes say so. A task with its own check.py (a statistical check of a sampler) is
not value-checked: a few thousand elements are not what its check judges; one whose check.py
declares itself elementwise is judged by it on a hybrid output (sim_hybrid).

Seed and cache. The counted call's seed is the workload's performance seed, drawn per
evaluation from the engine's secret (never known to a candidate before its counted call, so no
output can be precomputed). The cache is the trusted worker's memory (`MEMORY_BYTES`): a batch's
candidates share the worker and the workloads' seeds, so the reference is computed once per
batch. It is not kept on disk by default: inside the sandbox the candidate runs as the same
user as the trusted worker, so a reference result on disk would be a precomputed answer for the
next candidate. An operator may name a folder (`ARENA_SIM_CACHE`, e.g. for sweeps with fixed
seeds): entries there carry their key and a SHA-256 of their contents, and a stale or corrupt
one is recomputed, never trusted; the folder is bounded (`CACHE_BYTES`, oldest dropped first).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.harness import compare
from core.harness.sim import hybrid

BUDGET_S = 30.0  # seconds the reference may take at one GPU workload
MEMORY_BYTES = 2 << 30  # the trusted worker's cache of reference results
CACHE_BYTES = 4 << 30  # the on-disk cache's bound (ARENA_SIM_CACHE)
ENTRY_BYTES = 1 << 30  # a larger reference result is not cached (recomputed each time)
FORMAT = "sim-reference-1"  # bump when an entry's contents change: older entries never match
MAX_SAMPLES = 8192  # elements per output a candidate's worker may send


def cache_root() -> Path | None:
    """`ARENA_SIM_CACHE` (an operator's choice, e.g. for sweeps): a folder where entries are kept
    across processes; None (the default): entries live in the trusted worker's memory only."""
    found = os.environ.get("ARENA_SIM_CACHE")
    return Path(found) if found else None


_MEMORY: OrderedDict[str, dict[str, Any]] = OrderedDict()


def _entry_bytes(entry: dict[str, Any]) -> int:
    return sum(
        t.numel() * t.element_size()
        for t in entry.get("outputs") or []
        if isinstance(t, torch.Tensor)
    )


def _remember(key: str, entry: dict[str, Any]) -> None:
    """Keep an entry in memory, the oldest dropped past `MEMORY_BYTES`."""
    if _entry_bytes(entry) > MEMORY_BYTES:
        return
    _MEMORY[key] = entry
    _MEMORY.move_to_end(key)
    while sum(_entry_bytes(e) for e in _MEMORY.values()) > MEMORY_BYTES:
        _MEMORY.popitem(last=False)


def _key(sources: dict[str, Any], specs: Any, out_specs: Any, workload: Any, seed: int) -> str:
    h = hashlib.sha256(FORMAT.encode())
    for name in ("reference.py", "inputs.py"):
        src = sources.get(name) or b""
        h.update(src if isinstance(src, bytes) else str(src).encode())
    h.update(json.dumps([specs, out_specs, workload, seed], sort_keys=True, default=str).encode())
    return h.hexdigest()


def _load(path: Path, key: str) -> dict[str, Any] | None:
    """A cached entry, or None when it is missing, stale (another key) or corrupt."""
    try:
        raw = path.read_bytes()
        digest, body = raw[:32], raw[32:]
        if hashlib.sha256(body).digest() != digest:
            return None
        entry = torch.load(io.BytesIO(body), weights_only=True)
    except Exception:  # noqa: BLE001 - never trusted: recomputed
        return None
    return entry if isinstance(entry, dict) and entry.get("key") == key else None


def _store(path: Path, entry: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(entry, buffer)
    body = buffer.getvalue()
    if len(body) > ENTRY_BYTES:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
        files = sorted(path.parent.glob("*.pt"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        for old in files:  # oldest first, until the cache is within its bound
            if total <= CACHE_BYTES or old == path:
                break
            total -= old.stat().st_size
            old.unlink(missing_ok=True)
    except OSError:
        pass


class _Overtime(Exception):
    pass


def _within(budget: float, fn: Callable[[], Any]) -> Any:
    """fn(), or _Overtime once `budget` seconds have passed (a timer signal: the trusted worker's
    main thread; elsewhere it runs to the end)."""
    if threading.current_thread() is not threading.main_thread():
        return fn()

    def alarm(*_: Any) -> None:
        raise _Overtime

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def reference_entry(
    reference_run: Callable[..., Any],
    specs: list[dict[str, Any]],
    out_specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    sources: dict[str, Any],
    root: Path | None = None,
) -> dict[str, Any]:
    """{"key", "outputs": [tensor], "changed": [bytes changed or None], "seconds"} or
    {"key", "skipped": why}, from the cache or computed (and cached)."""
    from core.harness.sim import predict as sim_predict

    root = root or cache_root()
    key = _key(sources, specs, out_specs, workload, seed)
    entry = _MEMORY.get(key)
    path = root / "reference" / f"{key}.pt" if root is not None else None
    if entry is None and path is not None:
        entry = _load(path, key)
    if entry is not None:
        _remember(key, entry)
        return entry
    budget = float(os.environ.get("ARENA_SIM_REFERENCE_S") or BUDGET_S)
    started = time.perf_counter()
    names = [s["name"] for s in specs]
    try:
        args = sim_predict.gpu_inputs(specs, workload, seed, custom)
        before = {
            i: args[names.index(o["inplace_of"])].clone()
            for i, o in enumerate(out_specs)
            if o.get("inplace_of") in names
        }
        with torch.no_grad():
            result = _within(
                max(0.0, budget - (time.perf_counter() - started)) or 1e-3,
                lambda: reference_run(*args),
            )
    except _Overtime:
        entry = {
            "key": key,
            "skipped": f"the reference at this size takes over {budget:g} s on the CPU",
        }
        _keep(key, entry, path)
        return entry
    except Exception as exc:  # noqa: BLE001 - out of memory, or a reference that fails at this size: said, not cached
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        return {
            "key": key,
            "skipped": f"the reference failed at this size ({type(exc).__name__}: {first})",
        }
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    outs = [t.detach().contiguous() if isinstance(t, torch.Tensor) else t for t in outs]
    changed = [  # bytes the reference changed, at the input's element size
        int((outs[i].reshape(-1) != before[i].reshape(-1)).sum()) * before[i].element_size()
        if i in before and i < len(outs)
        else None
        for i in range(len(out_specs))
    ]
    entry = {
        "key": key,
        "outputs": outs[: len(out_specs)],
        "changed": changed,
        "seconds": time.perf_counter() - started,
    }
    _keep(key, entry, path)
    return entry


def _keep(key: str, entry: dict[str, Any], path: Path | None) -> None:
    _remember(key, entry)
    if path is not None:
        _store(path, entry)


def judge(
    entry: dict[str, Any],
    values: Any,
    out_specs: list[dict[str, Any]],
    rule: dict[str, Any],
) -> dict[str, Any]:
    """The trusted worker's reply: {"ok", "wrong": message or None, "checked": elements,
    "changed_bytes": per output, "skipped": why or None, "malformed": why or None}."""
    reply: dict[str, Any] = {
        "ok": True,
        "wrong": None,
        "checked": 0,
        "skipped": entry.get("skipped"),
        "malformed": None,
        "changed_bytes": [None] * len(out_specs),
    }
    if reply["skipped"]:
        return reply
    outs, changed = entry["outputs"], entry["changed"]
    for i, n in enumerate(changed[: len(out_specs)]):
        reply["changed_bytes"][i] = n
    given = values.get("outputs") if isinstance(values, dict) else None
    if not isinstance(given, list):
        reply["skipped"] = (
            str((values or {}).get("reason") or "no values")[:300]
            if isinstance(values, dict)
            else "no values"
        )
        return reply
    for i, sample in enumerate(given[: len(out_specs)]):
        if sample is None or i >= len(outs) or not isinstance(outs[i], torch.Tensor):
            continue
        index, value = (
            (sample.get("index"), sample.get("value")) if isinstance(sample, dict) else (None, None)
        )
        want = outs[i].reshape(-1)
        pair = hybrid.well_formed(index, value, want.numel(), MAX_SAMPLES)
        if pair is None:
            reply["malformed"] = hybrid.malformed(out_specs[i]["name"])
            return reply
        index, value = pair
        if not index:
            continue
        got = torch.tensor(value, dtype=torch.float32)
        ref = want[torch.tensor(index, dtype=torch.long)].float()
        verdict = compare.compare(
            got, ref, float(rule["atol"]), float(rule["rtol"]), float(rule.get("min_match", 1.0))
        )
        reply["checked"] += len(index)
        if not verdict.get("passed"):
            bad = int(
                (~torch.isclose(got, ref, rtol=float(rule["rtol"]), atol=float(rule["atol"]))).sum()
            )
            reply["wrong"] = (
                f"sim_wrong_output: the counted call's output `{out_specs[i]['name']}` differs from the reference at "
                f"{bad} of {len(index)} elements its exact programs computed ({verdict.get('message', '')[:300]}): "
                "a kernel that computes less when it is counted than when it is checked is predicted for work it does not do"
            )
            return reply
    return reply


def serve(
    reference_run: Callable[..., Any],
    job: dict[str, Any],
    custom: Any,
    check: Any,
    sources: dict[str, Any],
    msg: dict[str, Any],
) -> dict[str, Any]:
    """The trusted worker's `sim_values` request: {workload, seed, values}."""
    out_specs = job["outputs"]
    if check is not None and hybrid.elementwise(sources.get("check.py")):
        workload, seed = msg["workload"], int(msg["seed"])
        entry = reference_entry(
            reference_run, job["inputs"], out_specs, workload, seed, custom, sources
        )
        from core.harness.sim import predict as sim_predict

        reply = hybrid.judge(
            entry,
            msg.get("values"),
            out_specs,
            job["correctness"],
            check,
            lambda: sim_predict.gpu_inputs(job["inputs"], workload, seed, custom),
        )
        reply["reference_s"] = entry.get("seconds")
        return reply
    if check is not None:
        return {
            "ok": True,
            "wrong": None,
            "checked": 0,
            "malformed": None,
            "changed_bytes": [None] * len(out_specs),
            "skipped": "not applicable: the task judges its outputs with its own check.py",
        }
    entry = reference_entry(
        reference_run, job["inputs"], out_specs, msg["workload"], int(msg["seed"]), custom, sources
    )
    reply = judge(entry, msg.get("values"), out_specs, job["correctness"])
    reply["reference_s"] = entry.get("seconds")
    return reply
