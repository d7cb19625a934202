"""The check before a run starts: can every agent and every device of the run file work?

- every CLI agent's executable is on PATH and answers `--version`;
- its credentials: the variables the run file names in `options.env` are set, and where the
  key of the CLI's API is in the environment, that API answers a cheap request (listing
  models, no tokens spent) and accepts the key;
- an `openai` agent's options make sense (a model, its key variable set) and its endpoint
  answers `GET <base_url>/models`;
- every device id parses (the same message as `arena eval --device`) and probes.

Every check runs at once with a short timeout, and every problem is reported together, one
line each naming the run-file entry and the fix, so that a person fixes them all in one go
rather than one per failed run. Offline agents (`reference`, `replay`) need nothing.
A device id that does not parse is a problem of the run file itself; `device_problems` gives
those alone, for a run whose preflight is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from core.agents import UnknownAgentKind, adapter
from core.agents.base import AgentConfig, CliAgent
from core.devices.device import DeviceError, parse_device, probe
from core.orchestration.runfile import RunSpec

TIMEOUT_S = 10.0  # `--version`, an endpoint's answer, a device probe: each
OFFLINE_KINDS = ("reference", "replay")

# The API behind each CLI, asked only when its key is in the environment (a CLI may be logged
# in some other way, which no cheap request can check): key variable, base-URL variable,
# default base URL, the models path, and how the key is sent.
CLI_APIS: dict[str, tuple[str, str, str, str, str]] = {
    "claude": (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        "/v1/models",
        "x-api-key",
    ),
    "codex": (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "/models",
        "bearer",
    ),
}

ProbeDevice = Callable[[str], object]  # raises with a message a person can act on


@dataclass(frozen=True)
class Problem:
    """One thing that would make the run fail: where in the run file, what, and the fix."""

    entry: str  # e.g. `agents[0] (claude)`, `devices[1] (cuda:O)`
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.problem}. Fix: {self.fix}"


def device_problems(spec: RunSpec) -> list[Problem]:
    """Device ids that do not parse; remote ids (`<host>/<device>`) are checked on their device part."""
    found = []
    for i, device in enumerate(spec.devices):
        local = device.split("/", 1)[1] if "/" in device else device
        try:
            if device.startswith(
                "ray:"
            ):  # a Ray cluster's device: checked when its slots are counted
                from core.orchestration.ray_executor import RayDevice

                RayDevice.parse(device)
                continue
            parse_device(local)
        except DeviceError as exc:
            found.append(
                Problem(
                    f"devices[{i}] ({device})",
                    str(exc),
                    "correct the id in the run file (`arena devices` lists this machine's)",
                )
            )
    return found


def check(
    spec: RunSpec, probe_device: ProbeDevice | None = None, timeout_s: float = TIMEOUT_S
) -> list[Problem]:
    """Every problem of the run's agents and devices, in run-file order. `probe_device` probes
    one device id (default: core.devices.device.probe, which knows local devices only: a front end
    passes one that reaches hosts)."""
    probe_one = probe_device or probe
    parse_failed = {p.entry: p for p in device_problems(spec)}
    jobs: list[Callable[[], list[Problem]]] = [
        (lambda i=i, a=a: _agent(i, a, timeout_s)) for i, a in enumerate(spec.agents)
    ]
    for i, device in enumerate(spec.devices):
        entry = f"devices[{i}] ({device})"
        if entry in parse_failed:
            jobs.append(lambda p=parse_failed[entry]: [p])
        else:
            jobs.append(lambda entry=entry, device=device: _device(entry, device, probe_one))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(jobs)))) as pool:
        return [p for problems in pool.map(lambda job: job(), jobs) for p in problems]


def _device(entry: str, device: str, probe_one: ProbeDevice) -> list[Problem]:
    try:
        probe_one(device)
    except Exception as exc:  # noqa: BLE001 - any failure to probe is the run's problem, said in one line
        text = " ".join(str(exc).split()) or type(exc).__name__
        return [
            Problem(
                entry,
                f"does not probe: {text}",
                "check that the device exists and is free (`arena devices`), or remove it",
            )
        ]
    return []


def _agent(i: int, config: AgentConfig, timeout_s: float) -> list[Problem]:
    entry = f"agents[{i}] ({config.name})"
    if config.kind in OFFLINE_KINDS:
        return []
    try:
        agent = adapter(config.kind)
    except UnknownAgentKind as exc:
        return [Problem(entry, str(exc), "use another kind, or install what provides it")]
    if isinstance(agent, CliAgent):
        return _cli(entry, config, agent, timeout_s)
    if config.kind == "openai":
        return _openai(entry, config, timeout_s)
    return []


def _cli(entry: str, config: AgentConfig, agent: CliAgent, timeout_s: float) -> list[Problem]:
    try:
        argv0 = agent.launch(config, Path(os.devnull), "preflight").argv[0]
    except (ValueError, IndexError) as exc:
        return [Problem(entry, str(exc), "fix the agent's options (docs/agents.md)")]
    found = shutil.which(argv0)
    if found is None:
        return [
            Problem(
                entry,
                f"the `{argv0}` CLI is not on PATH",
                "install it (docs/agents.md), put it on PATH, or remove the agent from the run file",
            )
        ]
    problems = []
    try:
        done = subprocess.run(
            [found, "--version"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != 0:
            tail = " ".join((done.stderr or done.stdout).split())[-300:]
            problems.append(
                Problem(
                    entry,
                    f"`{argv0} --version` exited with status {done.returncode}"
                    + (f": {tail}" if tail else ""),
                    f"reinstall or update {argv0} (docs/agents.md)",
                )
            )
    except subprocess.TimeoutExpired:
        problems.append(
            Problem(
                entry,
                f"`{argv0} --version` did not answer within {timeout_s:g} s",
                f"check that {argv0} runs by itself",
            )
        )
    except OSError as exc:
        problems.append(
            Problem(
                entry,
                f"`{argv0}` cannot run: {exc.strerror or exc}",
                f"reinstall {argv0}, or fix its permissions",
            )
        )
    named = config.options.get("env", [])
    for name in (
        [named] if isinstance(named, str) else named if isinstance(named, (list, tuple)) else []
    ):
        if isinstance(name, str) and not os.environ.get(name):
            problems.append(
                Problem(
                    entry,
                    f"options.env names {name}, which is not set in the environment",
                    f"export {name}=..., or drop it from options.env if {argv0} is logged in another way",
                )
            )
    api = CLI_APIS.get(config.kind)
    if api is not None and os.environ.get(api[0]):
        key_env, url_env, default_url, models, style = api
        base = (os.environ.get(url_env) or default_url).rstrip("/")
        headers = (
            {"x-api-key": os.environ[key_env], "anthropic-version": "2023-06-01"}
            if style == "x-api-key"
            else {"Authorization": f"Bearer {os.environ[key_env]}"}
        )
        problems += _endpoint(entry, base + models, headers, timeout_s, key_env, url_env)
    return problems


def _openai(entry: str, config: AgentConfig, timeout_s: float) -> list[Problem]:
    from core.agents.openai_compat import Settings

    try:
        settings = Settings.from_config(config)
    except ValueError as exc:
        return [
            Problem(
                entry,
                str(exc).split(": ", 1)[-1],
                "fix the agent's model and options (docs/agents.md)",
            )
        ]
    base = settings.url.rsplit("/chat/completions", 1)[0]
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    return _endpoint(
        entry,
        base + "/models",
        headers,
        timeout_s,
        config.options.get("api_key_env"),
        "options.base_url",
    )


def _endpoint(
    entry: str, url: str, headers: dict[str, str], timeout_s: float, key_env: str | None, where: str
) -> list[Problem]:
    """A cheap GET: any HTTP answer but a refused key means the endpoint is there."""
    host = urllib.parse.urlsplit(url).hostname or ""
    # a proxy from the environment must not swallow a server on this machine (as the agent's own client)
    opener = (
        urllib.request.build_opener(urllib.request.ProxyHandler({}))
        if host in ("localhost", "127.0.0.1", "::1")
        else urllib.request.build_opener()
    )
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", **headers}, method="GET"
    )
    try:
        with opener.open(request, timeout=timeout_s) as response:
            response.read(1 << 16)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            detail = _detail(exc)
            return [
                Problem(
                    entry,
                    f"{url} refused the key (HTTP {exc.code}{': ' + detail if detail else ''})",
                    f"set a valid key in {key_env}"
                    if key_env
                    else "give the endpoint's key: options.api_key_env names its variable",
                )
            ]
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return [
            Problem(
                entry,
                f"the endpoint {url} does not answer ({reason})",
                f"start the server, or correct {where}"
                if where.startswith("options")
                else f"check the network, or {where}",
            )
        ]
    return []


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read(2000) or b"{}")
    except (ValueError, OSError):
        return ""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message).split())[:200] if message else ""
