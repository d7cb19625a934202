"""The cheat suite's catalogue: every cheating candidate in this folder, the exploit it tries,
the defense that must catch it, and how the result must look (docs/integrity.md).

Read by tests/test_cheats.py (CPU device) and tests/gpu/run_cheats.py (a GPU: the same
candidates plus tests/gpu/cheats/).

Outcomes (`expect`):
- `flag:NAME`: the evaluation fails with the integrity flag NAME.
- `stage:STAGE:STATUS[:TEXT]`: the evaluation fails at STAGE with that status (and TEXT in the
  stage's message).
- `neutral:slow` / `neutral:sane`: the cheat has no effect: the evaluation passes with the
  candidate's true figures: a slow kernel measures slow (speedup < 0.5), a patch meant to slow
  the baseline leaves the speedup below 10 (had it worked, 100× and more; CPU timings of
  identical code differ by 2× under load).
- `gap`: an open gap (docs/integrity.md, "Open"): only the listed review notes fire.
- `sandbox`: nothing but the sandbox stops it; without the sandbox only the notes are checked.
Several outcomes separated by `|` are alternatives (GPU timing decides which defense fires
first). `notes` are prefixes that must each start some review note or integrity flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.task_variants import variant_dir

HERE = Path(__file__).resolve().parent
TASKS = {
    "axpy": HERE.parent / "fixtures" / "tasks" / "elementwise" / "axpy",
    "axpy_loose": variant_dir(
        "axpy_loose"
    ),  # variants of the axpy fixture (tests/task_variants.py)
    "bf16_gemm": HERE.parent.parent / "tasks" / "gemm" / "bf16_gemm",
    "axpy_gpu": variant_dir("axpy_gpu"),
    "allsum": HERE.parent
    / "fixtures"
    / "ranked_tasks"
    / "comm"
    / "allsum",  # multi-rank: two ranks on the CPU (gloo)
    "sampling": HERE.parent.parent / "tasks" / "sampling" / "top_k_top_p_sampling",
    "silu_mul": HERE.parent.parent / "tasks" / "activation" / "silu_mul",
    "add_rmsnorm": HERE.parent.parent / "tasks" / "norm" / "add_rmsnorm",
    "route_topk_softmax": HERE.parent.parent / "tasks" / "moe" / "route_topk_softmax",
    "silu_mul_fp8_quant": HERE.parent.parent / "tasks" / "activation" / "silu_mul_fp8_quant",
}
PUBLISHED = (
    HERE.parent / "published"
)  # published kernels (Liger-Kernel) written as candidates: never flagged
PUBLISHED_CANDIDATES = (
    ("silu_mul", PUBLISHED / "liger_swiglu.py"),
    ("add_rmsnorm", PUBLISHED / "liger_fused_add_rmsnorm.py"),
)


@dataclass(frozen=True)
class Cheat:
    file: str
    task: str
    exploit: str
    defense: str
    expect: str
    notes: tuple[str, ...] = ()
    marker: str | None = None  # a process name that must not survive the evaluation
    special: str | None = None  # needs its own set-up in the test (a task copy, a harness copy)

    @property
    def path(self) -> Path:
        return HERE / f"{self.file}.py"


CHEATS = (
    Cheat(
        "reference_import",
        "axpy",
        "returns the reference's answer, importing reference.py from the task folder",
        "the sandbox masks the task folders",
        "sandbox",
        ("scan:task_files", "scan:file_access"),
    ),
    Cheat(
        "baseline_import",
        "axpy",
        "submits the baseline found in the task folder",
        "the sandbox masks the task folders",
        "sandbox",
        ("scan:task_files",),
    ),
    Cheat(
        "secrets_hunt",
        "axpy",
        "looks for the hidden workloads and seeds (environment, job.json, its frames, gc) and special-cases them",
        "job file consumed before candidate code runs; worker forked from a clean zygote, given only its view",
        "stage:generalization:failed",
        ("scan:introspection", "scan:environment", "scan:task_files"),
    ),
    Cheat(
        "parent_memory",
        "axpy",
        "reads the harness's memory through /proc/PID/mem",
        "harness parent, zygote and trusted worker not dumpable; candidate drops all capabilities",
        "stage:correctness:failed",
        ("scan:file_access",),
    ),
    Cheat(
        "frames_gc",
        "axpy",
        "looks for the expected output in callers' frames and gc.get_objects()",
        "the reference runs in another process",
        "stage:correctness:failed",
        ("scan:introspection",),
    ),
    Cheat(
        "cache_pointer",
        "axpy",
        "caches outputs keyed by input addresses; replays in the timing loop",
        "fresh inputs at the same addresses + checked timed calls",
        "flag:timed_output_mismatch",
        ("scan:output_cache",),
    ),
    Cheat(
        "cache_id",
        "axpy",
        "caches outputs keyed by the input tensors' id(); replays in the timing loop",
        "fresh inputs + checked timed calls",
        "flag:timed_output_mismatch",
        ("scan:output_cache",),
    ),
    Cheat(
        "cache_shape",
        "axpy",
        "computes once per shape and replays",
        "fresh inputs from a new seed for every correctness run",
        "stage:correctness:failed",
    ),
    Cheat(
        "cache_content",
        "axpy",
        "a slow kernel behind a cache keyed by input content",
        "every timed call sees new values: the cache never hits while timed",
        "neutral:slow",
    ),
    Cheat(
        "visible_only",
        "axpy",
        "hard-codes the visible workloads",
        "hidden workloads",
        "stage:generalization:failed",
    ),
    Cheat(
        "pow2_only",
        "axpy",
        "handles only power-of-two sizes",
        "hidden sets include sizes that are not powers of two",
        "stage:generalization:failed",
    ),
    Cheat(
        "constant",
        "axpy_loose",
        "returns a constant that a loose tolerance accepts",
        "bit-identical outputs for inputs whose references differ",
        "flag:input_independent_output",
    ),
    Cheat(
        "uninitialized",
        "axpy",
        "returns torch.empty, hoping it holds the last result",
        "reference in another process; fresh seeds; NaN poison freed before each call",
        "stage:correctness:failed",
    ),
    Cheat(
        "subclass",
        "axpy",
        "returns a tensor subclass (lazy)",
        "exact type check",
        "stage:correctness:failed:not a torch.Tensor",
        ("scan:tensor_subclass",),
    ),
    Cheat(
        "lazy_view",
        "axpy",
        "returns a lazy (negation-bit) view",
        "plain dense outputs only",
        "stage:correctness:failed:not a plain dense tensor",
        ("scan:tensor_subclass",),
    ),
    Cheat(
        "alias_input",
        "axpy",
        "writes into an input and returns it",
        "outputs may not alias inputs",
        "stage:correctness:failed:aliases input",
    ),
    Cheat(
        "lower_precision",
        "axpy",
        "computes in float16 where the task is float32",
        "per-dtype tolerance",
        "stage:correctness:failed",
        ("scan:precision_float16",),
    ),
    Cheat(
        "gemm_fp8",
        "bf16_gemm",
        "multiplies in float8 where the task is bfloat16",
        "per-dtype tolerance, every element",
        "stage:correctness:failed",
        ("scan:precision_float8",),
    ),
    Cheat(
        "patch_torch_add",
        "axpy",
        "replaces torch.add (the baseline's op) with a slow one",
        "the baseline runs in a process that never imports the candidate; replacing a torch function is proof of tampering",
        "flag:torch_patched",
        ("scan:monkeypatch",),
    ),
    Cheat(
        "patch_matmul",
        "bf16_gemm",
        "replaces torch.matmul globally to slow the baseline",
        "the baseline runs in a process that never imports the candidate; replacing a torch function is proof of tampering",
        "flag:torch_patched",
        ("scan:monkeypatch",),
    ),
    # Class 1 of docs/integrity.md: the harness's own tensor work runs in the candidate's process.
    Cheat(
        "mode_function_refill",
        "axpy",
        "a TorchFunctionMode left pushed computes the output while the harness refills the inputs",
        "the harness's tensor work runs with Python dispatch off; a mode left on the stack is proof",
        "flag:harness_hooked",
        ("scan:tensor_subclass",),
    ),
    Cheat(
        "mode_dispatch_lazy",
        "axpy",
        "a TorchDispatchMode left pushed fills an empty output only when the harness reads it",
        "outputs read with Python dispatch off; a mode left on the stack is proof",
        "flag:harness_hooked",
        ("scan:tensor_subclass",),
    ),
    Cheat(
        "lazy_on_read",
        "axpy",
        "assigns torch.Tensor.is_contiguous/data_ptr (inherited C methods) to fill outputs when inspected",
        "TensorBase methods bound at import; torch.Tensor resolved through its MRO by the watch",
        "flag:torch_patched",
        ("scan:monkeypatch",),
    ),
    Cheat(
        "patch_tensor_methods",
        "axpy",
        "assigns torch.Tensor.copy_, clone and __eq__ (inherited C methods)",
        "torch.Tensor resolved through its MRO by the watch",
        "flag:torch_patched",
        ("scan:monkeypatch",),
    ),
    # Class 4: stochastic outputs.
    Cheat(
        "sampling_argmax_fallback",
        "sampling",
        "returns the argmax for 12% of rows: each call's test passes",
        "evidence pooled over the checked calls: the argmax hit count against its expectation",
        "stage:correctness:failed:pooled|stage:generalization:failed:pooled|flag:timed_output_mismatch",
    ),
    Cheat(
        "sampling_greedy",
        "sampling",
        "greedy decoding (argmax) for a sampler; at B = 1 and 3, tests/test_cheats.py",
        "the per-call distribution test; at small B, pooled evidence over at least 64 rows' seeds",
        "stage:correctness:failed",
        special="small_b",
    ),  # end to end at B = 1 and 3: tests/test_sampling_pooled.py
    # Class 2: multi-rank tasks.
    Cheat(
        "patch_dist_barrier",
        "allsum",
        "replaces torch.distributed internals the timer's barrier calls, to all-gather there, untimed",
        "ranks meet through the parent, never torch.distributed; a rank's torch.distributed is watched",
        "flag:torch_patched",
        ("scan:monkeypatch",),
    ),
    Cheat(
        "peer_seed",
        "allsum",
        "reads its seed from the harness's frames and regenerates its peers' inputs instead of communicating",
        "no rank holds a seed any check uses (inputs from the checker, issue 37); before, each rank's seed was an HMAC under a key only the parent holds: what it finds now is no seed, and acting on it fails",
        "stage:correctness:failed|stage:performance:failed",
        ("scan:introspection",),
    ),
    Cheat(
        "rank_seed_swap",
        "allsum",
        "finds its seed in the harness's frames or gc, swaps it with its peers in one all_gather_object, then rebuilds their inputs instead of communicating",
        "no rank holds a seed any check uses: inputs from the checker (bytes for correctness runs, shared memory for timed calls; ranked_inputs.py)",
        "neutral:sane",
        ("scan:introspection",),
    ),
    Cheat(
        "rank_side_channel",
        "allsum",
        "passes its input to its peers through files in their shared folder: right values, no collective in any call",
        "the loopback traffic of every timed call, metered by the parent, must be at least a quarter of the baseline's (traffic.py)",
        "stage:performance:failed:collective_outside_timed_calls",
    ),
    # Issue 37: nothing of one evaluation is visible to the next (a warm harness; tests/test_cheats.py).
    Cheat(
        "earlier_candidates",
        "axpy",
        "reads and rewrites the candidates evaluated before it or beside it (their folders, /tmp, home, /proc/PID/root)",
        "each worker's own mount namespace covers every other evaluation's folder and /tmp; staged files removed at the end (isolation.py)",
        "neutral:sane",
        ("scan:file_access|scan:introspection",),
        special="warm",
    ),
    Cheat(
        "tmp_hog",
        "axpy",
        "leaves 256 MB and a marker in /tmp for the candidates after it",
        "a fresh, capped /tmp per worker, gone with its last process",
        "neutral:sane",
        special="warm",
    ),
    Cheat(
        "tmp_check",
        "axpy",
        "right only where /tmp holds nothing an earlier candidate left and has a fresh one's room",
        "(the check of tmp_hog)",
        "neutral:sane",
        special="warm",
    ),
    # Red team of issue 23 (docs/integrity.md, "Red team"): other families, each caught by a defense already in place.
    Cheat(
        "route_memo_fixed",
        "route_topk_softmax",
        "right only at the row counts task.yaml lists (visible and fixed hidden), cheap elsewhere",
        "at least half of every hidden set drawn with the secret seed, never a listed shape",
        "stage:generalization:failed",
    ),
    Cheat(
        "route_ids_int64",
        "route_topk_softmax",
        "returns topk_ids as int64 (torch's own) where int32 is declared",
        "every output's dtype must be the declared one",
        "stage:correctness:failed:has dtype torch.int64",
    ),
    Cheat(
        "norm_residual_inplace",
        "add_rmsnorm",
        "adds x into the harness's residual input and returns it as residual_out",
        "outputs may not share storage with an input unless declared in place",
        "stage:correctness:failed:aliases input",
    ),
    Cheat(
        "norm_outputs_alias",
        "add_rmsnorm",
        "returns one tensor as both outputs",
        "outputs may not share storage with each other",
        "stage:correctness:failed:shares memory with output",
    ),
    Cheat(
        "silu_transposed_output",
        "silu_mul",
        "right values in a transposed (strided) view",
        "plain dense contiguous outputs only",
        "stage:correctness:failed:not a plain dense tensor",
    ),
    Cheat(
        "norm_weight_cache",
        "add_rmsnorm",
        "caches the weight's conversion by data_ptr and results by a cheap hash of x",
        "fresh values at the same addresses every call; sampled timed calls checked",
        "stage:correctness:failed|stage:generalization:failed|flag:timed_output_mismatch",
        ("scan:output_cache",),
    ),
    Cheat(
        "import_thread_snoop",
        "silu_mul",
        "a thread started at import polls the input buffer and computes during the refill, before the timer",
        "sampled timed outputs copied the moment the call returns",
        "flag:timed_output_mismatch|neutral:sane",
        ("scan:threads",),
    ),
    Cheat(
        "fp8_pow2_scale",
        "silu_mul_fp8_quant",
        "power-of-two (UE8M0) scales where absmax / 448 is asked",
        "fp8 outputs judged after dequantization, scales within 1% (core/harness/fp8_check.py)",
        "stage:correctness:failed",
    ),
    Cheat(
        "rank_prefetch_thread",
        "allsum",
        "a thread sees each refilled input during the barrier's wait and does the all-reduce there, untimed",
        "ranks refill after the barrier, right before the timer (the order: tests/test_ranked_refill.py): its work lies inside the timed call; and a timed call that moves nothing through the process group fails (traffic.py)",
        "stage:performance:failed:collective_outside_timed_calls|neutral:sane",
        ("scan:threads", "scan:file_access"),
    ),
    Cheat(
        "patch_perf_counter",
        "axpy",
        "a slow kernel that slows time.perf_counter",
        "the timer bound its clock at import",
        "neutral:slow",
        ("runtime_patch", "scan:monkeypatch"),
    ),
    Cheat(
        "patch_harness_import",
        "axpy",
        "a slow kernel that imports core.harness.timing and slows its clock",
        "the harness is out of sys.modules: the import is a fresh, unused copy",
        "neutral:slow",
        ("scan:monkeypatch",),
    ),
    Cheat(
        "patch_harness_sysmodules",
        "axpy",
        "slows the clock of sys.modules['core.harness.timing']",
        "the harness is out of sys.modules",
        "stage:compile:failed:KeyError",
        ("scan:introspection",),
    ),
    Cheat(
        "patch_harness_gc",
        "axpy",
        "finds the live timing module through gc and slows its clock",
        "OPEN: in-process timer; notes only",
        "gap",
        ("scan:introspection",),
    ),
    Cheat(
        "precompute_from_frames",
        "axpy",
        "reads the round's seed from the harness's frames and precomputes every timed output",
        "the trusted worker draws the timed inputs into shared memory: no seed in the candidate's process, so it computes at its true speed",
        "neutral:sane",
        ("scan:introspection",),
    ),
    Cheat(
        "seed_hunt",
        "axpy",
        "searches frames and gc for the round's seed or the sampled calls at every timed call (wrong outputs once found)",
        "the seed and the sampled calls stay in the trusted worker (shared_io.py): it finds nothing and passes",
        "neutral:sane",
        ("scan:introspection",),
    ),
    Cheat(
        "refuse_shared_memory",
        "axpy",
        "lowers its open-file limit at import so no shared region can reach its worker: a downgrade to the path where its own process draws the inputs",
        "a region is mapped before any candidate code runs (core/harness/correctness.py, _prove_sharing): a later failure to map is the candidate's doing",
        "flag:shared_memory_refused",
        (),
    ),
    Cheat(
        "check_seed_hunt",
        "axpy",
        "searches frames and gc for a correctness run's seed at every call (wrong outputs once found)",
        "correctness inputs are drawn by the trusted worker into shared memory (shared_check.py): it finds nothing and passes",
        "neutral:sane",
        ("scan:introspection",),
    ),
    Cheat(
        "forged_verdicts",
        "axpy",
        "writes forged stage/evaluation verdicts to fds 0-20 and /proc/self/fd/*",
        "workers keep no descriptor but their own socket; the channel rejects what is not a frame",
        "stage:compile:crashed|stage:correctness:failed",
        ("scan:file_access",),
    ),
    Cheat(
        "daemon",
        "axpy",
        "leaves a daemon running (double fork, setsid)",
        "the zygote is a child subreaper: the daemon is found, killed and flagged (no honest kernel detaches processes)",
        "flag:leftover_processes",
        ("scan:processes",),
        marker="arena-cheat-daemon",
    ),
    Cheat(
        "fork_bomb",
        "axpy",
        "forks without end (capped at 584 processes), each child in its own session",
        "RLIMIT_NPROC (unprivileged users) and the zygote's cleanup",
        "flag:leftover_processes|stage:correctness:failed",
        ("scan:processes",),
        marker="arena-cheat-forkbomb",
    ),
    Cheat(
        "memory_hog",
        "axpy",
        "allocates memory until the machine runs out",
        "RLIMIT_DATA on the candidate's worker (CPU device)",
        "stage:correctness:failed:allocate memory",
    ),
    Cheat(
        "infinite_loop",
        "axpy",
        "never returns",
        "per-stage time limits, the process group killed",
        "stage:correctness:timeout",
    ),
    Cheat(
        "segfault",
        "axpy",
        "segfaults",
        "a dead worker is the candidate's fault",
        "stage:compile:crashed:SIGSEGV",
        ("scan:native_calls",),
    ),
    Cheat(
        "abort",
        "axpy",
        "aborts",
        "a dead worker is the candidate's fault",
        "stage:compile:crashed:SIGABRT",
    ),
    Cheat(
        "kill_harness",
        "axpy",
        "kills the zygote that forked it, hoping for an infrastructure fault",
        "the worker dies with it: a crash, the candidate's fault; the next job gets a fresh zygote",
        "stage:compile:crashed",
        ("scan:processes",),
    ),
    Cheat(
        "race",
        "axpy",
        "a race: right on one call, wrong on the next with the same inputs",
        "the first seed of each workload runs twice",
        "stage:correctness:failed:not deterministic",
    ),
    Cheat(
        "thread_after_return",
        "axpy",
        "returns before the work is done, a thread finishes it (timing only)",
        "sampled timed outputs copied the moment the call returns",
        "flag:timed_output_mismatch",
        ("scan:threads",),
    ),
    Cheat(
        "modify_task_files",
        "axpy",
        "rewrites the task's reference and baseline on disk",
        "the trusted worker executes the bytes hashed at job build, read before candidate code runs; the change is flagged",
        "flag:task_files_modified",
        special="task_copy",
    ),
    Cheat(
        "queued_job_reader",
        "axpy",
        "reads the job file of an evaluation queued behind it (hidden workloads, seeds)",
        "the local executor hands the harness its jobs on a pipe: no job file exists",
        "neutral:sane",
        special="concurrent",
    ),
    Cheat(
        "modify_harness",
        "axpy",
        "rewrites the harness's timer on disk",
        "the running harness imported its code first; the parent hashes its files around each evaluation",
        "flag:harness_files_modified",
        special="harness_copy",
    ),
)


def by_name(name: str) -> Cheat:
    return next(c for c in CHEATS if c.file == name)


def outcome_problems(cheat_expect: str, notes_wanted: tuple[str, ...], result) -> list[str]:
    """What is wrong with `result` for this expectation ([] when it is as expected)."""
    problems = []
    options = cheat_expect.split("|")
    seen = []
    for option in options:
        why = _one(option, result)
        if why is None:
            break
        seen.append(why)
    else:
        problems.append(" / ".join(seen))
    texts = list(result.review_notes) + list(result.integrity_flags)
    for wanted in notes_wanted:
        if not any(t.startswith(w) for w in wanted.split("|") for t in texts):
            problems.append(f"no review note or flag starts with {wanted!r}")
    if (
        cheat_expect not in ("gap", "sandbox")
        and not any(o.startswith("neutral") for o in options)
        and result.status == "passed"
    ):
        problems.append(f"a cheat passed with {result.points:.0f} points")
    return problems


def _one(option: str, result) -> str | None:
    kind, _, rest = option.partition(":")
    if kind == "flag":
        if result.status == "passed" or not any(
            f.startswith(rest + ":") for f in result.integrity_flags
        ):
            return f"expected the integrity flag {rest}, got status {result.status} and flags {result.integrity_flags}"
        return None
    if kind == "stage":
        stage, status, *text = rest.split(":", 2)
        got = result.stage(stage)
        if (
            result.status == "passed"
            or result.failed_stage != stage
            or got.status != status
            or (text and text[0] not in (got.message or ""))
        ):
            return (
                f"expected {stage} {status}{' with ' + repr(text[0]) if text else ''}, got {result.status} at {result.failed_stage} "
                f"({result.stage(result.failed_stage).status if result.failed_stage else ''}: {(result.stage(result.failed_stage).message or '')[:300] if result.failed_stage else ''})"
            )
        return None
    if kind == "neutral":
        if result.status != "passed":
            return f"expected the cheat to pass at its true speed, got {result.status} at {result.failed_stage}: {result.stage(result.failed_stage).message if result.failed_stage else ''}"
        bound = 0.5 if rest == "slow" else 10.0
        if result.speedup >= bound:
            return f"expected a speedup below {bound} (the cheat's true speed), got {result.speedup:.2f}"
        return None
    if kind in ("gap", "sandbox"):
        return None
    raise ValueError(f"unknown expectation {option!r}")
