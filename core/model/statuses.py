"""The statuses the engine writes, as str-valued enums: `TimingKind.PREDICTED == "predicted"`,
so stored JSON, the store's columns and existing string comparisons are unchanged, while code
that means a status names it."""

from __future__ import annotations

from enum import Enum


class TimingKind(str, Enum):
    """How a result's times were obtained; results of different kinds are never ranked together."""

    MEASURED = "measured"  # device events on a real GPU
    PREDICTED = "predicted"  # a simulated GPU (`sim:<gpu>`): counted work through the time model
    CPU = "cpu"  # the CPU device: wall-clock on the host, never given a speed-of-light fraction
    EXTERNAL = "external"  # an external task (docs/interop.md): its own commands' timing and rules

    def __str__(self) -> str:
        return self.value


class ResultStatus(str, Enum):
    """A Result's `status` (core.model.result)."""

    PASSED = "passed"
    FAILED = "failed"
    INFRASTRUCTURE_ERROR = "infrastructure_error"

    def __str__(self) -> str:
        return self.value


class StageStatus(str, Enum):
    """A StageResult's `status`: how one gated stage ended."""

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    ERROR = "error"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value
