"""Regenerate core/data/sim_baselines.json: each task's measured baseline time per GPU,
implementation and workload, with the provenance of every figure, and the per-task model a
`sim:` device uses for shapes the table lacks (core/devices/sim/baselines.py, docs/simulation.md
"Measured baselines").

    PYTHONPATH=. python3 bench/sim_baselines.py      # every bench/results/*_tasks*.json, *_baselines.json and sim_h200*.json
    PYTHONPATH=. python3 bench/sim_baselines.py bench/results/sim_h200.json ...
    PYTHONPATH=. python3 bench/sim_baselines.py --legacy-provenance   # once: the code behind the runs made before provenance (git)

bench/sim_h200.py (the GPU call) writes the table itself through `update_table`; this script
rebuilds it from every committed run.

Reads three formats. bench/sim_h200.py's and the production-baseline runs' ({records: [{gpu,
task, axes, baseline_impl, selected, median_us, spread}]}: every importable implementation of a
task's `baselines:` per workload, `selected` marking the one the baseline itself runs there), and
bench/tasks_gpu.py's ({device, records: [{task, baseline, starter}]}: every timed workload of
either side carries the baseline's own timing). A run made by bench/sim_h200.py carries each
task's provenance (`provenance[task]`: the code hash of baseline.py and what it imports, and the
library versions); for the runs made before that, the code is the task's at the commit that
added the run's file (`LEGACY`, written once from git by --legacy-provenance).

Per (GPU, task, implementation) the table keeps the runs of the code that runs today
(core/devices/sim/provenance.py); where none is of today's code, the newest code's runs, whose
entry a `sim:` device then reports as stale (and tests/test_sim_baselines.py fails on). A
workload measured in several runs keeps the median of their medians, and its `band`: the
baseline's own uncertainty (the larger of its runs' spread around their median and the
interquartile spread of its timed calls over 2, at least RUN_TO_RUN_FLOOR).
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.devices.device import DeviceError, sim_info
from core.devices.sim.baselines import DEFAULT_IMPL, TABLE_FILE, axes_key, fit_task_model
from core.devices.sim.provenance import code_digest, task_code
from core.evaluation.job import roofline_for
from core.model.workload import Workload
from core.tasks.discovery import find_task
from core.tasks.fields import TaskError

LEGACY = ROOT / "bench" / "results" / "sim_baselines_legacy_provenance.json"
PATTERNS = ("*_tasks*.json", "*_baselines.json", "sim_h200*.json")
# Two runs of one baseline on one H200 agree to about this much (the median over workloads of
# |run / median of runs - 1| in the committed runs, 2026-11-29 to 12-01, is 0.5%; the 80th percentile 2%).
RUN_TO_RUN_FLOOR = 0.02


@dataclass
class Measured:
    """One (gpu, task, implementation, code): its medians per workload (one per run), the
    interquartile spreads of those runs, the workloads where the baseline selects it, and where
    the figures came from."""

    medians: dict[str, list[float]] = field(default_factory=dict)
    spreads: dict[str, list[float]] = field(default_factory=dict)
    selected: set[str] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    order: int = (
        0  # the newest run's place in the sources (the newest code wins where none is today's)
    )


Found = dict[tuple[str, str, str], dict[str, Measured]]  # (gpu, task, impl) -> code -> runs


def _name(path: Path) -> str:
    p = path.resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


@dataclass
class Run:
    """One run file: where its figures came from and the code behind each task's."""

    name: str
    order: int
    provenance: dict[str, Any]  # task -> {code_sha256, files}: bench/sim_h200.py's runs
    legacy: dict[str, Any]  # the same for a run made before provenance (LEGACY)
    versions: dict[str, str]

    def code_of(self, task: str) -> tuple[str, dict[str, str]]:
        entry = self.provenance.get(task) or self.legacy.get(task) or {}
        files = entry.get("files") or {}
        today = _today(task)
        if today is not None and files and files == today.files:
            # the same bytes are the same code, whatever hash the run's Python gave it
            return today.code_sha256, files
        return entry.get("code_sha256") or "unknown", files

    def add(
        self,
        found: Found,
        key: tuple[str, str, str],
        axes: dict[str, Any],
        median: Any,
        spread: Any,
    ) -> Measured | None:
        if not (isinstance(median, (int, float)) and median > 0):
            return None
        code, files = self.code_of(key[1])
        m = found.setdefault(key, {}).setdefault(code, Measured())
        workload = axes_key(axes)
        m.medians.setdefault(workload, []).append(float(median))
        if isinstance(spread, (int, float)) and spread >= 0:
            m.spreads.setdefault(workload, []).append(float(spread))
        if self.name not in m.sources:
            m.sources.append(self.name)
        m.versions.update(self.versions)
        m.files = files or m.files
        m.order = max(m.order, self.order)
        return m


