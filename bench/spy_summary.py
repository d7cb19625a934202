"""Where a profiled run's host time went: a py-spy raw profile summed under the arena's functions.

py-spy (`py-spy record --subprocesses --idle --format raw -o spy.txt -- python3 ...`, carried to
the GPU machine as a wheel: bench/h200_wave.sh step 25) samples every process of a run, idle
stacks included. This sums its samples under each anchor function (a frame name: the candidate's
and the baseline's timed rounds, the trusted worker's serving of them, a Triton compile) and
splits them by the frames just below, so the cost of one part of an evaluation can be read off
without a flame graph:

    python3 bench/spy_summary.py spy.txt                       # the default anchors
    python3 bench/spy_summary.py spy.txt --anchor _time_graph --depth 3
    python3 bench/spy_summary.py spy.txt --keep 2000 --out top.txt.gz  # the heaviest stacks

Seconds are samples divided by the rate (`--rate`, py-spy's `-r`).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import re
import sys
from pathlib import Path

ANCHORS = (
    "_time_graph",
    "_time_events",
    "_serve_calls",
    "_do_compile",
    "triton_key",
    "dynamic_func",
)
ENTRY = re.compile(r"(.*?) (\d+)\n", re.S)  # a stack (process names may span lines), its count
FRAME = re.compile(r"(.*?) \((.*?):(\d+)\)")


def stacks(text: str) -> list[tuple[list[str], int]]:
    return [(stack.split(";"), int(count)) for stack, count in ENTRY.findall(text)]


def short(frame: str) -> str:
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()[:80]
    name, path, line = m.groups()
    return f"{name} ({path.rsplit('/', 1)[-1]}:{line})"


def named(frame: str, anchor: str) -> bool:
    """Whether the frame is the function `anchor` (a method's qualified name counts)."""
    name = frame.strip().split(" (", 1)[0]
    return name == anchor or name.endswith("." + anchor)


def under(
    entries: list[tuple[list[str], int]], anchor: str, depth: int
) -> tuple[int, collections.Counter[str]]:
    """Samples whose stack passes through `anchor` (its first occurrence), by the `depth`
    frames below it."""
    total, below = 0, collections.Counter[str]()
    for frames, count in entries:
        at = next((i for i, f in enumerate(frames) if named(f, anchor)), None)
        if at is None:
            continue
        total += count
        below[" > ".join(short(f) for f in frames[at + 1 : at + 1 + depth]) or "(itself)"] += count
    return total, below


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile", type=Path, help="py-spy's raw output (--format raw)")
    p.add_argument("--anchor", action="append", help=f"a function name (default: {ANCHORS})")
    p.add_argument("--depth", type=int, default=2, help="frames below the anchor to split by")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--rate", type=float, default=250.0, help="py-spy's samples a second")
    p.add_argument("--keep", type=int, help="write this many of the heaviest stacks to --out")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    entries = stacks(args.profile.read_text(errors="replace"))
    for anchor in args.anchor or ANCHORS:
        total, below = under(entries, anchor, args.depth)
        print(f"== {anchor}: {total} samples, {total / args.rate:.1f} s")
        for name, count in below.most_common(args.top):
            print(f"  {count / max(total, 1):6.1%}  {count / args.rate:6.2f} s  {name}")
    if args.keep and args.out:
        heaviest = sorted(entries, key=lambda e: -e[1])[: args.keep]
        with gzip.open(args.out, "wt") as out:
            out.writelines(";".join(f.strip() for f in fr) + f" {n}\n" for fr, n in heaviest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
