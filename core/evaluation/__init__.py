"""Evaluation: one candidate through the gated pipeline. `job` builds the harness job, `verdict`
folds its events into a verdict and a `Result`, `evaluator` is the `Evaluator` facade over both;
`scoring` turns stage results into numbers; `profiles` says how much work a reward costs; `batch`
evaluates many candidates of one task in one job; `scan` is the static scan; `executors` is the
seam where a job runs (local here; SSH in `remotes`, Ray in `core.orchestration`); `sandbox` is the
one module every untrusted process goes through (its policy, bound paths and command line in
`sandbox_policy`, `sandbox_paths`, `sandbox_command`); `validate` checks that a task folder is a
fair, working task by evaluating its own files (its reports `validate_report`, its checks
`static_checks` and `code_checks`)."""