def _today(task_id: str) -> Any:
    """Today's code of a bundled task (provenance.TaskCode), or None for one gone."""
    try:
        return task_code(find_task(task_id).path)
    except TaskError:
        return None


def collect(
    paths: list[Path], legacy: dict[str, Any] | None = None, names: dict[Path, str] | None = None
) -> Found:
    """(gpu, task, impl) -> code_sha256 -> what was measured of it. `names`: what to call a
    run file in the sources (a GPU call's file before it is committed under bench/results)."""
    legacy = legacy if legacy is not None else _read_legacy()
    found: Found = {}
    runs = [(path, json.loads(path.read_text())) for path in paths]
    # oldest first: where no run is of today's code, the newest code's runs are kept
    runs.sort(key=lambda r: _when(r[0], r[1], legacy))
    for order, (path, data) in enumerate(runs):
        device = data.get("device") or {}
        peaks = device.get("peaks")
        run = Run(
            (names or {}).get(path) or _name(path),
            order,
            data.get("provenance") or {},
            (legacy.get("files") or {}).get(path.name) or {},
            {
                **{k: str(v) for k, v in (device.get("versions") or {}).items() if v},
                **(data.get("versions") or {}),
            },
        )
        for record in data.get("records") or []:
            if "median_us" in record and "axes" in record:
                # a production-baseline run: one implementation at one workload
                gpu = record.get("gpu") or peaks
                if not gpu or not record.get("correct", True) or record.get("mode") == "predicted":
                    continue
                impl = record.get("baseline_impl") or DEFAULT_IMPL
                m = run.add(
                    found,
                    (gpu, record["task"], impl),
                    record["axes"],
                    record["median_us"],
                    record.get("spread"),
                )
                if m is not None and record.get("selected"):
                    m.selected.add(axes_key(record["axes"]))
                continue
            if not peaks:
                print(f"{path}: no device.peaks, skipped", file=sys.stderr)
                break
            for side in ("baseline", "starter", "candidate"):
                result = record.get(side)
                if not isinstance(result, dict):
                    continue
                impl = record.get("baseline_impl") or result.get("baseline_impl") or DEFAULT_IMPL
                for w in result.get("workloads") or []:
                    if w.get("mode") != "predicted":
                        base = w.get("baseline") or {}
                        run.add(
                            found,
                            (peaks, record["task"], impl),
                            w["axes"],
                            base.get("median_us"),
                            base.get("spread"),
                        )
    return found


def _when(path: Path, data: dict[str, Any], legacy: dict[str, Any]) -> str:
    """When a run was made: its own `measured_at`, else the commit time of its file (LEGACY)."""
    return str(
        data.get("measured_at") or ((legacy.get("committed") or {}).get(path.name)) or "0000"
    )


def _band(medians: list[float], spreads: list[float]) -> float:
    """The baseline figure's own uncertainty: how far its runs lie from their median, half the
    interquartile spread of its timed calls, and at least RUN_TO_RUN_FLOOR."""
    mid = statistics.median(medians)
    runs = max(abs(m / mid - 1) for m in medians) if len(medians) > 1 else 0.0
    calls = statistics.median(spreads) / 2 if spreads else 0.0
    return round(max(RUN_TO_RUN_FLOOR, runs, calls), 4)


