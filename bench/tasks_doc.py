"""Write docs/tasks.md: the catalogue of bundled tasks, and the H200 figures of each task's
baseline per visible workload from a `bench/tasks_gpu.py` run.

    python3 bench/tasks_doc.py --gpu bench/results/h200_tasks.json \
        --baselines bench/results/h200_baselines.json > docs/tasks.md

`--baselines` (a `bench/tasks_gpu.py --impls` run) gives the baseline table: per task and
visible workload, the implementation the baseline runs there, its time, the speed of light
with and without the launch floor, and every other implementation's time; `--gpu` (a
full-pipeline run) adds the starters' times.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tasks_gpu import table
from core.tasks.discovery import discover
from core.tasks.model_coverage import zoo_section

HEADER = """# Tasks

The bundled catalogue: the kernels that today's open-weight LLMs spend their time in, with
shapes from the models' published configs (docs/task-format.md describes a task folder;
`arena tasks show ID` prints one; `arena tasks validate` checks them all).

**Multi-rank tasks** (docs/collectives.md) run on several ranks at once:
- `comm/all_reduce`, `comm/all_gather`, `comm/reduce_scatter` and `comm/all_reduce_add_rmsnorm`
  are the tensor-parallel collectives. Their shapes come from Llama-3.1-70B, Qwen3-235B,
  DeepSeek-V3 and gpt-oss, from 16 KiB at decode to 128 MiB at prefill, on worlds of 1 to 8.
- `moe/dispatch` and `moe/combine` are DeepEP's normal-mode all-to-all: fp8 rows with 1×128
  scales, rows in source-rank then token order, and the prefix-sum handle.
- `moe/dispatch_low_latency` and `moe/combine_low_latency` are DeepEP's decode mode: the
  [local experts, W·M, H] slot layout with per-expert counts, an fp8 cast on dispatch, and a
  weighted combine.
- The MoE shapes are DeepSeek-V3 at EP8 (H 7168, top-8, 256 experts), Kimi-K2 and Qwen3.

Baselines are torch.distributed (NCCL, RCCL or gloo), and dispatch and combine are built on
`all_to_all_single` with computed splits. Sums are judged against the bfloat16 rounding error
that any summation order can make (collectives), or against a float32 accumulation (combine).
Layouts are judged exactly, on their valid rows only. Scores are nccl-tests bus bandwidth
against the link (`peak: link`). None of these has run on a GPU yet: `bench/comm_gpu.py` is
the script for that run.

