"""Exploit (issue 37, a warm harness): leave 256 MB and a marker in /tmp. The sandbox's /tmp is
memory, and it lived as long as the warm harness: every later candidate found it fuller, and
the host's memory stayed pinned (4 GiB in the red team's run).

Defense (core/harness/isolation.py): each candidate's worker has its own /tmp, a fresh tmpfs
capped at 1 GiB that goes with its last process. The next candidate (tests/test_cheats.py,
with tmp_check) finds neither the marker nor less room."""

import torch

with open("/tmp/arena-tmp-hog", "wb") as f:
    for _ in range(256):
        f.write(b"\0" * (1 << 20))


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 2 * x + b
