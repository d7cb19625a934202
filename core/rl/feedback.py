"""What the policy reads: the task's prompt (its signature, the visible workloads, the rules of an
episode or of one completion), the code pulled out of a completion, each turn's feedback (what
failed and why, or how fast) and the final summary (whether the hidden workloads passed, never
which). Nothing here names a hidden workload."""

from __future__ import annotations

import re
from typing import Any

from core.model.task import Task, TensorSpec
from core.rl.arena import RewardedResult, public_result

FEEDBACK_CHARS = 4000  # the tail of a compile error an agent gets: enough for the traceback's end


def signature(task: Task) -> str:
    """`run(x: bfloat16[M, K], eps: scalar float32 = 1e-06) -> y: bfloat16[M, K]`: the same
    words as the agents' prompts and `arena tasks show` (TensorSpec.describe)."""

    def spec(s: TensorSpec) -> str:
        return f"{s.name}: {s.describe(task.inputs)}"

    return f"run({', '.join(spec(i) for i in task.inputs)}) -> {', '.join(spec(o) for o in task.outputs)}"


def is_cpu_device(device: str) -> bool:
    return device.rsplit("/", 1)[-1] == "cpu"


def visible_workloads(task: Task, device: str) -> list[dict[str, Any]]:
    return [w.to_json() for w in task.workloads(cpu=is_cpu_device(device)).visible]


def task_prompt(task: Task, device: str, max_turns: int) -> str:
    """The task statement: semantics, signature, tolerance, baseline, visible workloads, the
    rules of the episode. Hidden workloads exist and are said to exist; none is described.
    `max_turns=0`: one completion scored once (a trainer's dataset row), no episode."""
    c = task.correctness
    shapes = "\n".join(
        f"  - {w['label']}" + (f" ({w['model']})" if w.get("model") else "")
        for w in visible_workloads(task, device)
    )
    return "\n".join(
        [
            f"Task `{task.id}`: {task.description}",
            "",
            f"Write one Python module that defines `{signature(task)}` and returns the output(s) in that order.",
            f"Languages: {', '.join(task.languages)}. Native CUDA/HIP goes in a sibling .cu/.hip loaded by the module.",
            f"Correctness: |out - ref| <= {c.atol:g} + {c.rtol:g}*|ref| on {c.min_match * 100:g}% of elements, {c.seeds} random seeds; NaN/Inf never pass.",
            f"Baseline to beat ({task.baseline_kind}): {task.baseline}",
            f"Visible workloads on {device}:",
            shapes,
            *(_episode_rules(max_turns) if max_turns else _completion_rules()),
            "Cheating (reading the reference, caching outputs, tampering with timers) is detected and gets the lowest reward.",
        ]
    )


def _episode_rules(max_turns: int) -> list[str]:
    return [
        "Hidden workloads, which you never see, are checked at the end of the episode: do not special-case the visible shapes.",
        f"You have {max_turns} turn(s). Each turn, submit the complete module; you get back compile errors, the worst mismatch with",
        "its workload, and per-workload times and speedups. The best candidate is scored on every workload when the episode ends.",
    ]


def _completion_rules() -> list[str]:
    return [
        "Hidden workloads, which you never see, are checked too: do not special-case the visible shapes.",
        "Reply with the complete module in one ```python fenced block; it is scored once, on every workload.",
    ]


