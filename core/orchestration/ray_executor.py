"""RayExecutor: core.evaluation.executors.Executor for the GPUs and CPUs of a Ray cluster.

A Ray device id names what an evaluation asks the cluster for, never a node:

    ray:cpu      `cpus_per_eval` CPUs (default 1) of any node
    ray:cuda     one GPU of any type (NVIDIA, or AMD with a ROCm torch: the harness's `cuda`)
    ray:<TYPE>   one GPU of Ray's accelerator type TYPE (`ray:H100`, `ray:A100`, `ray:L4`,
                 `ray:AMD-Instinct-MI300X-OAM`: the `accelerator_type:<TYPE>` resource nodes report)

Each evaluation is one Ray generator task with those resources. On the node it writes the
job's files (the candidate with its native siblings; never the task folder, whose sources the
job carries) into a fresh folder, starts `python -m core.harness run` in a fresh
process under the same sandbox policy as a local harness (core/executors.harness_policy), and
yields every event line as the harness writes it; the driver parses and forwards them. When
the arena connects, its `core` package travels with the job (Ray's `py_modules`), so a node
needs only Python with ray, torch, triton and PyYAML.

The harness dies with the Ray worker (PR_SET_PDEATHSIG; in the sandbox also bwrap's
--die-with-parent), and the harness's workers die with it: a lost node, a killed worker or a
cancelled job leaves no harness behind (in the sandbox, nothing the candidate started either:
its PID namespace ends with it). A killed worker's job folder is removed by the next job on
that node. Ray never retries a task (`max_retries=0`): every
Ray error (a node died, a worker crashed, the harness failed) is a HarnessError, which the
scheduler treats as an infrastructure fault and retries on another slot; a candidate's failure
is an event like any other and is never retried.

`ray` is an optional extra (`pip install 'kernel-arena[ray]'`); this module imports it only
when a Ray device is used.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from core.devices.device import PACKAGE_ROOT, DeviceError, DeviceInfo, LocalDevice, info_from_probe
from core.evaluation.executors import HarnessError, OnEvent
from core.model import events
from core.model.candidate import native_siblings

PREFIX = "ray:"
INSTALL_HINT = "Ray devices need the `ray` package: pip install 'kernel-arena[ray]'"
LOCAL = "local"  # the address that starts a Ray instance on this machine
EXIT_GRACE_S = 10.0  # after evaluation_finished, how long the harness may take to exit
DEADLINE_SLACK_S = 30.0  # past the job's deadline, the node kills the harness
_SKIP = ("__pycache__", ".pyc")
FOLDER_PREFIX = "arena-ray-"  # a job's folder on its node, in the temporary folder
SHIP_CORE = {"py_modules": [str(PACKAGE_ROOT / "core")], "excludes": ["__pycache__", "*.pyc"]}


class RayUnavailable(DeviceError):
    """A Ray device or address was asked for, and `ray` is not installed."""


def is_ray_device(device_id: str) -> bool:
    return device_id.startswith(PREFIX)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(INSTALL_HINT) from None
    return ray


@dataclass(frozen=True)
class RayDevice:
    """What a `ray:` id asks each evaluation's task for."""

    id: str
    kind: str  # cpu | cuda | the accelerator type

    @classmethod
    def parse(cls, device_id: str) -> RayDevice:
        kind = device_id[len(PREFIX) :] if is_ray_device(device_id) else ""
        if not kind or "/" in kind or kind.strip() != kind:
            raise DeviceError(
                f"`{device_id}` is not a Ray device id: write ray:cpu, ray:cuda (any GPU) or ray:<accelerator type> such as ray:H100"
            )
        return cls(device_id, kind)

    @property
    def gpu(self) -> bool:
        return self.kind != "cpu"

    @property
    def local(self) -> LocalDevice:
        """The local device the harness is told it runs on (Ray pins the GPU itself)."""
        return LocalDevice("cuda:0" if self.gpu else "cpu")

    def resources(self, cpus_per_eval: float) -> dict[str, Any]:
        """Ray task options for one evaluation."""
        if self.kind == "cpu":
            return {"num_cpus": cpus_per_eval, "num_gpus": 0}
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": 1}
        if self.kind != "cuda":
            options["accelerator_type"] = self.kind
        return options


# --- the cluster --------------------------------------------------------------------------------


