"""Exploit: leave a process running after the evaluation (double fork, new session, so it is
in no process group the harness kills): it could rewrite files, spy on later evaluations, or
hold the device. Computes the right answer.

Defense: the zygote that forks every candidate worker is a child subreaper: the orphaned
daemon is re-parented to it, found and killed at the end of the evaluation, and reported
(leftover_processes, an integrity flag: the evaluation fails). The sandbox's PID namespace does the same."""

import os

import torch

MARKER = "arena-cheat-daemon"
_started = False


def _daemonize():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", [MARKER, "3600"])
        os._exit(0)
    os.wait()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _started
    if not _started:
        _started = True
        _daemonize()
    return x * 2 + b
