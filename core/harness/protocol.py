"""The protocol between the engine and the harness, and inside the harness between its parent
and its worker processes: the op names and the shape of every message.

Messages stay plain JSON dicts on the wire and at run time: these TypedDicts describe them for
the type checker and the reader, and change nothing at run time (a TypedDict is a dict), so
code that builds `{"op": "time", ...}` by hand keeps working. `Op` is a str-valued Enum: a
message's `msg["op"] == Op.TIME` and `op == "time"` are the same test.

Directions:
- engine -> harness: one `Job` per evaluation (a line on a warm harness's stdin, or a file);
- harness -> engine: `HarnessEvent`s on a private file descriptor (channel.EventWriter);
- harness parent -> workers: `Request`s with an `op`; workers answer one `Reply` each (plus raw
  tensor bytes where a reply names `tensors`), over channel.send/recv;
- harness parent -> zygote: `spawn`, `wait`, `cleanup`, `exit` (zygote.py).

Imports nothing outside the standard library, like the rest of the harness.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, TypedDict

# Set in a `sim:` device's candidate worker to the simulated GPU's id (`sim:h200`): code that
# picks an implementation per device (a task's baseline.py) takes the GPU's Triton branch there.
SIM_GPU_ENV = "ARENA_SIM_GPU"


class Op(str, Enum):
    """Every op a harness worker, the trusted worker, a rank or the zygote answers."""

    # any worker
    INIT = "init"  # the job, to a forked worker
    EXIT = "exit"
    # the candidate worker (single device)
    WARM = "warm"  # start the device (its CUDA context) before any candidate code runs
    COMPILE = "compile"  # import the candidate and make its first call (builds JIT kernels)
    RUN = "run"  # calls for the correctness check: outputs handed back as tensors
    TIME = "time"  # a timed round (the trusted worker times the baseline with the same op)
    PREDICT = "predict"  # sim: devices: count the candidate's work instead of timing it
    KEPT = "kept"  # the outputs kept from timed calls, for check_timed
    ATTACH = "attach"  # map the region the trusted worker made (shared_check.py)
    DETACH = "detach"  # unmap it at the end of a stage (the trusted worker then frees it)
    RUN_SHARED = "run_shared"  # correctness calls on the region's inputs, outputs into its slots
    PEER = "peer"  # the socket to the trusted worker, for timed rounds over shared memory
    # a multi-rank candidate
    IMPORT = "import"
    FIRST_CALL = "first_call"
    ESTIMATE = "estimate"
    RUN_GIVEN = "run_given"  # correctness calls on the inputs the checker drew (ranked_inputs.py)
    # the checker of a multi-rank evaluation
    INPUTS = "inputs"  # every rank's inputs for one correctness run, as raw bytes
    SERVE_RANKS = "serve_ranks"  # every rank's timed round over shared memory, then its verdict
    # the trusted worker (reference and baseline)
    EXPECT = "expect"  # compute the reference outputs for one (workload, seed)
    CHECK = "check"  # compare the candidate's outputs with them
    CHECK_TIMED = "check_timed"  # compare outputs kept from timed calls
    PROBE_REGION = "probe_region"  # a small region, mapped before any candidate code runs
    STAGE = "stage"  # draw one correctness run's inputs into the candidate worker's region
    COLLECT = "collect"  # copy a run's output slots out (no reply)
    JUDGE = "judge"  # compare the collected outputs with the reference
    DROP = "drop"  # forget a run that will not be judged (no reply)
    RELEASE = "release"  # free a worker's region: unmapped, unmappable, or `gone` (no reply)
    REGIONS = "regions"  # what the trusted worker holds now (introspection)
    SERVE_ROUND = "serve_round"  # draw a timed round's inputs, check its sampled calls
    SYNC = "sync"  # a batch's next candidate starts from a clean channel
    TRIM = "trim"  # give the device back the cached references and the allocator's free blocks
    JIT = "jit"  # what it compiled (Triton's cache entries), for the next trusted workers
    PREDICT_BASELINE = "predict_baseline"
    SIM_VALUES = (
        "sim_values"  # sim: devices: the counted call's known elements against the reference
    )
    SIM_SHARE = "sim_share"  # sim: devices: the share of the byte formula the drawn inputs need
    # the zygote
    SPAWN = "spawn"
    WAIT = "wait"
    CLEANUP = "cleanup"

    def __str__(self) -> str:
        return self.value


# --- engine -> harness: the job -------------------------------------------------------------


class WorkloadSpec(TypedDict, total=False):
    """One concrete workload of a job: its label, axes and the shapes of every input."""

    label: str
    axes: dict[str, Any]
    shapes: dict[str, list[int]]
    seeds: list[int]
    seed: int
    hidden: bool
    flops: float | None
    bytes: float | None


class TensorSpecJson(TypedDict, total=False):
    """An input's or an output's spec (core.model.task.TensorSpec in JSON)."""

    name: str
    dtype: str
    shape: list[str | int]
    inplace_of: str | None
    kind: str


class Job(TypedDict, total=False):
    """What the engine hands the harness for one evaluation (core.evaluation.job.build_job)."""

    version: int
    task_id: str
    task_dir: str
    task_sources: dict[
        str, str
    ]  # reference.py, baseline.py, inputs.py: the candidate never sees the folder
    task_files: dict[str, str]
    task_inputs: str | None
    candidate: str  # the candidate module's path
    workdir: str
    device: dict[str, Any]  # the device's JSON: kind, torch_device, the sim target for sim: devices
    torch_device: str
    inputs: list[TensorSpecJson]
    outputs: list[TensorSpecJson]
    correctness: dict[str, Any]  # the task's rule: rtol, atol, min_match, ...
    stages: dict[str, list[WorkloadSpec]]  # correctness, generalization, performance
    limits: dict[str, Any]
    timing: dict[str, Any]
    profile: str
    world_size: int
    candidate_memory_bytes: int | None
    memory_bytes: int | None
    reference_cache_bytes: int
    batch: list[dict[str, Any]]  # a batch job's members (core/harness/batch.py)
    # set by the parent for a forked worker of a multi-rank job
    role: str
    rank: int
    group_timeout_s: float


# --- harness -> engine: events ----------------------------------------------------------------

EventType = Literal[
    "harness_ready",
    "evaluation_started",
    "stage_started",
    "stage_finished",
    "workload_checked",
    "workload_timed",
    "finding",
    "evaluation_finished",
]


class HarnessEvent(TypedDict, total=False):
    """One JSON event the harness reports (the engine folds them into core.model.events)."""

    type: EventType
    stage: str
    status: str
    fault: str | None
    seconds: float
    workload: str | None
    axes: dict[str, Any]
    passed: bool
    message: str | None
    worst: Any
    check: str
    proven: bool
    task_id: str
    device: dict[str, Any]
    versions: dict[str, str]
    error: str
    pid: int


# --- harness parent -> workers: requests and replies ------------------------------------------


class Request(TypedDict, total=False):
    """A request to a worker. Which keys an op carries:

    compile: workload, seed | run: workload, seed, repeat | time: workload, seed, graph,
    first_index, calls, ... | predict: workload, seed | kept | expect: key, workload, seed |
    check: key, workload, workload_key, member, seed, runs, tensors | check_timed: workload,
    member, seed, calls, tensors | sync: nonce | predict_baseline: workload, seed, formula | sim_values: workload, seed, values |
    import, first_call, estimate, run_given: a rank's | inputs, serve_ranks, peer: the
    checker's | spawn, wait (pid, timeout), cleanup: the zygote's."""

    op: str  # an Op's value
    job: Job
    workload: WorkloadSpec
    seed: int
    repeat: int
    runs: int
    key: str
    workload_key: str
    member: str
    tensors: list[dict[str, Any]] | None
    calls: list[int]
    graph: bool
    first_index: int
    sample: list[int]
    rank_seeds: list[int]
    nonce: str
    formula: dict[str, Any]
    pid: int
    timeout: float
    rank: int  # peer: whose socket follows (the checker of a multi-rank evaluation)


class Reply(TypedDict, total=False):
    """A worker's answer. `ok` is always there; the rest depends on the op."""

    ok: bool
    error: str  # the failure, when not ok
    traceback: str
    compile_error: bool
    first_call_error: str  # the first call failed, but not as a build failure
    tampered: list[str]  # torch names the candidate replaced (reported on the next reply)
    autotune: dict[str, list[int]]  # per kernel: tunings, tried, offered (autotune.py)
    tensors: list[dict[str, Any]]  # the meta of the raw tensor bytes that follow the header
    malformed: str  # outputs that could not be unpacked
    runs: list[Any]  # check: verdicts per run
    independent: str | None
    results: list[dict[str, Any]]  # check_timed: per call
    impl: str | None  # the baseline's implementation
    sync: str
    ms: float
    ranks: list[Any]  # inputs: every rank's input descriptions (the checker)
    sizes: list[int]  # ... and the bytes of each
    shared: bool  # peer: this device can share memory
    reason: str | None  # ... or why not


Message = Request | Reply
