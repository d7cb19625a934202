"""The grammar of scheduler and store job keys, in one place.

- an evaluation job: `task|candidate|device|iteration` (`job_key`);
- an agent attempt: `agent|task|device|variant|iteration` (`attempt_key`);
- an attempt's final evaluation: `<attempt>|final`; one of its `arena check`s: `<attempt>|check-N`;
- a re-run or re-queue from the app: `<original>|<how>-<device>-N`.

Front ends read keys only through these functions, so a new kind of key is one edit here."""

from __future__ import annotations

SEP = "|"
FINAL_SUFFIX = SEP + "final"
CHECK_MARK = SEP + "check-"


def job_key(task_id: str, candidate: str, device: str, iteration: int) -> str:
    return SEP.join((task_id, candidate, device, str(iteration)))


def attempt_key(agent: str, task_id: str, device: str, variant: str, iteration: int) -> str:
    return SEP.join((agent, task_id, device, variant, str(iteration)))


def final_key(attempt: str) -> str:
    return attempt + FINAL_SUFFIX


def check_key(attempt: str, n: int) -> str:
    return f"{attempt}{CHECK_MARK}{n}"


def rerun_prefix(original: str, how: str) -> str:
    return f"{original}{SEP}{how}-"


def rerun_key(original: str, how: str, device: str, n: int) -> str:
    return f"{rerun_prefix(original, how)}{device}-{n}"


def is_check(key: str) -> bool:
    """An agent's `arena check` (shown live, never kept in a run's log)."""
    return CHECK_MARK in key


def attempt_of_check(key: str) -> str | None:
    return key.split(CHECK_MARK)[0] if is_check(key) else None


def attempt_of_final(key: str) -> str | None:
    return key[: -len(FINAL_SUFFIX)] if key.endswith(FINAL_SUFFIX) else None


def parts(key: str) -> list[str]:
    """The fields of a key (`task`, `candidate`, `device`, ... for a job key)."""
    return key.split(SEP)
