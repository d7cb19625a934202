"""A real OpenSSH server on loopback, for the remote tests and bench/scaling_ssh.py.

`start_sshd(root)` writes its own host key, client key, authorized_keys and sshd_config under
`root`, starts `sshd -D -e -f CONFIG` on a free port of 127.0.0.1 and returns a handle that
knows how to describe itself as a hosts-file entry. Nothing outside `root` is touched except
`/run/sshd`, which sshd needs to exist (it is created when missing).

`require(ok, reason)` is the rule for tests that need such a server: on a developer machine
they skip with the reason; under `CI=true` a missing prerequisite is a failure, so that CI can
never go green by skipping them.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SSHD_PATHS = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require(ok: bool, reason: str) -> None:
    """Skip with `reason` on a developer machine; fail under CI=true."""
    if ok:
        return
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI=true: this test may not be skipped)", pytrace=False)
    pytest.skip(reason)


def find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((p for p in SSHD_PATHS if os.access(p, os.X_OK)), None)


def missing_prerequisite() -> str | None:
    """Why a loopback sshd cannot be started here, or None when it can."""
    if find_sshd() is None:
        return "OpenSSH's sshd is not installed (apt-get install -y openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is not installed (apt-get install -y openssh-client)"
    if os.geteuid() != 0:
        return "a loopback sshd with its own config needs root here (sshd's privilege separation)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "arena-test", "-f", str(path)],
        check=True,
    )


@dataclass
class LoopbackSshd:
    root: Path
    port: int
    proc: subprocess.Popen
    client_key: Path
    known_hosts: Path
    user: str
    log: Path
    remote_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.remote_dir = self.root / "remote"

    def host_entry(self, name: str = "localhost-test", **overrides: Any) -> dict[str, Any]:
        """A hosts-file entry (a dict, as YAML would give) for this server."""
        import sys

        entry: dict[str, Any] = {
            "name": name,
            "host": "127.0.0.1",
            "port": self.port,
            "user": self.user,
            "key": str(self.client_key),
            "known_hosts": str(self.known_hosts),
            "python": sys.executable,
            "remote_dir": str(self.remote_dir),
        }
        entry.update(overrides)
        return entry

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections (children of the listener)."""
        return [int(p) for p in _children(self.proc.pid)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


def start_sshd(root: Path, max_sessions: int = 10) -> LoopbackSshd:
    """Start sshd on a free loopback port with its own keys and config under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    sshd = find_sshd()
    if sshd is None:
        raise RuntimeError("sshd is not installed")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    host_key, client_key = root / "host_ed25519", root / "client_ed25519"
    for key in (host_key, client_key):
        if not key.exists():
            _keygen(key)
    (root / "authorized_keys").write_text((root / "client_ed25519.pub").read_text())
    port = free_port()
    host_pub = (root / "host_ed25519.pub").read_text().split()
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    config = root / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {root / 'sshd.pid'}",
                f"AuthorizedKeysFile {root / 'authorized_keys'}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                f"MaxSessions {max_sessions}",
                "MaxStartups 100",
                # bash sources ~/.bashrc for commands sent over SSH unless it is a nested shell: the
                # test user's rc (pyenv init here: ~0.2 s of CPU) would dominate every short command.
                "SetEnv SHLVL=1",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    log = root / "sshd.log"
    with open(log, "ab") as log_file:
        proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"sshd did not answer on port {port}: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    return LoopbackSshd(
        root=root,
        port=port,
        proc=proc,
        client_key=client_key,
        known_hosts=known_hosts,
        user=getpass.getuser(),
        log=log,
    )