*baseline kind*: `vendor_library` (the vendor's library through PyTorch: cuBLAS, hipBLASLt,
cuDNN…), `vendor_kernel_library` (FlashInfer, sgl-kernel, aiter… where importable) or
`torch_composition` (the best composition of torch ops where no library has the op).
"""


COVERAGE = """What was not run ran out of device time (30 minutes per session; the slowest baselines take
1-3 minutes each under the arena's protocol). The tasks' authors also checked, with their own
scripts on the same H200 (torch 2.11, no FlashInfer, vLLM, sgl-kernel or DeepGEMM installed),
that the baseline and the starter of every `gemm/`, `attention/` and `moe/` task match the
reference on every visible and fixed hidden workload. Every task validates on the CPU
(`arena tasks validate`, run by CI). The missing figures come from one more call of
`bench/tasks_gpu.py --roles starter --tasks ...`.

Where a baseline says `vendor_kernel_library` but the library is not installed, it falls
back to the torch composition it names, and that is what was timed here: the decode
attention, routing and sampling baselines are therefore weaker than production."""


def _dtypes(task) -> str:
    names = {s.dtype for s in task.inputs + task.outputs if s.shape is not None}
    short = {
        "bfloat16": "bf16",
        "float32": "fp32",
        "float16": "fp16",
        "float8_e4m3fn": "fp8 e4m3fn",
        "int32": "i32",
        "int64": "i64",
    }
    return ", ".join(sorted(short.get(n, n) for n in names))


def catalogue(tasks) -> str:
    lines = [
        "| task | family | models | dtypes | baseline kind | baseline |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for t in tasks:
        lines.append(
            f"| `{t.id}` | {t.family} | {', '.join(t.models)} | {_dtypes(t)} | {t.baseline_kind} | {t.baseline.replace('|', '/')} |"
        )
    return "\n".join(lines)


def gpu_section(path: Path) -> str:
    data = json.loads(path.read_text())
    dev = data["device"]
    v = dev.get("versions", {})
    out = [
        "## The baselines on the H200",
        "",
        f"Measured on one {dev['model']} ({dev['arch']}, driver {v.get('driver')}, CUDA {v.get('cuda')}, torch {v.get('torch')}, "
        f"Triton {v.get('triton')}) by `PYTHONPATH=. python3 bench/tasks_gpu.py --out $OUT` (raw: `{path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path}`), "
        "the arena's protocol (alternating rounds, L2 flushed, CUDA graphs for kernels under 50 µs of roofline, median over "
        "calls; spread = interquartile range / median). *SOL* = the roofline time (the task's FLOPs and bytes against the H200's "
        "measured peaks, docs/devices.md) divided by the baseline's time. The starter column is the untuned Triton starting point.",
        "",
        table(data["records"]),
    ]
    problems = []
    for r in data["records"]:
        for role in ("baseline", "starter"):
            s = r.get(role)
            if s is None:
                problems.append(f"- `{r['task']}` {role}: not run (the device call's time ran out)")
            elif s.get("status") != "passed" or s.get("flags"):
                problems.append(
                    f"- `{r['task']}` {role}: {s.get('status')} at {s.get('failed_stage')}: {(s.get('message') or s.get('error') or '')[:300]} {s.get('flags') or ''}"
                )
    if problems:
        out += [
            "",
            "Not passed (or not run) in the arena's harness on the H200:",
            "",
            *problems,
            "",
            COVERAGE,
        ]
    else:
        out += [
            "",
            f"Every task's baseline (submitted as a candidate) and starter passed on the H200 with no integrity flag ({len(data['records'])} tasks).",
        ]
    return "\n".join(out)


def _pct(x) -> str:
    return f"{x * 100:.1f}%" if x is not None else "–"


def pipeline_rows(tasks, pipeline: dict[str, dict], low: dict[str, float]) -> list[str]:
    """Tasks with no `--impls` run yet: their baseline per visible workload as the full pipeline
    timed it, submitted as its own candidate (a `--gpu` run), with that identity's ratio; a task
    under 10% of its roofline goes into `low`."""
    measured = [t for t in tasks if (pipeline.get(t.id) or {}).get("baseline")]
    if not measured:
        return []
    out = [
        "",
        "Measured through the full pipeline only (each baseline submitted as its own candidate, "
        "`bench/tasks_gpu.py`; no `--impls` run of these yet): *identity* = the baseline's median "
        "over the same code's as the candidate, beside it in the same evaluation.",
        "",
        "| task | workload | model | baseline (µs) | spread | roofline (µs) | roofline fraction | identity | starter speedup |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in measured:
        record = pipeline[t.id]
        starter = {w["label"]: w for w in (record.get("starter") or {}).get("workloads", [])}
        for w in record["baseline"]["workloads"]:
            if w["hidden"] or not w.get("baseline"):
                continue
            base, roof = w["baseline"]["median_us"], w.get("roofline_us")
            same = w["candidate"]["median_us"]
            st = starter.get(w["label"])
            ratio = f"{base / st['candidate']['median_us']:.2f}×" if st else "–"
            model = next((v.model for v in t.gpu.visible if v.label == w["label"]), None)
            if roof and roof / base < 0.10:
                low[t.id] = min(low.get(t.id, 1.0), roof / base)
            out.append(
                f"| {t.id} | {w['label']} | {model or ''} | {base:.2f} | ±{w['baseline']['spread'] * 100:.1f}% | "
                f"{f'{roof:.2f}' if roof else '–'} | {_pct(roof / base) if roof else '–'} | {base / same:.3f} | "
                f"{ratio} |"
            )
    return out


def baselines_section(
    path: Path,
    tasks,
    starters: dict[tuple[str, str], float],
    pipeline: dict[str, dict] | None = None,
) -> str:
    """The baseline table from a `--impls` run, and the tasks under 10% of SOL with the
    sentence their task.yaml gives (or a warning where it gives none)."""
    data = json.loads(path.read_text())
    dev, peaks = data["device"], data.get("peaks_probe", {})
    v = dev.get("versions", {})
    by: dict[tuple[str, str], list[dict]] = {}
    for r in data["records"]:
        if "workload" in r:
            by.setdefault((r["task"], r["workload"]), []).append(r)
    rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    out = [
        "## The baselines on the H200",
        "",
        f"Measured on one {dev['model']} ({dev['arch']}, driver {v.get('driver')}, CUDA {v.get('cuda')}, torch {v.get('torch')}, "
        f"Triton {v.get('triton')}, Liger 0.8.5 carried as a wheel) by `sh bench/h200_baselines.sh $OUT` "
        f"(`bench/tasks_gpu.py --impls`; raw, keyed by gpu, task, workload and baseline_impl: `{rel}`). Every implementation "
        "of each task's `baselines:` that imports there is checked against the reference and timed with the harness's own "
        "timer (fresh inputs every call, L2 flushed, CUDA graph replays for workloads whose roofline is under 50 µs; the median, "
        "spread = interquartile range / median); **runs** is the one the baseline uses there. The peaks probe measured a launch "
        f"floor of {peaks.get('launch_graph_us', 0):.2f} µs graph-replayed and {peaks.get('launch_eager_us', 0):.2f} µs eager "
        f"(copy {peaks.get('hbm_tbps', 0):.2f} TB/s, bf16 {peaks.get('bf16_tflops', 0):.0f} TFLOP/s). *SOL* = max(roofline, launch "
        "floor) / time, the figure results score against; *roofline* = the roofline alone / time (docs/evaluation.md). "
        "*others* lists the other implementations measured (µs). The starter column is the untuned Triton starting point "
        "from the full-pipeline run: *starter speedup* = this baseline's time / the starter's.",
        "",
        "| task | workload | model | runs | baseline (µs) | spread | SOL (µs) | baseline SOL | roofline | others (µs) | starter speedup |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    low: dict[str, float] = {}
    for t in tasks:
        for w in t.gpu.visible:
            recs = by.get((t.id, w.label))
            if not recs:
                continue
            sel = next((r for r in recs if r.get("selected")), None) or recs[0]
            others = ", ".join(
                f"{r['baseline_impl']} {r['median_us']:.1f}"
                for r in recs
                if r is not sel and r.get("median_us")
            )
            st = starters.get((t.id, w.label))
            ratio = f"{sel['median_us'] / st:.2f}×" if st and sel.get("median_us") else "–"
            ok = "" if sel.get("correct") else " (wrong)"
            out.append(
                f"| {t.id} | {w.label} | {w.model or ''} | {sel['baseline_impl']}{ok} | {sel.get('median_us', 0):.2f} | ±{sel.get('spread', 0) * 100:.1f}% | "
                f"{sel.get('sol_us') or 0:.2f} | {_pct(sel.get('sol_fraction'))} | {_pct(sel.get('roofline_fraction'))} | {others} | {ratio} |"
            )
            if sel.get("sol_fraction") is not None and sel["sol_fraction"] < 0.10:
                low[t.id] = min(low.get(t.id, 1.0), sel["sol_fraction"])
    timed_impls = {task_id for task_id, _ in by}
    out += pipeline_rows([t for t in tasks if t.id not in timed_impls], pipeline or {}, low)
    out += [
        "",
        "Baselines under 10% of the speed of light on some workload, and why nothing faster runs there:",
        "",
    ]
    for t in tasks:
        if t.id in low:
            why = t.baseline_note or "**no `baseline_note` in task.yaml says why**"
            out.append(f"- `{t.id}` (lowest {_pct(low[t.id])}): {why}")
    return "\n".join(out)


def write_figures(path: Path, target: Path) -> None:
    """The agent prompt's baseline figures (core/agents/workspace.py): per GPU model, task and visible
    workload, the implementation the baseline runs there, its median and SOL fraction."""
    data = json.loads(path.read_text())
    gpus: dict = json.loads(target.read_text()).get("gpus", {}) if target.is_file() else {}
    gpu = data["device"].get("peaks") or data["device"]["model"]
    tasks: dict = {}
    for r in data["records"]:
        if r.get("selected") and r.get("correct") and r.get("median_us"):
            tasks.setdefault(r["task"], {})[r["workload"]] = {
                "impl": r["baseline_impl"],
                "median_us": round(r["median_us"], 3),
                "sol_fraction": round(r["sol_fraction"], 4)
                if r.get("sol_fraction") is not None
                else None,
            }
    gpus[gpu] = {
        "device": data["device"]["model"],
        "source": str(path.resolve().relative_to(ROOT))
        if path.resolve().is_relative_to(ROOT)
        else str(path),
        "tasks": tasks,
    }
    target.write_text(
        json.dumps({"schema_version": 1, "gpus": gpus}, indent=1, sort_keys=True) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--gpu", type=Path, nargs="*", default=[], help="tasks_gpu.json files (parts are merged)"
    )
    parser.add_argument(
        "--baselines",
        type=Path,
        help="a `tasks_gpu.py --impls` run (baselines_gpu.json): the baseline table",
    )
    parser.add_argument(
        "--figures",
        type=Path,
        help="with --baselines: also write the agent prompt's figures (core/data/baseline_figures.json)",
    )
    args = parser.parse_args()
    tasks = discover()
    print(HEADER)
    print(f"## The catalogue ({len(tasks)} tasks)\n")
    print(catalogue(tasks))
    print()
    print(zoo_section(tasks), end="")
    if args.baselines:
        starters: dict[tuple[str, str], float] = {}
        pipeline: dict[str, dict] = {}
        for path in args.gpu:
            for record in json.loads(path.read_text())["records"]:
                pipeline[record["task"]] = record
                for w in (record.get("starter") or {}).get("workloads", []):
                    starters[(record["task"], w["label"])] = w["candidate"]["median_us"]
        print()
        print(
            baselines_section(
                args.baselines, [t for t in tasks if not t.multi_rank], starters, pipeline
            )
        )
        if args.figures:
            write_figures(args.baselines, args.figures)
        return 0
    if args.gpu:
        merged: dict = {"device": None, "records": []}
        by_task: dict[str, dict] = {}
        for (
            path
        ) in args.gpu:  # a later run's evaluation of a task adds to (or replaces) an earlier one's
            data = json.loads(path.read_text())
            merged["device"] = merged["device"] or data["device"]
            for record in data["records"]:
                by_task.setdefault(record["task"], {"task": record["task"]}).update(
                    {k: v for k, v in record.items() if k != "task"}
                )
        merged["records"] = [by_task[t.id] for t in tasks if t.id in by_task]
        target = (
            args.gpu[0] if len(args.gpu) == 1 else ROOT / "bench" / "results" / "h200_tasks.json"
        )
        if len(args.gpu) > 1:
            target.write_text(json.dumps(merged, indent=1))
        print()
        print(gpu_section(target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
