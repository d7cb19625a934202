"""How AgentKernelArena's tasks fare as external tasks, without the slow native probes:

    PYTHONPATH=. python3 bench/aka_external_census.py AKA_CHECKOUT OUT_DIR [--native-log LOG]

writes every task folder as an external task (core/importers/aka_external.py) into OUT_DIR,
validates each (`arena tasks validate`'s external checks) and prints, per category, how many
became external tasks, how many are reported and why. With --native-log (the per-task lines of
an earlier `arena import agentkernelarena` run: `N SOURCE Converted|Skipped KIND ...`) it also
says how many of those convert to ordinary tasks, which the full import tries first.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.importers.agentkernelarena import (
    FAMILY,
    LICENSE,
    category_of,
    find_tasks,
    task_name,
)
from core.importers.aka_external import write_external
from core.importers.kernelbench_problem import ProblemError


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--native-log", type=Path)
    args = parser.parse_args()
    native = {}
    if args.native_log:
        for line in args.native_log.read_text().splitlines():
            m = re.match(r"\d+ (\S+) (Converted|Skipped)", line)
            if m:
                native[m.group(1)] = m.group(2) == "Converted"
    external: Counter[str] = Counter()
    valid: Counter[str] = Counter()
    total: Counter[str] = Counter()
    natives: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for folder in find_tasks(args.checkout):
        source = str(folder.relative_to(args.checkout))
        group = category_of(source)
        if (
            Path(source).parts[-2:] == Path(group).parts[-2:]
        ):  # a category whose folders are the tasks
            group = Path(group).parts[0]
        total[group] += 1
        natives[group] += native.get(source, False)
        try:
            done = write_external(
                folder, source, args.out, task_name(folder), FAMILY, LICENSE, "census"
            )
        except ProblemError as exc:
            reasons[group][exc.kind] += 1
            continue
        external[group] += 1
        valid[group] += validate_task(Path(done.path), ValidateOptions(evaluate=False)).passed
    print(
        "| category | tasks | ordinary (earlier run) | external | external valid | reported, why |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for group in sorted(total):
        why = ", ".join(f"{n} `{k}`" for k, n in reasons[group].most_common()) or "–"
        print(
            f"| {group} | {total[group]} | {natives[group] if native else '–'} | {external[group]} | {valid[group]} | {why} |"
        )
    print(
        f"| all | {sum(total.values())} | {sum(natives.values()) if native else '–'} | {sum(external.values())} | {sum(valid.values())} | |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
