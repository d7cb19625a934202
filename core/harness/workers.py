"""The worker processes of an evaluation: where each part lives now (this module re-exports them).

- worker_process.py: `Worker` (the parent's handle: fork, spawn, request, kill), `WorkerDied`,
  `WorkerTimeout`, `describe_exit`, `waitpid`, a worker's first steps (`bootstrap`,
  `die_with_parent`, `close_inherited`, `redirect_output`, `print_exc`) and what a candidate's
  process may use (`limit_resources`, `drop_capabilities`, `libc`, the `PR_*` constants);
- worker_tools.py: task files and modules (`read_task_file`, `TaskFileChanged`,
  `module_from_source`, `import_file`, `entry`, `file_sha256`), `candidate_view`, replies
  (`error_reply`, `is_compile_error`) and `sync`;
- worker_watch.py: the watch on the candidate (`watch`, `replaced`, `hide_harness`,
  `watch_hooks`, `report_hooks`);
- candidate_worker.py: the candidate's worker (`candidate_main`, `run_for_check`,
  `hand_over_kept`);
- trusted_worker.py: the trusted worker (`trusted_main`); trusted_task.py: the task's code it
  loads (`full_fp32`, `baseline_impl`);
- trusted_checks.py: its memory of the checks (`ReferenceCache`, `compare_all`,
  `independence`, `INDEPENDENT_SAMPLE`).

The underscored names are the ones this module had before the split (zygote.py, tests).
"""

from __future__ import annotations

from core.harness.candidate_worker import candidate_main, hand_over_kept, run_for_check
from core.harness.trusted_checks import (
    INDEPENDENT_MIN_SHARE,
    INDEPENDENT_REL_DIFF,
    INDEPENDENT_SAMPLE,
    ReferenceCache,
    compare_all,
    independence,
)
from core.harness.trusted_checks import _sample as _sample
from core.harness.trusted_task import baseline_impl, full_fp32
from core.harness.trusted_worker import trusted_main
from core.harness.worker_process import (
    LINUX_CAPABILITY_VERSION_3,
    PR_CAPBSET_DROP,
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    Worker,
    WorkerDied,
    WorkerTimeout,
    bootstrap,
    close_inherited,
    describe_exit,
    die_with_parent,
    drop_capabilities,
    libc,
    limit_resources,
    print_exc,
    redirect_output,
    waitpid,
)
from core.harness.worker_tools import (
    TaskFileChanged,
    candidate_view,
    entry,
    error_reply,
    file_sha256,
    import_file,
    is_compile_error,
    module_from_source,
    read_task_file,
    sync,
)
from core.harness.worker_watch import hide_harness, replaced, report_hooks, watch, watch_hooks

_LINUX_CAPABILITY_VERSION_3 = LINUX_CAPABILITY_VERSION_3
_bootstrap, _libc, _print_exc = bootstrap, libc, print_exc
_entry, _module_from_source = entry, module_from_source

__all__ = [
    "INDEPENDENT_MIN_SHARE",
    "INDEPENDENT_REL_DIFF",
    "INDEPENDENT_SAMPLE",
    "LINUX_CAPABILITY_VERSION_3",
    "PR_CAPBSET_DROP",
    "PR_SET_DUMPABLE",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "_LINUX_CAPABILITY_VERSION_3",
    "ReferenceCache",
    "TaskFileChanged",
    "Worker",
    "WorkerDied",
    "WorkerTimeout",
    "_bootstrap",
    "_entry",
    "_libc",
    "_module_from_source",
    "_print_exc",
    "_sample",
    "baseline_impl",
    "bootstrap",
    "candidate_main",
    "candidate_view",
    "close_inherited",
    "compare_all",
    "describe_exit",
    "die_with_parent",
    "drop_capabilities",
    "entry",
    "error_reply",
    "file_sha256",
    "full_fp32",
    "hand_over_kept",
    "hide_harness",
    "import_file",
    "independence",
    "is_compile_error",
    "libc",
    "limit_resources",
    "module_from_source",
    "print_exc",
    "read_task_file",
    "redirect_output",
    "replaced",
    "report_hooks",
    "run_for_check",
    "sync",
    "trusted_main",
    "waitpid",
    "watch",
    "watch_hooks",
]
