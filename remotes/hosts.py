"""The hosts file: which remote boxes the arena may run evaluations on, and how to reach them.

YAML, `hosts: [{name, host, port, user, key, known_hosts, python, max_jobs,
insecure_no_host_check, ...}]` (docs/hosts.md). It lives at `--hosts FILE`, else
`${XDG_CONFIG_HOME:-~/.config}/kernel-arena/hosts.yaml`. A bad file is rejected with one
`HostsError` that names the file, the field and the fix. No SSH here: loading a hosts file
needs only PyYAML.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.devices.device import DeviceError

DEFAULT_PORT = 22
DEFAULT_PYTHON = "python3"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_REMOTE_DIR = "~/.cache/kernel-arena"
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_KEEPALIVE_INTERVAL_S = 15.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3
# OpenSSH's MaxSessions defaults to 10 channels per connection; stay below it.
DEFAULT_MAX_CHANNELS = 8

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A command name or a path, `~/` allowed: it is placed in a remote shell command unquoted
# only for the `~/`, so nothing that a shell would interpret is accepted.
_PYTHON = re.compile(r"^(~/)?[A-Za-z0-9_./+-]+$")
_REMOTE_DIR = re.compile(r"^(~/|/)[A-Za-z0-9_./+-]*$")
FIELDS = (
    "name",
    "host",
    "port",
    "user",
    "key",
    "known_hosts",
    "python",
    "max_jobs",
    "insecure_no_host_check",
    "remote_dir",
    "connect_timeout",
    "keepalive_interval",
    "keepalive_count_max",
    "max_channels",
)


class HostsError(DeviceError):
    """A hosts file that cannot be used; the message names the file, the field and the fix.

    A DeviceError, so that every command that takes a device reports it as bad input (exit 2)."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field_name, problem, fix
        super().__init__(f"{path}: `{field_name}`: {problem}. Fix: {fix}")


class NoHostsFile(FileNotFoundError):
    """The default hosts file does not exist (no remote hosts are configured)."""


@dataclass(frozen=True)
class Host:
    """One entry of the hosts file, with defaults filled in and paths expanded."""

    name: str
    host: str
    port: int = DEFAULT_PORT
    user: str | None = None  # None: the local user name (asyncssh's default, or ~/.ssh/config's)
    key: Path | None = None  # None: ssh-agent and the default ~/.ssh/id_* keys
    known_hosts: Path = field(default_factory=lambda: Path(DEFAULT_KNOWN_HOSTS).expanduser())
    python: str = DEFAULT_PYTHON
    max_jobs: int | None = None  # None: one per GPU the host has (at least one)
    insecure_no_host_check: bool = False
    remote_dir: str = DEFAULT_REMOTE_DIR
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL_S
    keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX
    max_channels: int = DEFAULT_MAX_CHANNELS

    @property
    def address(self) -> str:
        """`user@host:port`, for messages."""
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"

    def jobs_for(self, gpus: int) -> int:
        """How many evaluations may run on this host at once: `max_jobs`, else one per GPU."""
        return self.max_jobs if self.max_jobs is not None else max(1, gpus)


def default_hosts_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kernel-arena" / "hosts.yaml"


def load_hosts(path: Path | str | None = None) -> list[Host]:
    """The hosts of `path`, else of the default location. A missing default file raises
    NoHostsFile (no hosts configured); a missing file that was named is a HostsError."""
    if path is None:
        path = default_hosts_path()
        if not path.is_file():
            raise NoHostsFile(
                f"no hosts file at {path}: create one (docs/hosts.md) or pass --hosts FILE"
            )
    path = Path(path).expanduser()
    if not path.is_file():
        raise HostsError(
            path,
            "(file)",
            "does not exist",
            "pass the path of a hosts file (docs/hosts.example.yaml shows one)",
        )
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(file)"
        raise HostsError(
            path,
            where,
            f"is not valid YAML ({getattr(exc, 'problem', None) or exc})",
            "fix the YAML syntax",
        ) from None
    return parse_hosts(raw, path)


def parse_hosts(raw: Any, path: Path | str = "<hosts>") -> list[Host]:
    """Validate the parsed YAML of a hosts file."""
    if not isinstance(raw, dict) or "hosts" not in raw:
        raise HostsError(
            path,
            "hosts",
            "is missing",
            "start the file with `hosts:` and a list of `- name: ..., host: ...` entries",
        )
    unknown = sorted(set(raw) - {"hosts"})
    if unknown:
        raise HostsError(
            path,
            unknown[0],
            "is not a known top-level key",
            "put every setting inside an entry of `hosts:`",
        )
    entries = raw["hosts"]
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise HostsError(
            path,
            "hosts",
            "must be a list",
            "write each host as `- name: box1` followed by its fields",
        )
    hosts: list[Host] = []
    for i, entry in enumerate(entries):
        host = _parse_entry(entry, path, i)
        if any(h.name == host.name for h in hosts):
            raise HostsError(
                path,
                f"hosts[{i}].name",
                f"`{host.name}` is used twice",
                "give every host its own name",
            )
        hosts.append(host)
    return hosts