def build_entry(gpu: str, task_id: str, code: str, measured: Measured) -> dict[str, Any] | None:
    try:
        task, info = find_task(task_id), sim_info(f"sim:{gpu}")
    except (TaskError, DeviceError) as exc:
        print(f"{task_id} on {gpu}: {exc}; skipped", file=sys.stderr)
        return None
    entry: dict[str, Any] = {"workloads": {}}
    points = []
    for key, medians in sorted(measured.medians.items()):
        axes = {k: int(v) for k, v in (kv.split("=") for kv in key.split(","))}
        median = statistics.median(medians)
        roof = roofline_for(task, Workload(axes), info)
        entry["workloads"][key] = {
            "median_us": round(median, 4),
            "runs": len(medians),
            "band": _band(medians, measured.spreads.get(key, [])),
            **({"roofline_us": round(roof, 4)} if roof else {}),
        }
        if roof:
            points.append((roof, median))
    if measured.selected:
        entry["selected"] = sorted(measured.selected)  # where the baseline runs this implementation
    model = fit_task_model(points)
    if model is not None:
        entry["model"] = {
            k: round(v, 4) if isinstance(v, float) else v for k, v in model.to_json().items()
        }
    entry["provenance"] = {
        "code_sha256": code,
        "files": dict(sorted(measured.files.items())),
        "versions": dict(sorted(measured.versions.items())),
        "sources": list(measured.sources),
    }
    return entry


def choose(task_id: str, codes: dict[str, Measured]) -> tuple[str, Measured]:
    """Today's code's runs where there are any, else the newest code's (a stale entry)."""
    try:
        today = task_code(find_task(task_id).path).code_sha256
    except TaskError:
        today = None
    if today in codes:
        return today, codes[today]  # type: ignore[index]
    return max(codes.items(), key=lambda kv: kv[1].order)


def build(found: Found, sources: list[str]) -> dict[str, Any]:
    gpus: dict[str, Any] = {}
    for (gpu, task_id, impl), codes in sorted(found.items()):
        code, measured = choose(task_id, codes)
        entry = build_entry(gpu, task_id, code, measured)
        if entry is not None:
            gpus.setdefault(gpu, {}).setdefault(task_id, {})[impl] = entry
    return {
        "about": "measured baseline medians per GPU, task, baseline implementation and workload (axes sorted), "
        "each with its own uncertainty (band), the workloads where the baseline selects each implementation, "
        "per task and implementation t = intercept_us + slope x roofline_us fitted on them, and the provenance "
        "of the figures: the code they were measured with (core/devices/sim/provenance.py) and the library "
        "versions; made by bench/sim_baselines.py and bench/sim_h200.py",
        "schema_version": 2,
        "sources": sources,
        "gpus": gpus,
    }


