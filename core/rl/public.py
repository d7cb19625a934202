"""What may reach a policy of a Result: `public_result`, the Result as JSON with every hidden
workload anonymised (labels, axes and their shapes in free text) and every traceback cut to the
candidate's own frames (`policy_text`: no harness frame, no path of the arena's). The HTTP
server, the environment's observations and the public board go through it; the trainer keeps
the full Result."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.model.result import Result
from core.model.task import Task


def _hidden_workloads(result: Result) -> list[tuple[str, dict[str, int]]]:
    seen: dict[str, dict[str, int]] = {}
    for s in result.stages:
        if s.name == "generalization":
            for w in s.workloads:
                seen.setdefault(w["label"], dict(w.get("axes") or {}))
    for figures in result.workloads:
        if figures.hidden:
            seen.setdefault(figures.label, dict(figures.axes))
    return list(seen.items())


def _shape_texts(task: Task | None, axes: dict[str, int]) -> list[str]:
    """How a hidden workload's tensor shapes may be printed in free text (`33, 100`)."""
    if task is None:
        return []
    texts = set()
    for spec in task.inputs + task.outputs:
        if spec.shape is not None and len(spec.shape) >= 2:
            try:
                texts.add(", ".join(str(d) for d in spec.concrete_shape(axes)))
            except Exception:  # noqa: BLE001 - a formula that needs other axes: nothing to scrub
                pass
    return sorted(texts, key=len, reverse=True)


def public_result(result: Result, task: Task | None = None) -> dict[str, Any]:
    """The Result as JSON with every hidden workload anonymised: the generalization stage
    keeps only how many hidden workloads passed; timed hidden workloads are `hidden#k` with no
    axes; free text (messages, flags, notes) has their labels and, given the task, their
    shapes replaced. The numbers a trainer scores on (status, speedup, reward) are unchanged."""
    data = result.to_json()
    hidden = _hidden_workloads(result)
    alias = {label: f"hidden#{i + 1}" for i, (label, _) in enumerate(hidden)}
    patterns = [(re.escape(label), alias[label]) for label in sorted(alias, key=len, reverse=True)]
    for label, axes in hidden:
        patterns += [
            (r"(?<!\d)" + re.escape(text) + r"(?!\d)", f"<{alias[label]} shape>")
            for text in _shape_texts(task, axes)
        ]
    scrub_re = [(re.compile(p), r) for p, r in patterns]

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for pattern, repl in scrub_re:
                value = pattern.sub(repl, value)
            return value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    for stage in data["stages"]:
        stage["message"] = policy_text(stage["message"]) if stage["message"] else stage["message"]
        stage["log"] = policy_text(stage["log"] or "")
        if stage["name"] == "generalization":
            works = stage["workloads"]
            wrong = sum(1 for w in works if not w.get("passed"))
            stage["workloads"] = [
                {"label": alias.get(w["label"], "hidden"), "passed": bool(w.get("passed"))}
                for w in works
            ]
            stage["log"] = ""
            if stage["message"]:
                stage["message"] = (
                    f"{wrong} of {len(works)} hidden workload(s) wrong (hidden workloads are never described)"
                    if wrong
                    else "hidden workloads withheld"
                )
    for w in data["workloads"]:
        if w["hidden"]:
            w["label"], w["axes"], w["model"] = alias.get(w["label"], "hidden"), {}, None
    return scrub(data)


# --- tracebacks as a policy may read them ---------------------------------------------------------

_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+)(?P<rest>.*)$')
_ARENA_ROOT = str(
    Path(__file__).resolve().parents[2]
)  # the checkout or site-packages holding core/
# A candidate's files as the harness lays them out (`<tmp>/arena-.../candidate/candidate.py`).
_CANDIDATE_PATH = re.compile(r"(?:/[^\s\"':()]+)*/candidate/(?P<name>[^\s\"':(),/]+)")
_TEMP_PATH = re.compile(r"(?:/[^\s\"':()]+)*/arena-[^\s\"':()]*")


def _is_candidate(path: str) -> bool:
    return "/candidate/" in path or ("/" not in path and not path.startswith("<"))


def _scrub_paths(line: str) -> str:
    line = _CANDIDATE_PATH.sub(lambda m: m["name"], line)
    line = _TEMP_PATH.sub("<arena>", line)
    return line.replace(_ARENA_ROOT, "<arena>")


def policy_text(text: str) -> str:
    """A log or message as a policy may read it: in each traceback only the frames of the
    candidate's own files, named by file name (its error stays last, where Python puts it); no
    frame of the harness or of importlib, and no path of the arena's folders. The trainer's
    Result keeps the whole log."""
    out: list[str] = []
    in_frame = keep = False
    for line in text.splitlines():
        frame = _FRAME.match(line)
        if frame:
            in_frame, keep = True, _is_candidate(frame["path"])
            if keep:
                name = _CANDIDATE_PATH.sub(lambda m: m["name"], frame["path"])
                out.append(f'  File "{Path(name).name}", line {frame["line"]}{frame["rest"]}')
            continue
        if in_frame and line.startswith("    "):  # the frame's source line and its carets
            if keep:
                out.append(line)
            continue
        in_frame = False
        out.append(_scrub_paths(line))
    return "\n".join(out)