def extract_code(text: str) -> str:
    """The last fenced code block of a model's reply (```python ... ```), else the reply."""
    blocks = re.findall(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", text, flags=re.DOTALL)
    return blocks[-1] if blocks else text


# --- feedback -------------------------------------------------------------------------------------


def turn_feedback(rr: RewardedResult, turn: int, max_turns: int) -> tuple[dict[str, Any], str]:
    """(structured, text) feedback for one evaluated turn, from the public view of its result."""
    data = public_result(rr.result, rr.task)
    stages = {s["name"]: s for s in data["stages"]}
    info: dict[str, Any] = {
        "turn": turn,
        "outcome": rr.outcome,
        "reward": rr.reward,
        "stages": {n: s["status"] for n, s in stages.items()},
        "compile_error": None,
        "mismatch": None,
        "timings": [],
        "speedup": data["speedup"],
        "sol_fraction": data["sol_fraction"],
        "timing_kind": data["timing_kind"],
        "integrity_flags": data["integrity_flags"],
        "review_notes": data["review_notes"],
    }
    reward = "none (infrastructure fault)" if rr.reward is None else f"{rr.reward:.4f}"
    lines = [f"Turn {turn} of {max_turns}: {rr.outcome.replace('_', ' ')} (reward {reward})."]
    if rr.outcome == "infrastructure_error":
        lines.append(
            "The evaluation failed through no fault of the candidate; this turn was not counted. Submit it again."
        )
    compile_stage = stages.get("compile", {})
    if compile_stage.get("status") not in (None, "passed") and rr.outcome != "infrastructure_error":
        text = "\n".join(
            x for x in (compile_stage.get("message"), compile_stage.get("log")) if x
        ).strip()
        info["compile_error"] = text[-FEEDBACK_CHARS:]
        lines.append(f"Compile failed ({compile_stage['status']}):\n{info['compile_error']}")
    for name in ("correctness", "performance"):
        stage = stages.get(name, {})
        if (
            stage.get("status") in ("passed", "skipped", None)
            or compile_stage.get("status") != "passed"
        ):
            continue
        wrong = [w for w in stage.get("workloads", []) if not w.get("passed")]
        worst = max(
            wrong, key=lambda w: (w.get("worst") or {}).get("max_abs_err") or 0.0, default=None
        )
        detail = (worst or {}).get("worst") or {}
        at = detail.get("worst") or {}  # the element: index, got, expected
        info["mismatch"] = {
            "stage": name,
            "status": stage["status"],
            "message": stage.get("message"),
            "workload": worst["label"] if worst else None,
            "detail": worst.get("message") if worst else None,
            "output": detail.get("output"),
            "index": at.get("index"),
            "got": at.get("got"),
            "expected": at.get("expected"),
            "max_abs_err": detail.get("max_abs_err"),
            "match_fraction": detail.get("match_fraction"),
            "error": detail.get("error"),
        }
        lines.append(f"{name} {stage['status']}: {stage.get('message') or ''}".rstrip())
        if worst is not None:
            lines.append(f"  worst mismatch on workload {worst['label']}: {worst.get('message')}")
        break
    for w in data["workloads"]:
        cand, base = w["candidate"].get("median_us"), w["baseline"].get("median_us")
        info["timings"].append(
            {
                "workload": w["label"],
                "candidate_us": cand,
                "baseline_us": base,
                "speedup": w["speedup"],
                "sol_fraction": w["sol_fraction"],
            }
        )
    if info["timings"]:
        lines.append(
            f"Speedup over the baseline: {data['speedup']:.3f}x (geometric mean)"
            + (" - cpu timings are informational" if data["timing_kind"] == "cpu" else "")
        )
        for t in info["timings"]:
            sol = (
                f", {t['sol_fraction'] * 100:.1f}% of speed of light"
                if t["sol_fraction"] is not None
                else ""
            )
            lines.append(
                f"  {t['workload']}: candidate {t['candidate_us'] or 0:.1f} us, baseline {t['baseline_us'] or 0:.1f} us, {t['speedup']:.3f}x{sol}"
            )
    for flag in data["integrity_flags"]:
        lines.append(f"Integrity violation: {flag}")
    for note in data["review_notes"]:
        lines.append(f"Review note (no effect on the reward): {note}")
    return info, "\n".join(lines)


def final_summary(rr: RewardedResult, best_turn: int) -> dict[str, Any]:
    """The end of an episode as the policy may see it: outcome, reward, and how many hidden
    workloads passed, never which."""
    data = public_result(rr.result, rr.task)
    gen = next(s for s in data["stages"] if s["name"] == "generalization")
    return {
        "best_turn": best_turn,
        "reward": rr.reward,
        "outcome": rr.outcome,
        "visible_only": rr.visible_only,
        "stages": {s["name"]: s["status"] for s in data["stages"]},
        "speedup": data["speedup"],
        "sol_fraction": data["sol_fraction"],
        "hidden": {
            "status": gen["status"],
            "passed": sum(1 for w in gen["workloads"] if w["passed"]),
            "total": len(gen["workloads"]),
        },
        "integrity_flags": data["integrity_flags"],
    }


# --- the environment -------------------------------------------------------------------------