def _parse_entry(entry: Any, path: Path | str, i: int) -> Host:
    where = f"hosts[{i}]"

    def fail(key: str, problem: str, fix: str) -> None:
        raise HostsError(path, f"{where}.{key}" if key else where, problem, fix)

    if not isinstance(entry, dict):
        fail("", "must be a mapping", "write the host as `- {name: box1, host: box1.example.com}`")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        fail(unknown[0], "is not a known field", f"use only {', '.join(FIELDS)} (docs/hosts.md)")

    def text(key: str, required: bool = False) -> str | None:
        if key not in entry or entry[key] is None:
            if required:
                fail(key, "is missing", f"add `{key}:` to the entry")
            return None
        value = entry[key]
        if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
            fail(key, f"must be a non-empty string, got {value!r}", f"write `{key}: ...` as text")
        return str(value).strip()

    def number(key: str, default: float, kind: type, low: float, high: float | None = None) -> Any:
        value = entry.get(key, default)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            fail(
                key,
                f"must be {'a whole number' if kind is int else 'a number'}, got {value!r}",
                f"write `{key}: {default}` or another value",
            )
        if value < low or (high is not None and value > high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            fail(key, f"is {value}; it must be {span}", f"set `{key}` {span}")
        return kind(value)

    name = text("name", required=True)
    assert name is not None
    if not _NAME.match(name):
        fail(
            "name",
            f"`{name}` has characters a device id cannot carry",
            "use letters, digits, `.`, `_` and `-` (no `/`): devices are named `<name>/cuda:0`",
        )
    address = text("host", required=True)
    assert address is not None
    if any(c.isspace() for c in address) or "/" in address:
        fail(
            "host",
            f"`{address}` is not a host name or address",
            "write a DNS name, an IP address or an ~/.ssh/config alias, without user@ or :port",
        )
    if "@" in address:
        fail(
            "host",
            f"`{address}` includes a user",
            "put the user in `user:` and only the host in `host:`",
        )
    port = number("port", DEFAULT_PORT, int, 1, 65535)
    user = text("user")
    key = text("key")
    key_path = Path(key).expanduser() if key else None
    if key_path is not None and not key_path.is_file():
        fail(
            "key",
            f"{key_path} does not exist",
            "give the path of the private key (e.g. ~/.ssh/id_ed25519), or leave `key` out to use ssh-agent and ~/.ssh/id_*",
        )
    insecure = entry.get("insecure_no_host_check", False)
    if not isinstance(insecure, bool):
        fail(
            "insecure_no_host_check",
            f"must be true or false, got {insecure!r}",
            "write `insecure_no_host_check: false` (the default) to verify host keys",
        )
    known = text("known_hosts")
    known_path = Path(known or DEFAULT_KNOWN_HOSTS).expanduser()
    if known is not None and not insecure and not known_path.is_file():
        fail(
            "known_hosts",
            f"{known_path} does not exist",
            f"record the host's key with `ssh-keyscan -p {port} {address} >> {known_path}` (check its fingerprint), or leave `known_hosts` out to use ~/.ssh/known_hosts",
        )
    python = text("python") or DEFAULT_PYTHON
    if not _PYTHON.match(python):
        fail(
            "python",
            f"`{python}` is not a command name or a path",
            "give the remote Python as `python3`, an absolute path or `~/venv/bin/python`",
        )
    max_jobs = entry.get("max_jobs")
    if max_jobs is not None:
        max_jobs = number("max_jobs", 1, int, 1)
    remote_dir = (text("remote_dir") or DEFAULT_REMOTE_DIR).rstrip("/")
    if (
        not _REMOTE_DIR.match(remote_dir + "/")
        or "/../" in remote_dir + "/"
        or remote_dir in ("", "~")
    ):
        fail(
            "remote_dir",
            f"`{remote_dir}` is not a usable folder",
            "give an absolute path or one under `~/`, such as ~/.cache/kernel-arena",
        )
    return Host(
        name=name,
        host=address,
        port=port,
        user=user,
        key=key_path,
        known_hosts=known_path,
        python=python,
        max_jobs=max_jobs,
        insecure_no_host_check=insecure,
        remote_dir=remote_dir,
        connect_timeout=number("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S, float, 0.1),
        keepalive_interval=number("keepalive_interval", DEFAULT_KEEPALIVE_INTERVAL_S, float, 0),
        keepalive_count_max=number("keepalive_count_max", DEFAULT_KEEPALIVE_COUNT_MAX, int, 1),
        max_channels=number("max_channels", DEFAULT_MAX_CHANNELS, int, 1, 64),
    )


def find_host(hosts: list[Host], name: str) -> Host:
    for host in hosts:
        if host.name == name:
            return host
    known = ", ".join(h.name for h in hosts) or "none"
    raise DeviceError(
        f"unknown host `{name}`: the hosts file names {known}; add it there (docs/hosts.md)"
    )
