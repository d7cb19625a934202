"""The Ray backend (core/orchestration/ray_executor.py) on a local Ray instance this module starts: two CPUs,
so two evaluations at once, each a Ray task in its own worker process running the harness.

A batch spreads over the workers and lands in the store once per job; a worker killed in the
middle of a job is an infrastructure fault, retried on another slot, and leaves no harness
behind; the cluster's devices are listed by type; without `ray` the arena says how to get it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from core.evaluation.job import Timing
from core.model import events
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import execute
from core.store.db import Store

try:
    import psutil
    import ray
except ImportError:
    if os.environ.get("CI") == "true":
        raise  # .ci/run installs ray: here it must run, not skip
    pytest.skip("ray is not installed: pip install -e '.[ray]'", allow_module_level=True)

from core.orchestration.ray_executor import INSTALL_HINT, RayExecutor, capacities, job_files, offers
from tests.candidates import AXPY, WRONG

FAST = Timing(alternations=1, budget_ms=20.0, min_calls=1, max_calls=5)


@pytest.fixture(scope="module")
def cluster():
    """One local Ray instance for the module (its start-up takes several seconds)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def _fast_jobs(monkeypatch):
    monkeypatch.setattr(
        Timing, "for_device", classmethod(lambda cls, device_type, profile=None: FAST)
    )


def recording_factory(made: list[RayExecutor]):
    def make(device_id: str, folder: Path) -> RayExecutor:
        executor = RayExecutor(device_id)
        made.append(executor)
        return executor

    return make


def spec(fixture_tasks: Path, candidates: Path, *names: str) -> RunSpec:
    return RunSpec(
        name="ray",
        tasks=("elementwise/axpy",),
        candidates=names or ("starter",),
        devices=("ray:cpu",),
        tasks_dir=str(fixture_tasks),
        base_dir=str(candidates),
    )


def gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def leftovers(within_s: float = 10.0) -> list[str]:
    """Processes still running a harness in a node's job folder (`arena-ray-*`), after a grace."""
    deadline = time.monotonic() + within_s
    while True:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            cmdline = " ".join(p.info["cmdline"] or [])
            if (
                "core.harness" in cmdline
                and "/arena-ray-" in cmdline
                and p.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(f"{p.pid} {cmdline[:120]}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_a_job_ships_its_candidate_and_never_the_task_folder(tmp_path, fixture_tasks) -> None:
    (tmp_path / "solution.py").write_text("def run(x, b): ...\n")
    (tmp_path / "kernel.cu").write_text("// built by solution.py\n")
    (tmp_path / "notes.txt").write_text("not a source\n")
    job = {
        "candidate": str(tmp_path / "solution.py"),
        "task_dir": str(fixture_tasks / "elementwise" / "axpy"),
        "task_sources": {},
    }
    assert sorted(job_files(job)) == [
        "candidate/kernel.cu",
        "candidate/solution.py",
    ]  # task.yaml names hidden shapes
    del job["task_sources"]  # a job whose harness reads the task folder gets it
    assert "task/task.yaml" in job_files(job)


def test_the_cluster_offers_its_cpus_as_slots(cluster) -> None:
    assert [(o.id, o.count) for o in offers(None)] == [("ray:cpu", 2)]
    assert capacities(["ray:cpu", "cpu"], None) == {"ray:cpu": 2}
    with pytest.raises(ValueError, match="offers no ray:cuda: it has ray:cpu"):
        capacities(["ray:cuda"], None)


def test_a_batch_spreads_over_the_workers_and_each_result_is_stored_once(
    cluster, fixture_tasks, candidates, tmp_path
) -> None:
    made: list[RayExecutor] = []
    run = spec(fixture_tasks, candidates, "starter", "axpy_wrong.py")
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(run.name, run.to_json())
        outcome = asyncio.run(execute(store, run_id, run, recording_factory(made)))
        assert not outcome.failed_jobs
        by_candidate = {
            store.get_job(r.job_id).key.split("|")[1]: r.to_result() for r in store.results(run_id)
        }
        assert sorted(by_candidate) == ["axpy_wrong.py", "starter"]
        assert by_candidate["starter"].passed
        assert (
            by_candidate["axpy_wrong.py"].failed_stage == "correctness"
        )  # the candidate's fault: never retried
        assert all(job.attempts == 1 for job in store.jobs(run_id))
        assert by_candidate["starter"].device["id"] == "ray:cpu"
    started = [s for e in made for s in e.started]
    assert (
        len(made) == 2 and len(started) == 2
    )  # two slots (the cluster's two CPUs), one Ray task per job
    assert len({s["worker_pid"] for s in started}) == 2, "both workers took a job"
    assert all(gone(s["harness_pid"]) for s in started), "every harness ended with its job"


def test_a_worker_killed_mid_job_is_retried_and_the_job_finishes_once(
    cluster, fixture_tasks, candidates, tmp_path
) -> None:
    made: list[RayExecutor] = []
    killed: list[dict] = []

    def kill_the_first_worker() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for s in [s for e in made for s in e.started]:
                os.kill(
                    s["worker_pid"], signal.SIGKILL
                )  # the node loses the worker, the harness with it
                killed.append(s)
                return
            time.sleep(0.05)

    threading.Thread(target=kill_the_first_worker, daemon=True).start()
    run = spec(fixture_tasks, candidates, "starter")
    seen: list[events.Event] = []
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(run.name, run.to_json())
        outcome = asyncio.run(
            execute(
                store,
                run_id,
                run,
                recording_factory(made),
                on_event=lambda job_id, e: seen.append(e),
            )
        )
        assert killed and not outcome.failed_jobs
        [row] = store.results(run_id)  # one result, though the job ran twice
        assert row.to_result().passed
        [job] = store.jobs(run_id)
        assert job.attempts == 2
    retried = [e for e in seen if isinstance(e, events.JobStateChanged) and e.state == "retrying"]
    assert (
        len(retried) == 1
        and retried[0].fault == "infrastructure"
        and "WorkerCrashedError" in retried[0].reason
    )
    started = [s for e in made for s in e.started]
    assert len(started) == 2 and started[1]["worker_pid"] != killed[0]["worker_pid"]
    assert gone(killed[0]["harness_pid"]), "the killed worker's harness died with it: no orphan"
    assert gone(started[1]["harness_pid"])
    assert leftovers() == [], "no harness or candidate worker outlived its job"


def test_a_trainer_gets_rewards_from_the_cluster(cluster, fixture_tasks) -> None:
    from core.rl.arena import evaluate_many

    right, bad = evaluate_many(
        [("elementwise/axpy", AXPY), ("elementwise/axpy", WRONG)],
        ray="auto",
        tasks_dir=fixture_tasks,
    )
    assert (
        right.result.device["id"] == bad.result.device["id"] == "ray:cpu"
    )  # the default device: the cluster's (no GPU: CPUs)
    assert right.outcome == "correct" and right.reward > 0
    assert bad.outcome != "correct" and bad.result.failed_stage == "correctness" and not bad.retry


def test_a_run_file_names_its_cluster(tmp_path, fixture_tasks) -> None:
    from core.orchestration.runfile import RunFileError, load_run_file

    path = tmp_path / "run.yaml"
    path.write_text("tasks: [elementwise/axpy]\ndevices: [ray:cpu]\nray: ray://head:10001\n")
    assert load_run_file(path, fixture_tasks).ray == "ray://head:10001"
    path.write_text("tasks: [elementwise/axpy]\ndevices: [ray:cpu]\nray: 3\n")
    with pytest.raises(RunFileError, match=r"`ray`: must be a Ray address.*ray: auto"):
        load_run_file(path, fixture_tasks)


def test_a_worker_killed_while_its_candidate_hangs_leaves_nothing_behind(
    cluster, fixture_tasks, candidates, tmp_path
) -> None:
    """A hanging candidate writes no event, so only the chain of parent-death signals (and, in
    the sandbox, its PID namespace) ends its harness and worker when the Ray worker dies."""
    made: list[RayExecutor] = []
    killed: list[dict] = []

    def hang_children() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if (
                    "arena-hang-child" in " ".join(p.info["cmdline"] or [])
                    and "/arena-ray-" in p.cwd()
                ):
                    found.append(p)
            except psutil.Error:
                continue
        return found

    def kill_once_hanging() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            started = [s for e in made for s in e.started]
            if started and hang_children():
                os.kill(started[0]["worker_pid"], signal.SIGKILL)
                killed.append(started[0])
                return
            time.sleep(0.1)

    threading.Thread(target=kill_once_hanging, daemon=True).start()
    run = spec(fixture_tasks, candidates, "axpy_hang.py")
    run = RunSpec(**{**run.__dict__, "max_retries": 0})
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(run.name, run.to_json())
        outcome = asyncio.run(execute(store, run_id, run, recording_factory(made)))
        assert killed and store.results(run_id) == []
    [failed] = outcome.failed_jobs
    assert "infrastructure" in failed and "WorkerCrashedError" in failed
    assert gone(killed[0]["harness_pid"]) and leftovers() == []
    children = hang_children()
    for child in children:  # unsandboxed, the candidate's own child has nothing to end it
        child.kill()
    from core.evaluation.sandbox import is_sandboxed

    if is_sandboxed(killed[0]["sandbox"]):
        assert children == [], "the sandbox's PID namespace ended the candidate's child"


def test_arena_devices_lists_the_cluster(cluster, capsys) -> None:
    from arena_tui.cli import main

    assert main(["devices", "--ray", "auto", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row == {
        "id": "ray:cpu",
        "vendor": "",
        "kind": "CPU",
        "count": 2.0,
        "nodes": 1,
        "slots": 2,
    }


def test_without_ray_the_arena_says_how_to_install_it(monkeypatch, capsys, tmp_path) -> None:
    from arena_tui.cli import main
    from core.rl import arena as rl

    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    assert main(["devices", "--ray", "auto"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"pip install -e '\.\[ray\]'"):
        rl.Arena(["ray:cuda"])
    run_file = tmp_path / "run.yaml"
    run_file.write_text("tasks: [activation/silu_mul]\ndevices: [ray:cuda]\n")
    assert main(["run", str(run_file), "--headless"]) == 2
    assert "pip install -e '.[ray]'" in capsys.readouterr().err
