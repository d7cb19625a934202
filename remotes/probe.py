"""Probing a host's device: the probe script run with the harness bundle on its stdin (pinned to
the device as jobs are), its output parsed into a DeviceInfo with the host's sandbox, and one
probe per host and device per process (`probe_blocking`: from a worker thread, off the loop)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import shlex

from core.devices.device import DeviceInfo, info_from_probe, parse_device
from core.evaluation import sandbox
from remotes.bundle import harness_bundle
from remotes.connection import HostConnection, RemoteError
from remotes.facts import HostFacts, sh, shell_word_python
from remotes.hosts import Host
from remotes.pool import DEFAULT_POOL, ConnectionPool

PROBE_TIMEOUT_S = 180.0


def host_sandbox_info(host: Host, info: DeviceInfo) -> sandbox.SandboxInfo:
    """The host's sandbox as its probe reported it (`arena hosts check` shows the same)."""
    data = info.extra.get("sandbox")
    if not isinstance(data, dict) or "mode" not in data:
        return sandbox.SandboxInfo(
            sandbox.UNSANDBOXED, "the host did not report its sandbox", host=host.name
        )
    return dataclasses.replace(sandbox.SandboxInfo.from_json(data), host=host.name)


SANDBOX_MARK = "arena-sandbox "  # the line of the probe's output that carries the host's sandbox


def sandbox_switch() -> dict[str, str]:
    """`ARENA_SANDBOX=off` for the host when the user asked to run unsandboxed here."""
    return {sandbox.SWITCH: "off"} if sandbox.unsandboxed_allowed() else {}


def probe_script(host: Host, facts: HostFacts, device: str) -> str:
    """Unpack the harness into a temporary folder and probe one device there, pinned; first
    print the host's sandbox (`python -m core.evaluation.sandbox status`), marked."""
    env = {"PYTHONUNBUFFERED": "1", **parse_device(device).visibility_env(facts.rocm)}
    env_words = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    base = shlex.quote(f"{facts.resolve(host.remote_dir)}/probe")
    return "\n".join(
        [
            f"mkdir -p {base} && D=$(mktemp -d {base}/XXXXXXXX) || exit 90",
            "trap 'cd / ; rm -rf \"$D\"' EXIT",
            'cd "$D" && tar xzmf - || exit 90',
            f'S=$(env PYTHONPATH="$D" {" ".join(f"{k}={v}" for k, v in sandbox_switch().items())} {shell_word_python(host.python)} -m core.evaluation.sandbox status 2>&1 | tail -n 1)',
            f'printf "%s\\n" "{SANDBOX_MARK}$S"',
            f'env PYTHONPATH="$D" {env_words} {shell_word_python(host.python)} -m core.harness probe {shlex.quote(parse_device(device).torch_device())}',
        ]
    )


PROBED: dict[tuple[Host, str], DeviceInfo] = {}


def probe_blocking(host: Host, device: str, pool: ConnectionPool | None = None) -> DeviceInfo:
    """Probe from synchronous code, cached. Inside a running event loop (an executor factory
    called by the scheduler) the probe runs on its own loop in a thread, and blocks this one
    for that long (seconds, once per host entry and device)."""
    key = (host, device)
    if key in PROBED:
        return PROBED[key]
    pool = pool or DEFAULT_POOL

    async def probe() -> DeviceInfo:
        try:
            return await probe_device(pool.get(host), device)
        finally:
            await pool.get(host).aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        info = asyncio.run(probe())
    else:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="arena-probe") as thread:
            info = thread.submit(asyncio.run, probe()).result()
    PROBED[key] = info
    return info


async def probe_device(conn: HostConnection, device: str) -> DeviceInfo:
    """What one device of the host is, asked of the harness there (pinned as jobs are)."""
    facts = await conn.facts()
    host = conn.host
    result = await conn.run(
        sh(probe_script(host, facts, device)), input=harness_bundle(), timeout=PROBE_TIMEOUT_S
    )
    return parse_probe(host, device, result.stdout, result.stderr)


def parse_probe(host: Host, device: str, stdout: str, stderr: str) -> DeviceInfo:
    device_id = f"{host.name}/{device}"
    box = {}
    for line in stdout.splitlines():
        if line.startswith(SANDBOX_MARK):
            try:
                box = json.loads(line[len(SANDBOX_MARK) :])
            except json.JSONDecodeError:
                box = {
                    "mode": sandbox.UNSANDBOXED,
                    "detail": f"unreadable sandbox status: {line[:200]}",
                }
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        raise RemoteError(
            host, "remote_error", f"probing {device} failed: {stderr.strip()[-500:] or 'no output'}"
        ) from None
    if "error" in data:
        raise RemoteError(host, "remote_error", f"{device}: {data['error']}")
    info = info_from_probe(device_id, data)
    extra = {
        **info.extra,
        "host": host.name,
        "sandbox": box
        or {"mode": sandbox.UNSANDBOXED, "detail": "the host did not report its sandbox"},
    }
    if host.insecure_no_host_check:
        extra["insecure_no_host_check"] = True
    return dataclasses.replace(info, extra=extra)
