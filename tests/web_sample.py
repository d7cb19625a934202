"""Results to fill a store with for the leaderboard page's tests, screenshots and load bench:
agents and models on several families, devices and vendors, over several runs, with every
timing kind, failures, a proven violation, hidden workloads and candidate files on disk."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from core.model.result import Result, StageResult, WorkloadFigures
from core.store.db import Store

H200 = {"id": "cuda:0", "model": "NVIDIA H200", "vendor": "nvidia", "arch": "sm_90"}
MI300 = {"id": "box1/cuda:0", "model": "AMD Instinct MI300X", "vendor": "amd", "arch": "gfx942"}
SIM = {"id": "sim:h100", "model": "NVIDIA H100 (simulated)", "vendor": "nvidia", "arch": "sm_90"}
CPU = {"id": "cpu", "model": "x86_64", "vendor": "cpu", "arch": "x86_64"}
HIDDEN_LABEL = "M=4111,N=77"  # a hidden workload: the page must never show it


def result(
    task_id: str,
    speedup: float | None,
    device: dict,
    *,
    timing: str = "measured",
    sol: float | None = 0.4,
    source: str = "",
    integrity: tuple[str, ...] = (),
) -> Result:
    """A passed result with this speedup (None: failed at correctness), two visible workloads and one hidden."""
    passed = speedup is not None
    stages = [
        StageResult("compile", "passed", 0.4),
        StageResult(
            "correctness",
            "passed" if passed else "failed",
            0.2,
            None if passed else "output 0 differs at index 17: got 1.5, expected 2.0",
        ),
        StageResult(
            "generalization",
            "passed" if passed else "skipped",
            0.3,
            workloads=[{"label": HIDDEN_LABEL, "passed": passed}],
        ),
        StageResult("performance", "passed" if passed else "skipped", 1.2),
    ]
    work = []
    if passed:
        for label, hidden, base in (
            ("M=1024,N=1024", False, 42.0),
            ("M=4096,N=512", False, 88.0),
            (HIDDEN_LABEL, True, 120.0),
        ):
            work.append(
                WorkloadFigures(
                    label=label,
                    axes={"M": 1},
                    hidden=hidden,
                    mode="event" if timing != "predicted" else "predicted",
                    candidate={"median_us": base / speedup},
                    baseline={"median_us": base},
                    speedup=speedup,
                    roofline_us=base * 0.3,
                    sol_fraction=sol,
                )
            )
    return Result(
        task_id=task_id,
        candidate_sha256=hashlib.sha256(source.encode()).hexdigest(),
        device=dict(device),
        timing_kind=timing,
        status="passed" if passed and not integrity else "failed",
        failed_stage=None if passed and not integrity else "correctness",
        stages=stages,
        workloads=work,
        speedup=speedup if passed else 0.0,
        sol_fraction=sol if passed else None,
        sol_source="roofline" if passed else None,
        points=100.0,
        integrity_flags=list(integrity),
        seconds=2.0,
    )


def record(
    store: Store,
    run_id: str,
    agent: str,
    r: Result,
    source: str,
    folder: Path,
    model: str | None = None,
) -> int:
    """`r` as a job of `agent` in the run, its candidate kept in `folder` (so the page can show it)."""
    path = folder / f"{r.candidate_sha256[:16]}.py"
    path.write_text(source)
    n = len(store.jobs(run_id)) + 1
    job = store.add_job(
        run_id,
        task_id=r.task_id,
        device_id=r.device["id"],
        agent=agent,
        candidate=path,
        key=f"job-{n}",
    )
    store.record_result(job, r)
    if model is not None:
        attempt = store.add_attempt(
            run_id,
            n,
            key=f"attempt-{n}",
            agent=agent,
            agent_kind="cli",
            model=model,
            task_id=r.task_id,
            device_id=r.device["id"],
            variant="plain",
        )
        store.set_attempt_state(attempt, "done", job_id=job)
    return job


def add(
    store: Store,
    run_id: str,
    folder: Path,
    agent: str,
    task_id: str,
    speedup: float | None,
    device: dict,
    *,
    model: str | None = None,
    timing: str = "measured",
    sol: float | None = 0.4,
    integrity: tuple[str, ...] = (),
) -> int:
    source = f"# {agent} on {task_id} ({speedup})\nimport torch\n\ndef run(a, b):\n    return torch.matmul(a, b)\n"
    return record(
        store,
        run_id,
        agent,
        result(
            task_id, speedup, device, timing=timing, sol=sol, source=source, integrity=integrity
        ),
        source,
        folder,
        model,
    )


def fill(store: Store, folder: Path, runs: int = 3, seed: int = 7) -> list[str]:
    """A few runs of several agents; returns the run ids, oldest first."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    tasks = {
        "gemm": ["gemm/bf16_gemm", "gemm/fp8_gemm"],
        "attention": ["attention/flash_fwd"],
        "norm": ["norm/rmsnorm", "norm/layernorm"],
    }
    agents = [("claude-code", "opus"), ("codex", "gpt-5"), ("aider", "qwen3-coder")]
    ids = []
    for k in range(runs):
        run_id = store.create_run(f"nightly-{k + 1}")
        ids.append(run_id)
        for agent, model in agents:
            skill = {"claude-code": 1.6, "codex": 1.3, "aider": 0.9}[agent] * (1 + 0.15 * k)
            for ts in tasks.values():
                for task in ts:
                    for device in (H200, MI300):
                        s = None if rng.random() < 0.15 else round(skill * rng.uniform(0.7, 1.4), 3)
                        add(
                            store,
                            run_id,
                            folder,
                            agent,
                            task,
                            s,
                            device,
                            model=model,
                            sol=None if s is None else min(0.95, 0.25 * s),
                        )
            add(
                store,
                run_id,
                folder,
                agent,
                "gemm/bf16_gemm",
                round(skill * 1.1, 3),
                SIM,
                model=model,
                timing="predicted",
            )
            add(
                store,
                run_id,
                folder,
                agent,
                "norm/rmsnorm",
                round(skill, 3),
                CPU,
                model=model,
                timing="cpu",
                sol=None,
            )
        store.finish_run(run_id)
    add(
        store,
        ids[-1],
        folder,
        "reward-hacker",
        "gemm/bf16_gemm",
        40.0,
        H200,
        integrity=("wrote the output buffer before timing",),
    )
    return ids
