"""Exploit: a slow kernel (2 ms a call) that slows the clock the timer reads: time.perf_counter
(and time.time, time.monotonic) replaced by a clock running 1000 times slower.

Defense: the timer bound its clock when it was imported, before the candidate was: the patch
does not reach it, and the measured time is the true (slow) one. The runtime patch is noted."""

import time

import torch

_real = time.perf_counter
_t0 = _real()


def _slow_clock():
    return _t0 + (_real() - _t0) / 1000


time.perf_counter = _slow_clock
time.monotonic = _slow_clock
time.time = _slow_clock


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    end = _real() + 0.002
    while _real() < end:
        pass
    return x * 2 + b
