"""What travels with a Ray job and what runs on its node: the job's files (the candidate with its
native siblings), the harness in a fresh process under the local sandbox policy, dying with
the Ray worker (PR_SET_PDEATHSIG), its event lines streamed back, the stale job folders of
killed workers swept, and the device probe."""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.devices.device import PACKAGE_ROOT
from core.evaluation.executors import HarnessError
from core.model import events
from core.model.candidate import native_siblings
from core.orchestration.ray_cluster import RayDevice

EXIT_GRACE_S = 10.0  # after evaluation_finished, how long the harness may take to exit
DEADLINE_SLACK_S = 30.0  # past the job's deadline, the node kills the harness
_SKIP = ("__pycache__", ".pyc")
FOLDER_PREFIX = "arena-ray-"  # a job's folder on its node, in the temporary folder


def job_files(job: dict[str, Any]) -> dict[str, bytes]:
    """The files a job names, by their path in the node's job folder: the candidate with its
    native siblings under `candidate/`; the task folder under `task/` only for a job that does
    not carry the task's sources. A job that does (every job core.evaluation.evaluator builds) ships no
    task folder, so its candidate cannot read task.yaml's hidden shapes on the node, as the
    sandbox hides the folder locally."""
    candidate = Path(job["candidate"])
    files = {f"candidate/{candidate.name}": candidate.read_bytes()}
    for p in native_siblings(candidate):
        files[f"candidate/{p.name}"] = p.read_bytes()
    task_dir = Path(job["task_dir"])
    for p in sorted(task_dir.rglob("*")) if "task_sources" not in job else ():
        if p.is_file() and not any(s in p.parts or p.suffix == s for s in _SKIP):
            files[f"task/{p.relative_to(task_dir).as_posix()}"] = p.read_bytes()
    return files


def node_job(job: dict[str, Any], root: Path) -> dict[str, Any]:
    """The job with its paths pointing into `root`, the node's job folder."""
    return {
        **job,
        "candidate": str(root / "candidate" / Path(job["candidate"]).name),
        "task_dir": str(root / "task"),
        "workdir": str(root / "work"),
    }


# --- on the node ------------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """preexec_fn: the harness gets SIGKILL when the thread that started it (sandbox.spawn's,
    which lives as long as the Ray worker) goes, so a killed worker leaves no harness behind."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _harness_env(device: RayDevice) -> dict[str, str]:
    """The local device's harness environment, with the GPU Ray assigned to this worker."""
    env = device.local.harness_env()
    if device.gpu:
        for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            env.pop(var, None)
            if var in os.environ:
                env[var] = os.environ[var]
    return env


def run_on_node(
    job: dict[str, Any], files: Mapping[str, bytes], device_id: str, deadline_s: float
) -> Iterator[Any]:
    """The Ray task's body: first a dict (node, worker and harness pids, sandbox status),
    then every event line the harness writes. Raises HarnessError when the harness fails."""
    from core.evaluation import locker, sandbox
    from core.evaluation.executors import harness_policy

    device = RayDevice.parse(device_id)
    sweep_stale_folders()
    root = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    (root / "owner").write_text(str(os.getpid()))
    proc: subprocess.Popen | None = None
    host_locker: locker.HostLocker | None = None
    read_fd = -1
    try:
        for name, data in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (root / "work").mkdir()
        job = node_job(job, root)
        job_path = root / "job.json"
        job_path.write_text(json.dumps(job))
        policy = harness_policy(device.local, (root,))
        policy = replace(policy, env=_harness_env(device))
        read_fd, write_fd = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "core.harness",
            "run",
            str(job_path),
            "--events-fd",
            str(write_fd),
        ]
        try:
            argv, env, status = sandbox.wrap(argv, policy)
        except sandbox.SandboxError as exc:
            os.close(write_fd)
            raise HarnessError(f"the harness's sandbox cannot start on this node: {exc}") from None
        # Sandboxed on NVIDIA: the host locker beside the harness, on this node, as locally.
        want = locker.wanted(device.local.type, sandbox.is_sandboxed(status))
        with open(root / "harness.log", "ab") as out:
            proc, host_locker = locker.spawn_beside(
                argv,
                env,
                want,
                out,
                (write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                cwd=str(root),
                preexec_fn=_die_with_parent,
            )
        os.close(write_fd)
        yield {
            "node": os.uname().nodename,
            "worker_pid": os.getpid(),
            "harness_pid": proc.pid,
            "sandbox": status,
            "locker_pid": host_locker.proc.pid if host_locker and host_locker.proc else None,
        }
        yield from _lines(
            read_fd, time.monotonic() + deadline_s + DEADLINE_SLACK_S, root / "harness.log"
        )
        try:
            proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if host_locker is not None:
            host_locker.close()
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        if read_fd >= 0:
            os.close(read_fd)
        shutil.rmtree(root, ignore_errors=True)


def sweep_stale_folders() -> None:
    """Remove the job folders of workers that died without cleaning up (a killed worker runs
    no `finally`): those whose `owner` pid is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        try:
            owner = int((folder / "owner").read_text())
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):  # not ours to judge (another user's, or being made now)
            continue


def _lines(fd: int, deadline: float, log_path: Path) -> Iterator[str]:
    """Event lines from the harness until evaluation_finished."""
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    buffer = b""
    try:
        while True:
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                yield text
                if '"evaluation_finished"' in text and isinstance(
                    events.parse(text), events.EvaluationFinished
                ):
                    return
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(timeout=left):
                raise HarnessError("the harness sent no evaluation_finished before its deadline")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                tail = (
                    log_path.read_text(errors="replace")[-2000:].strip()
                    if log_path.is_file()
                    else ""
                )
                raise HarnessError(
                    f"the harness exited without finishing the evaluation: {tail or 'no output'}"
                )
            buffer += chunk
    finally:
        selector.close()


def probe_on_node(device_id: str) -> dict[str, Any]:
    """The probe of the device a task with these resources gets (as `core.harness probe`)."""
    device = RayDevice.parse(device_id)
    proc = subprocess.run(
        [sys.executable, "-m", "core.harness", "probe", device.local.torch_device()],
        check=False,
        env={**os.environ, **_harness_env(device)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(PACKAGE_ROOT),
    )
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        data = {"error": f"probing failed: {proc.stderr.strip()[-500:] or 'no output'}"}
    return {**data, "node": os.uname().nodename}