def connect(address: str | None) -> Any:
    """Connect this process to the cluster at `address` (`auto`: the one RAY_ADDRESS or a
    local `ray start` names; `local`: start one here), shipping this `core` package to every
    task (the job's `py_modules`). Already connected (a trainer that called ray.init), the
    existing connection is used as it is: its nodes must import `core` (kernel-arena installed
    there, or `py_modules` in the trainer's runtime_env: docs/ray.md). Returns `ray`."""
    ray = import_ray()
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or "auto"
        _check_reachable(address)
        try:
            ray.init(
                address=None if address == LOCAL else address,
                runtime_env=SHIP_CORE,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise DeviceError(
                f"cannot reach the Ray cluster at `{address}`: {exc} (start one with `ray start --head`, or pass --ray local)"
            ) from None
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A `host:port` or `ray://host:port` that takes no connection fails in seconds here;
    ray.init would retry it for minutes."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if address in ("auto", LOCAL) or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise DeviceError(
            f"cannot reach the Ray cluster at `{address}`: {exc} (is its head node up? `ray status` there says)"
        ) from None


@dataclass(frozen=True)
class Offer:
    """What the cluster offers for one Ray device id, over its live nodes."""

    id: str
    vendor: str
    kind: str  # CPU | GPU | the accelerator type
    count: float  # CPUs or GPUs in all
    nodes: int


def vendor_of(accelerator_type: str) -> str:
    """The vendor of one of Ray's accelerator type names for GPUs (`AMD-Instinct-MI300X-OAM`,
    `Intel-GPU-Max-1550`; NVIDIA's carry no prefix: `H100`, `A100`, `L4`)."""
    for prefix, vendor in (("AMD", "AMD"), ("Intel", "Intel")):
        if accelerator_type.lower().startswith(prefix.lower()):
            return vendor
    return "NVIDIA"


def offers(address: str | None) -> list[Offer]:
    """Every Ray device id the cluster can run, by vendor and type: `ray:cpu`, `ray:cuda`
    (any GPU) and one `ray:<TYPE>` per accelerator type its nodes report."""
    ray = connect(address)
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    found = [
        Offer(
            "ray:cpu",
            "",
            "CPU",
            sum(r.get("CPU", 0) for r in nodes),
            sum(1 for r in nodes if r.get("CPU")),
        )
    ]
    gpus = [r for r in nodes if r.get("GPU")]
    if gpus:
        found.append(Offer("ray:cuda", "any", "GPU", sum(r["GPU"] for r in gpus), len(gpus)))
    types = sorted(
        {k.split(":", 1)[1] for r in gpus for k in r if k.startswith("accelerator_type:")}
    )
    for t in types:
        with_type = [r for r in gpus if f"accelerator_type:{t}" in r]
        found.append(
            Offer(f"ray:{t}", vendor_of(t), t, sum(r["GPU"] for r in with_type), len(with_type))
        )
    return [o for o in found if o.count > 0]


