"""Evaluation: one candidate through the gated pipeline. `evaluator` builds the harness job,
folds its events into a verdict and a `Result` (the `Evaluator` facade); `scoring` turns stage
results into numbers; `profiles` says how much work a reward costs; `batch` evaluates many
candidates of one task in one job; `scan` is the static scan; `executors` is the seam where a
job runs (local here; SSH in `remotes`, Ray in `core.orchestration`); `sandbox` is the one
module every untrusted process goes through; `validate` checks that a task folder is a fair,
working task by evaluating its own files."""
