"""Run the cheat suite and the honest candidates on a GPU, and write a table.

    PYTHONPATH=. python3 tests/gpu/run_cheats.py --out DIR [--device cuda:0] [--only NAME ...] [--part K/N]

(`--part 1/3` runs the first third of the rows, for machines that limit one command's time;
each part writes its own cheats-K-of-N.md and .json.)

Every cheat of tests/cheats/ that makes sense on a GPU, plus the GPU-only ones of
tests/gpu/cheats/ (a side stream, a thread finishing after return, patched CUDA events, a graph
captured empty, a table of precomputed outputs), each with the outcome it must have on a GPU;
then every bundled task's starter and baseline and the fixtures' correct candidates, which
must pass with no integrity flag. Writes DIR/cheats.md (the table) and DIR/cheats.json (every
result), prints the table, and exits 1 if any row is not as expected.

The expectations are those of tests/cheats/catalogue.py, except where the GPU's timing
changes which defense fires first (the events and the impossibility floor exist only here).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.evaluation import sandbox
from core.evaluation.evaluator import Evaluator
from core.model.task import Limits
from core.tasks.discovery import discover
from core.tasks.spec import load_task
from tests.cheats.catalogue import PUBLISHED_CANDIDATES, TASKS, by_name, outcome_problems

GPU_CHEATS = ROOT / "tests" / "gpu" / "cheats"
FIXTURE_CANDIDATES = ROOT / "tests" / "fixtures" / "candidates"
HANG_LIMITS = Limits(compile_s=120, correctness_s=10, performance_s=120)


@dataclass(frozen=True)
class Row:
    name: str
    path: Path
    task: str  # a key of TASKS, or a bundled task id
    expect: str  # as in tests/cheats/catalogue.py, or `honest`
    notes: tuple[str, ...] = ()
    marker: str | None = None
    defense: str = ""


def _cpu_cheat(
    name: str,
    task: str | None = None,
    expect: str | None = None,
    notes: tuple[str, ...] | None = None,
) -> Row:
    c = by_name(name)
    return Row(
        name,
        c.path,
        task or c.task,
        expect or c.expect,
        c.notes if notes is None else notes,
        c.marker,
        c.defense,
    )


def _gpu_cheat(name: str, expect: str, notes: tuple[str, ...], defense: str) -> Row:
    return Row(f"gpu/{name}", GPU_CHEATS / f"{name}.py", "axpy_gpu", expect, notes, None, defense)


ROWS = [
    # Cheats of tests/cheats: the same outcome as on the CPU device.
    *(
        _cpu_cheat(n)
        for n in (
            "secrets_hunt",
            "parent_memory",
            "frames_gc",
            "visible_only",
            "pow2_only",
            "constant",
            "subclass",
            "lazy_view",
            "alias_input",
            "lower_precision",
            "gemm_fp8",
            "patch_matmul",
            "patch_harness_sysmodules",
            "forged_verdicts",
            "daemon",
            "fork_bomb",
            "infinite_loop",
            "segfault",
            "abort",
            "race",
            "kill_harness",
        )
    ),
    # On the GPU fixture, whose first workload is timed with events: the CPU outcome holds.
    _cpu_cheat("cache_pointer", "axpy_gpu"),
    _cpu_cheat("cache_id", "axpy_gpu"),
    _cpu_cheat("cache_shape", "axpy_gpu"),
    _cpu_cheat("uninitialized", "axpy_gpu", "stage:correctness:failed"),
    _cpu_cheat("patch_torch_add", "axpy_gpu"),
    _cpu_cheat("patch_perf_counter", "axpy_gpu"),
    _cpu_cheat("patch_harness_import", "axpy_gpu"),
    # The harness's tensor work under the candidate's hooks (docs/integrity.md, class 1).
    _cpu_cheat("mode_function_refill", "axpy_gpu"),
    _cpu_cheat("mode_dispatch_lazy", "axpy_gpu"),
    _cpu_cheat("lazy_on_read", "axpy_gpu"),
    _cpu_cheat("patch_tensor_methods", "axpy_gpu"),
    # Multi-rank (class 2): the patch is flagged on any world size; on one GPU the task runs on
    # one rank. peer_seed needs peers: run it with a device group (--device cuda:0-1 --only peer_seed).
    _cpu_cheat("patch_dist_barrier"),
    # Stochastic outputs (class 4), at the sampling task's GPU workloads (B = 1 runs 64 seeds).
    _cpu_cheat("sampling_argmax_fallback"),
    _cpu_cheat(
        "sampling_greedy", expect="stage:correctness:failed:pooled|stage:correctness:failed"
    ),
    # On a GPU the events time the device: a clock slowed through gc reaches only the host side,
    # where it sizes the timed rounds (calls per round): a thousandfold slower clock makes the
    # rounds so long that the stage's limit ends them (H200, bench/h200_turns.sh). Either way
    # the candidate gains nothing: it is timed at its true speed or not at all.
    _cpu_cheat(
        "patch_harness_gc",
        "axpy_gpu",
        "neutral:slow|stage:performance:timeout",
        ("scan:introspection",),
    ),
    # GPU only.
    _gpu_cheat(
        "side_stream",
        "flag:timed_output_mismatch|flag:faster_than_speed_of_light",
        ("scan:streams",),
        "timed outputs copied on the timed stream; the impossibility floor",
    ),
    _gpu_cheat(
        "thread_after_return",
        "flag:timed_output_mismatch|flag:faster_than_speed_of_light",
        ("scan:threads",),
        "timed outputs copied the moment the call returns; the impossibility floor",
    ),
    _gpu_cheat(
        "patch_cuda_events",
        "flag:torch_patched",
        ("scan:monkeypatch",),
        "events created, recorded and read through C functions bound at import; replacing them is proof of tampering",
    ),
    _gpu_cheat(
        "graph_capture_noop",
        "flag:timed_output_mismatch",
        ("scan:cuda_graphs",),
        "graph outputs checked after sampled replays",
    ),
    _gpu_cheat(
        "mode_flush_launch",
        "flag:harness_hooked",
        ("scan:tensor_subclass",),
        "a mode left on the stack is found before every refill; harness tensor work runs with dispatch off",
    ),
    _gpu_cheat(
        "precompute_from_frames",
        "neutral:sane",
        ("scan:introspection",),
        "the trusted worker draws the timed inputs (CUDA IPC): no seed in the candidate's process",
    ),
    _cpu_cheat("seed_hunt", "axpy_gpu"),
    # Issue 37: one warm harness runs every row, as `arena serve` does: a candidate that fills
    # /tmp, one that looks for every earlier candidate's files, one that checks /tmp. Each
    # worker's own mount namespace (core/harness/isolation.py) must also leave CUDA IPC and the
    # device working: the honest rows say so (no old-path note, no isolation note).
    _cpu_cheat("tmp_hog", "axpy_gpu"),
    _cpu_cheat("earlier_candidates", "axpy_gpu"),
    _cpu_cheat("tmp_check", "axpy_gpu"),
]
# Not run here: memory_hog (no memory limit on GPU devices without the sandbox's cgroup: it
# would take the host's RAM), cache_content (numpy on the host), the sandbox-only cheats, the
# CPU variants of precompute_from_frames and thread_after_return (GPU variants above), and the
# two that rewrite files (tests/test_cheats.py covers them; nothing there is GPU-specific).
# peer_seed runs only when --only names it (it needs a device group of two GPUs or more).
ROWS_WITH_PEERS = [
    _cpu_cheat("peer_seed"),
    _cpu_cheat("rank_seed_swap"),
    # The loopback meter is the CPU ranks' (traffic.py): on GPUs a side channel between ranks
    # is open (docs/integrity.md), so this row only shows what it gets.
    _cpu_cheat("rank_side_channel", expect="gap"),
]
ISOLATION_NOTES = ("not isolated", "inputs drawn in the candidate's process")


def honest_rows() -> list[Row]:
    rows = []
    for task in discover():
        for role in ("starter", "baseline"):
            rows.append(Row(f"honest/{task.id}/{role}", task.file(f"{role}.py"), task.id, "honest"))
    for key, path in PUBLISHED_CANDIDATES:  # published kernels (Liger-Kernel) as candidates
        rows.append(Row(f"honest/published/{path.stem}", path, key, "honest"))
    for key in ("axpy", "axpy_gpu"):
        for path in (
            FIXTURE_CANDIDATES / "axpy_torch.py",
            TASKS[key] / "starter.py",
            TASKS[key] / "baseline.py",
        ):
            rows.append(Row(f"honest/{key}/{path.stem}", path, key, "honest"))
    return rows


def _running(marker: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False
    ).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def _load(key: str):
    return load_task(TASKS[key]) if key in TASKS else next(t for t in discover() if t.id == key)


def check(row: Row, result) -> list[str]:
    if row.expect == "honest":
        problems = []
        if result.status != "passed":
            stage = result.stage(result.failed_stage) if result.failed_stage else None
            problems.append(
                f"an honest candidate did not pass: {result.status} at {result.failed_stage}: {stage.message if stage else ''}"
            )
        if result.integrity_flags:
            problems.append(f"an honest candidate was flagged: {result.integrity_flags}")
        texts = [s.note or "" for s in result.stages] + [
            n for w in result.workloads for n in (w.notes or [])
        ]
        lost = [t for t in texts if any(n in t for n in ISOLATION_NOTES)]
        if lost and sandbox.is_sandboxed(sandbox.sandbox_status()):  # unsandboxed as root the
            # candidate's uid cannot open root's CUDA IPC handles: the old path is legitimate there
            problems.append(f"isolated or shared less than it should be: {lost[0][:200]}")
        return problems
    problems = outcome_problems(row.expect, row.notes, result)
    if row.marker:
        time.sleep(0.5)
        if _running(row.marker):
            problems.append(f"processes named {row.marker} survived the evaluation")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="folder for cheats.md and cheats.json"
    )
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--only", nargs="*", help="run only these rows (names or substrings)")
    parser.add_argument("--part", help="K/N: run the K-th of N equal slices of the rows")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = ROWS + honest_rows()
    if args.only:
        rows = [r for r in rows + ROWS_WITH_PEERS if any(o in r.name for o in args.only)]
    stem = "cheats"
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        if not 1 <= k <= n:
            parser.error("--part K/N needs 1 <= K <= N")
        rows = rows[(k - 1) * len(rows) // n : k * len(rows) // n]
        stem = f"cheats-{k}-of-{n}"
    records = []
    with Evaluator(args.device) as evaluator:
        for row in rows:
            start = time.monotonic()
            record: dict = {
                "name": row.name,
                "task": row.task,
                "expect": row.expect,
                "defense": row.defense,
            }
            try:
                limits = HANG_LIMITS if row.name == "infinite_loop" else None
                result = evaluator.evaluate(_load(row.task), row.path, limits=limits)
                problems = check(row, result)
                record.update(
                    status=result.status,
                    failed_stage=result.failed_stage,
                    points=result.points,
                    speedup=result.speedup,
                    flags=result.integrity_flags,
                    notes=result.review_notes,
                    message=(
                        result.stage(result.failed_stage).message if result.failed_stage else None
                    ),
                    modes=sorted({w.mode for w in result.workloads if w.mode}),
                    result=result.to_json(),
                )
            except Exception as exc:  # noqa: BLE001 - one broken row must not hide the others
                problems = [f"{type(exc).__name__}: {exc}"]
                record["traceback"] = traceback.format_exc()
            record.update(
                ok=not problems, problems=problems, seconds=round(time.monotonic() - start, 1)
            )
            records.append(record)
            _save(
                args.out, stem, records, args.device
            )  # after every row: a run cut short keeps what it measured
            print(
                f"{'ok  ' if not problems else 'FAIL'} {row.name:45s} {record.get('status', 'error'):22s} {record['seconds']:6.1f} s  {'; '.join(problems)[:200]}",
                flush=True,
            )
    info = _save(args.out, stem, records, args.device)
    print(table(records, args.device))
    return 1 if info["failed"] else 0


def _save(out: Path, stem: str, records: list[dict], device: str) -> dict:
    info = {"device": device, "rows": len(records), "failed": sum(not r["ok"] for r in records)}
    (out / f"{stem}.json").write_text(
        json.dumps({"info": info, "records": records}, indent=1, default=str)
    )
    (out / f"{stem}.md").write_text(table(records, device))
    return info


def _short(texts: list[str]) -> str:
    return (
        ", ".join(
            sorted(
                {
                    t.split(":")[0] if not t.startswith("scan:") else ":".join(t.split(":")[:2])
                    for t in texts
                }
            )
        )
        or "-"
    )


def table(records: list[dict], device: str) -> str:
    lines = [
        f"# Cheat suite on {device}",
        "",
        f"{sum(r['ok'] for r in records)} of {len(records)} rows as expected.",
        "",
        "| row | task | expected | status | failed stage | flags | notes | speedup | ok | problems |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        speedup = f"{r['speedup']:.2f}" if isinstance(r.get("speedup"), (int, float)) else "-"
        lines.append(
            f"| {r['name']} | {r['task']} | {r['expect']} | {r.get('status', 'error')} | {r.get('failed_stage') or '-'} | "
            f"{_short(r.get('flags', []))} | {_short(r.get('notes', []))} | {speedup} | {'yes' if r['ok'] else '**no**'} | "
            f"{'; '.join(r['problems'])[:300].replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
