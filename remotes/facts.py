"""What the arena learns of a host by asking it once (`HostFacts`: its Python, home folder, torch
build and devices, from `FACTS_SCRIPT`), and the shell words every remote command is built
with (`sh`: POSIX sh whatever the login shell; `shell_word_python`: the hosts file's python)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any


def shell_word_python(python: str) -> str:
    """The hosts file's `python` as a shell word (`~/` becomes "$HOME"/)."""
    if python.startswith("~/"):
        return '"$HOME"/' + shlex.quote(python[2:])
    return shlex.quote(python)


def sh(script: str) -> str:
    """Run `script` under POSIX sh whatever the user's login shell is."""
    return "exec sh -c " + shlex.quote(script)


@dataclass(frozen=True)
class HostFacts:
    """What a host's Python and torch are, asked once per host."""

    python: str
    home: str
    torch: str | None = None
    triton: str | None = None
    hip: str | None = None
    cuda: str | None = None
    devices: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def rocm(self) -> bool:
        return bool(self.hip)

    def resolve(self, path: str) -> str:
        """A remote path with a leading `~/` made absolute."""
        return self.home.rstrip("/") + path[1:] if path.startswith("~/") else path


# Runs on the host under its own Python and prints one marked JSON line. Without arguments
# it never imports torch (that takes seconds): versions come from torch/version.py and the
# packages' metadata. `devices` imports torch to list the devices; `names` adds GPU names
# (creating a context on each GPU).
FACTS_SCRIPT = r"""
import importlib.util, json, os, platform, sys
from importlib import metadata
out = {"python": platform.python_version(), "home": os.path.expanduser("~")}
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    out["error"] = "ModuleNotFoundError: No module named 'torch'"
else:
    version = {}
    try:
        path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
        exec(compile(open(path).read(), path, "exec"), version)
    except Exception as exc:
        out["error"] = "torch/version.py: %s: %s" % (type(exc).__name__, exc)
    out["torch"] = version.get("__version__")
    out["hip"] = version.get("hip")
    out["cuda"] = version.get("cuda")
    try:
        out["triton"] = metadata.version("triton")
    except Exception:
        out["triton"] = None
if "error" not in out and "devices" in sys.argv[1:]:
    try:
        import torch
    except Exception as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    else:
        names = "names" in sys.argv[1:]
        cpu = platform.processor() or platform.machine()
        try:
            cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
        except Exception:
            pass
        devices = [{"id": "cpu", "model": cpu}]
        if torch.cuda.is_available():
            devices += [{"id": "cuda:%d" % i, "model": torch.cuda.get_device_name(i) if names else None} for i in range(torch.cuda.device_count())]
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and xpu.is_available():
            devices += [{"id": "xpu:%d" % i, "model": xpu.get_device_name(i) if names else None} for i in range(xpu.device_count())]
        out["devices"] = devices
print("ARENA-FACTS " + json.dumps(out))
"""
