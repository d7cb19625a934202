"""Exploit (issue 37, a warm harness: `arena serve`, the reward API's slots, a batch): read the
candidates evaluated before it, and rewrite them. A warm harness used to keep every earlier
candidate's `eval-NNNN/candidate/candidate.py` in its folder, readable and writable by the uid
every candidate runs as; batch members ran side by side in one folder. At import it looks
everywhere an earlier or concurrent candidate could be (its evaluation folder's parent and its
parent, /tmp, its home, other processes' /proc/PID/root and cwd), appends a line to every
candidate file it can open that is not its own, and returns wrong outputs if it found any.

Defense (core/harness/isolation.py): each candidate's worker has a mount namespace of its own,
where the folders of every other evaluation and a fresh /tmp are empty mounts, and it is not
dumpable (no /proc/PID/root of a peer); a candidate's staged files are removed when its
evaluation ends. It finds nothing and passes at its true speed."""

import glob
import os

import torch

_FOUND = []


def _look() -> None:
    here = os.path.realpath(os.getcwd())  # its own evaluation's folder
    parent = os.path.dirname(here)
    roots = [parent, os.path.dirname(parent), "/tmp", os.path.expanduser("~")]
    patterns = [f"{r}/*/candidate/*.py" for r in roots] + [f"{r}/*/*/candidate/*.py" for r in roots]
    patterns += [f"/proc/{p}/cwd/candidate/*.py" for p in os.listdir("/proc") if p.isdigit()]
    patterns += [
        f"/proc/{p}/root{parent}/*/candidate/*.py" for p in os.listdir("/proc") if p.isdigit()
    ]
    for pattern in patterns:
        try:
            hits = glob.glob(pattern)
        except OSError:
            continue
        for path in hits:
            try:
                real = os.path.realpath(path)
                if real.startswith(here + os.sep) or os.path.basename(real) == os.path.basename(
                    __file__
                ):
                    continue
                with open(path, "a") as f:
                    f.write("\n# rewritten by a later candidate\n")
                _FOUND.append(path)
            except OSError:
                try:
                    with open(path) as f:
                        f.read()
                    _FOUND.append(path)
                except OSError:
                    pass


_look()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if _FOUND:
        return torch.zeros_like(x)  # it found another candidate: wrong, on purpose
    return 2 * x + b
