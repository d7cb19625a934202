"""What the target's compiler decided for a kernel compiled ahead of time (core/harness/sim/aot.py):
registers, spills and shared memory, read with cuobjdump on NVIDIA and from the metadata on
AMD. Imports only the standard library and triton: the harness is shipped alone."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from typing import Any


def _tool(name: str) -> str | None:
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return path if os.path.isfile(path) else None


def _read_nvidia(kernel: Any) -> dict[str, Any]:
    ptx = kernel.asm.get("ptx", "")
    mma = (
        "tcgen05"
        if "tcgen05.mma" in ptx
        else "wgmma"
        if "wgmma.mma_async" in ptx
        else "mma"
        if "mma.sync" in ptx
        else None
    )
    found: dict[str, Any] = {
        "shared_bytes": int(getattr(kernel.metadata, "shared", 0) or 0),
        "mma": mma,
    }
    cuobjdump = _tool("cuobjdump")
    cubin = kernel.asm.get("cubin")
    if cuobjdump and cubin:
        # A name of its own: two workers compiling the same kernel shared `sim-<hash>.cubin`, and
        # one's unlink made the other's cuobjdump read nothing (predictions varied by 15%).
        fd, path = tempfile.mkstemp(
            prefix=f"sim-{hashlib.sha256(cubin).hexdigest()[:16]}-", suffix=".cubin"
        )
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        try:
            out = subprocess.run(
                [cuobjdump, "-res-usage", path],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        finally:
            os.unlink(path)
        usage = dict(re.findall(r"(REG|STACK|SHARED):(\d+)", out))
        found["registers"] = int(usage["REG"]) if "REG" in usage else None
        found["spill_bytes"] = int(usage["STACK"]) if "STACK" in usage else None
        found["shared_bytes"] += int(usage.get("SHARED", 0))
    return found


def _read_amd(kernel: Any) -> dict[str, Any]:
    asm = kernel.asm.get("amdgcn", "")
    value = lambda key: int(m.group(1)) if (m := re.search(rf"\.{key}:\s*(\d+)", asm)) else None
    spills = value("vgpr_spill_count")
    return {
        "registers": value("vgpr_count"),
        "spill_bytes": None if spills is None else 4 * spills,
        "shared_bytes": int(getattr(kernel.metadata, "shared", 0) or 0),
        "mma": "mfma" if "v_mfma" in asm else None,
    }
