"""The sim tests' shared runner: candidates counted in a fresh interpreter."""

from __future__ import annotations

# How every counting script starts: sim:h200's section of the device table, its compile cache
# (made before Triton's interpreter is switched on, as a candidate's worker makes it), the
# interpreter, and the time model's target and constants.
SIM_H200_SETUP = """
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.harness.sim import predict as sim_predict
from core.harness.sim.model import Constants, Target
section = sim_section(sim_info("sim:h200"))
compiler = sim_predict.CompileCache(section["aot"], None)  # before the interpreter
from core.harness.triton_cpu import enable_interpreter
enable_interpreter()
target, constants = Target.from_json(section["target"]), Constants.from_json(section["constants"])
"""


def run_per_candidate(script: str, candidates: dict) -> dict:
    """Run `script` (a Python program that reads {name: [path, task, axes]} from argv[1] and
    prints one JSON line last) in a fresh interpreter on `candidates` ({name: (path, task,
    axes)}): the sim tests count candidates there, away from this process's torch state."""
    import json
    import subprocess
    import sys
    import textwrap

    from tests.conftest import ROOT

    arg = {name: [str(path), task, axes] for name, (path, task, axes) in candidates.items()}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), json.dumps(arg)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
