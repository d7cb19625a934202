"""RayExecutor: core.evaluation.executors.Executor for the GPUs and CPUs of a Ray cluster.

A Ray device id names what an evaluation asks the cluster for, never a node:

    ray:cpu      `cpus_per_eval` CPUs (default 1) of any node
    ray:cuda     one GPU of any type (NVIDIA, or AMD with a ROCm torch: the harness's `cuda`)
    ray:<TYPE>   one GPU of Ray's accelerator type TYPE (`ray:H100`, `ray:A100`, `ray:L4`,
                 `ray:AMD-Instinct-MI300X-OAM`: the `accelerator_type:<TYPE>` resource nodes report)

Each evaluation is one Ray generator task with those resources. On the node it writes the
job's files (the candidate with its native siblings; never the task folder, whose sources the
job carries) into a fresh folder, starts `python -m core.harness run` in a fresh
process under the same sandbox policy as a local harness (core.evaluation.executors.harness_policy), and
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

`ray` is an optional extra (`pip install -e ".[ray]"` from the checkout); this module imports it only
when a Ray device is used. What runs on the node is core.orchestration.ray_node; device ids,
connecting and the cluster's offers are core.orchestration.ray_cluster (all importable here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from core.devices.device import DeviceInfo, info_from_probe
from core.evaluation.executors import HarnessError, OnEvent
from core.model import events
from core.orchestration.ray_cluster import (
    INSTALL_HINT,
    LOCAL,
    PREFIX,
    SHIP_CORE,
    Offer,
    RayDevice,
    RayUnavailable,
    capacities,
    connect,
    default_device,
    import_ray,
    is_ray_device,
    offers,
    vendor_of,
)
from core.orchestration.ray_node import (
    job_files,
    node_job,
    probe_on_node,
    run_on_node,
    sweep_stale_folders,
)

# --- the cluster --------------------------------------------------------------------------------


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


__all__ = [
    "INSTALL_HINT",
    "LOCAL",
    "PREFIX",
    "SHIP_CORE",
    "Offer",
    "RayDevice",
    "RayExecutor",
    "RayUnavailable",
    "capacities",
    "connect",
    "default_device",
    "import_ray",
    "is_ray_device",
    "job_files",
    "node_job",
    "offers",
    "probe_on_node",
    "run_on_node",
    "sweep_stale_folders",
    "vendor_of",
    "with_ray",
]