def update_table(table: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """`table` with every (gpu, task) that `fresh` measured replaced by fresh's entries (a run of
    some tasks leaves the others' figures as they were)."""
    gpus = {g: dict(t) for g, t in (table.get("gpus") or {}).items()}
    for gpu, tasks in fresh["gpus"].items():
        for task_id, impls in tasks.items():
            gpus.setdefault(gpu, {})[task_id] = impls
    sources = list(dict.fromkeys(list(table.get("sources") or []) + list(fresh["sources"])))
    return {**fresh, "sources": sources, "gpus": gpus}


def summary(table: dict[str, Any]) -> list[str]:
    lines = []
    for gpu, tasks in table["gpus"].items():
        for task_id, impls in sorted(tasks.items()):
            for impl, e in impls.items():
                m = e.get("model") or {}
                lines.append(
                    f"{gpu} {task_id} [{impl}]: {len(e['workloads'])} workloads; model {m.get('intercept_us')} + "
                    f"{m.get('slope')} x roofline, ±{m.get('error')}; code {e['provenance']['code_sha256'][:12]}"
                )
    return lines


# --- the runs made before provenance ---------------------------------------------------------


def _read_legacy() -> dict[str, Any]:
    return json.loads(LEGACY.read_text()) if LEGACY.is_file() else {}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout


def _code_at(commit: str, folder: str) -> dict[str, Any] | None:
    """The provenance code hash of the task in `folder` as it was at `commit` (provenance.task_code
    over git's copies)."""

    def read(name: str) -> str | None:
        try:
            return _git("show", f"{commit}:{folder}/{name}")
        except subprocess.CalledProcessError:
            return None

    listed = set(_git("ls-tree", "--name-only", f"{commit}:{folder}").split())
    todo = ["baseline.py", "inputs.py"]
    seen: dict[str, str] = {}
    while todo:
        name = todo.pop()
        source = None if name in seen or name not in listed else read(name)
        if source is None:
            continue
        seen[name] = source
        todo += [f"{m}.py" for m in _imported_names(source) if f"{m}.py" in listed]
    if "baseline.py" not in seen:
        return None
    import hashlib

    digests = [f"{n}:{code_digest(seen[n])}" for n in sorted(seen)]
    return {
        "code_sha256": hashlib.sha256("\n".join(digests).encode()).hexdigest(),
        "files": {n: hashlib.sha256(seen[n].encode()).hexdigest() for n in sorted(seen)},
    }


def _imported_names(source: str) -> set[str]:
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def legacy_provenance(paths: list[Path]) -> dict[str, Any]:
    """For each run file made before provenance: the code of each task it measured, at the
    commit that added the file; where a later commit that rewrote the file had other code, the
    figures cannot be told apart and get the code `ambiguous` (never today's)."""
    files: dict[str, Any] = {}
    committed: dict[str, str] = {}
    for path in paths:
        data = json.loads(path.read_text())
        if data.get("provenance"):
            continue
        rel = _name(path)
        commits = _git("log", "--format=%H", "--", rel).split()
        if not commits:
            continue
        first, last = commits[-1], commits[0]
        tasks = sorted({r["task"] for r in data.get("records") or [] if "task" in r})
        entry = {}
        for task_id in tasks:
            folder = f"tasks/{task_id}"
            at_first, at_last = _code_at(first, folder), _code_at(last, folder)
            if at_first is None:
                continue
            same = at_last is not None and at_last["code_sha256"] == at_first["code_sha256"]
            entry[task_id] = (
                at_first if same else {"code_sha256": "ambiguous", "files": at_first["files"]}
            )
        files[Path(rel).name] = entry
        committed[Path(rel).name] = _git("log", "-1", "--format=%cI", first).strip()
        print(f"{rel}: {len(entry)} tasks at {first[:10]}", file=sys.stderr)
    return {
        "about": "the code behind each run made before runs recorded provenance: per file and task, "
        "provenance.task_code of the task at the commit that added the file ('ambiguous' where a later "
        "commit rewriting the file had other code); written by bench/sim_baselines.py --legacy-provenance",
        "files": files,
        "committed": committed,
    }


def default_paths() -> list[Path]:
    found = {
        Path(p)
        for pattern in PATTERNS
        for p in glob.glob(str(ROOT / "bench" / "results" / pattern))
    }
    return sorted(found, key=lambda p: p.name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results",
        nargs="*",
        type=Path,
        help="run files (default: bench/results/*_tasks*.json, *_baselines.json, sim_h200*.json)",
    )
    parser.add_argument("--out", type=Path, default=TABLE_FILE)
    parser.add_argument(
        "--legacy-provenance",
        action="store_true",
        help=f"write {LEGACY.relative_to(ROOT)} from git and stop",
    )
    args = parser.parse_args()
    paths = args.results or default_paths()
    if not paths:
        print("no results given and none in bench/results", file=sys.stderr)
        return 2
    for p in paths:
        if not p.is_file():
            print(f"{p}: no such file", file=sys.stderr)
            return 2
    if args.legacy_provenance:
        LEGACY.write_text(json.dumps(legacy_provenance(paths), indent=1, sort_keys=True) + "\n")
        print(f"wrote {LEGACY}")
        return 0
    table = build(collect(paths), [_name(p) for p in paths])
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    for line in summary(table):
        print(line)
    n = sum(
        len(e["workloads"]) for t in table["gpus"].values() for i in t.values() for e in i.values()
    )
    print(f"wrote {args.out}: {n} measured workloads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