def capacities(
    device_ids: Sequence[str], address: str | None, cpus_per_eval: float = 1
) -> dict[str, int]:
    """Slots per Ray device: evaluations the cluster can run at once (its GPUs of that type,
    or its CPUs / `cpus_per_eval`). DeviceError for a device the cluster does not offer."""
    wanted = [d for d in dict.fromkeys(device_ids) if is_ray_device(d)]
    if not wanted:
        return {}
    for d in wanted:
        RayDevice.parse(d)
    by_id = {o.id: o for o in offers(address)}
    found: dict[str, int] = {}
    for d in wanted:
        offer = by_id.get(d)
        count = int(offer.count // (cpus_per_eval if d == "ray:cpu" else 1)) if offer else 0
        if count < 1:
            have = ", ".join(f"{o.id} ({o.count:g})" for o in by_id.values()) or "nothing"
            raise DeviceError(
                f"the Ray cluster offers no {d}: it has {have} (`arena devices --ray ADDRESS` lists them)"
            )
        found[d] = count
    return found


def default_device(address: str | None) -> str:
    """`ray:cuda` on a cluster with GPUs, else `ray:cpu`."""
    return "ray:cuda" if any(o.id == "ray:cuda" for o in offers(address)) else "ray:cpu"


def with_ray(
    factory: Callable[[str, Path], Any] | None, address: str | None, cpus_per_eval: float = 1
) -> Callable[[str, Path], Any]:
    """An executor factory that makes RayExecutors for `ray:` ids and asks `factory` (default:
    LocalExecutor) for the others."""

    def make(device_id: str, folder: Path) -> Any:
        if is_ray_device(device_id):
            return RayExecutor(device_id, address, cpus_per_eval)
        if factory is not None:
            return factory(device_id, folder)
        from core.evaluation.executors import LocalExecutor

        return LocalExecutor(device_id, folder)

    return make


# --- what travels with a job ------------------------------------------------------------------------


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
    from core.evaluation import sandbox
    from core.evaluation.executors import harness_policy

    device = RayDevice.parse(device_id)
    sweep_stale_folders()
    root = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
    (root / "owner").write_text(str(os.getpid()))
    proc: subprocess.Popen | None = None
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
        with open(root / "harness.log", "ab") as out:
            proc = sandbox.spawn(
                argv,
                env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                pass_fds=(write_fd,),
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
        }
        yield from _lines(
            read_fd, time.monotonic() + deadline_s + DEADLINE_SLACK_S, root / "harness.log"
        )
        try:
            proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    finally:
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


# --- the driver's side ------------------------------------------------------------------------------------


@cache
def _remote(ray: Any, body: Callable[..., Any], generator: bool) -> Any:
    """The Ray remote function for `body`: never retried by Ray (the scheduler retries)."""
    options: dict[str, Any] = {"max_retries": 0, "retry_exceptions": False}
    if generator:
        options["num_returns"] = "streaming"
    return ray.remote(**options)(body)


_PROBED: dict[tuple[str | None, str], DeviceInfo] = {}  # by (address, device id)


class RayExecutor:
    """Runs jobs as Ray tasks on whichever node has the resources `device_id` asks for."""

    def __init__(self, device_id: str, address: str | None = None, cpus_per_eval: float = 1):
        self.device = RayDevice.parse(device_id)
        self.device_id = device_id
        self.address = address
        self.cpus_per_eval = cpus_per_eval
        self.ray = connect(address)
        self.started: list[
            dict[str, Any]
        ] = []  # where each job ran (node, worker and harness pids)
        self.info = self._probe()

    def _probe(self) -> DeviceInfo:
        key = (self.address, self.device_id)
        if key not in _PROBED:
            task = _remote(self.ray, probe_on_node, False).options(
                **self.device.resources(self.cpus_per_eval)
            )
            try:
                data = self.ray.get(task.remote(self.device_id), timeout=300)
            except self.ray.exceptions.RayError as exc:  # node or worker lost, or the task raised
                raise HarnessError(
                    f"{self.device_id}: probing on the Ray cluster failed: {exc}"
                ) from None
            except Exception as exc:  # noqa: BLE001 - GetTimeoutError: no node with these resources came free
                raise HarnessError(
                    f"{self.device_id}: no node ran the probe within 300 s ({type(exc).__name__})"
                ) from None
            if "error" in data:
                raise HarnessError(f"{self.device_id} on node {data.get('node')}: {data['error']}")
            info = info_from_probe(self.device_id, data)
            _PROBED[key] = replace(info, extra={**info.extra, "ray": self.address or "auto"})
        return _PROBED[key]

    def torch_device(self) -> str:
        return self.device.local.torch_device()

    async def run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None
    ) -> list[events.Event]:
        files = await asyncio.to_thread(job_files, job)
        task = _remote(self.ray, run_on_node, True).options(
            **self.device.resources(self.cpus_per_eval)
        )
        stream = task.remote(job, files, self.device_id, deadline_s)
        seen: list[events.Event] = []
        try:
            async for ref in stream:
                item = await ref
                if isinstance(item, dict):
                    self.started.append(item)
                    continue
                event = events.parse(item)
                seen.append(event)
                if on_event is not None:
                    on_event(event)
        except self.ray.exceptions.RayError as exc:  # node or worker lost, or the task raised
            raise HarnessError(f"{self.device_id} on the Ray cluster: {_reason(exc)}") from None
        except events.EventError as exc:
            raise HarnessError(
                f"{self.device_id}: the harness sent an unreadable event ({exc})"
            ) from None
        except asyncio.CancelledError:
            self.ray.cancel(stream, force=True)  # the worker dies, the harness with it
            raise
        if not seen or not isinstance(seen[-1], events.EvaluationFinished):
            raise HarnessError(f"{self.device_id}: the Ray task ended without evaluation_finished")
        return seen

    def close(self) -> None:
        """Nothing of a job outlives it on the node; the connection stays for the next executor."""


def _reason(exc: BaseException) -> str:
    """One line for a Ray error: its kind, and the harness's message for a task that raised."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, HarnessError):
        return str(cause)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:600]
