"""Each candidate's worker sees only its own evaluation (core/harness/isolation.py, issue 37):
its own mount namespace, where the folders of other evaluations are empty and /tmp is fresh;
then no way back. End to end through a warm harness: tests/test_cheats.py
(`test_a_later_candidate_finds_nothing_an_earlier_one_left`, `test_batch_members_cannot_see_each_other`).
Here the module itself, in forked children."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from core.harness import isolation, traffic

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces")


def _in_child(fn, *args) -> dict:
    """Run fn(*args) in a forked child; return what it returns (JSON), or its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            out = {"ok": fn(*args)}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out, default=str).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data or b'{"error": "no answer"}')


def _look(root: str, mine: str, other: str, as_root: bool) -> dict:
    with open("/tmp/left-by-the-test", "w") as f:  # the test's own /tmp, seen before
        f.write("x")
    note = isolation.isolate([root], [mine], as_root=as_root)
    seen = {
        "note": note,
        "root": sorted(os.listdir(root)),
        "mine": Path(mine, "candidate.py").read_text(),
        "other": os.path.exists(other),
        "tmp": sorted(os.listdir("/tmp")),
        "cwd": os.getcwd(),
        "python": sys.prefix,
    }
    if not as_root:
        libc = isolation._libc()
        seen["umount"] = libc.umount2(root.encode(), 2)  # no capability left: refused
        seen["still_hidden"] = sorted(os.listdir(root))
    return seen


@pytest.mark.parametrize("as_root", [False, True], ids=["own user namespace", "as root"])
def test_a_worker_sees_its_own_folder_and_a_fresh_tmp_only(tmp_path, as_root):
    if as_root and os.geteuid() != 0:
        pytest.skip("the root path needs root")
    root = tmp_path / "evaluations"
    (root / "eval-1" / "candidate").mkdir(parents=True)
    (root / "eval-2" / "candidate").mkdir(parents=True)
    (root / "eval-1" / "candidate" / "candidate.py").write_text("earlier")
    (root / "eval-2" / "candidate" / "candidate.py").write_text("mine")
    got = _in_child(
        _look,
        str(root),
        str(root / "eval-2" / "candidate"),
        str(root / "eval-1" / "candidate" / "candidate.py"),
        as_root,
    )
    assert "error" not in got, got
    seen = got["ok"]
    if seen["note"]:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: no namespace for the candidate's worker: {seen['note']}")
        pytest.skip(seen["note"])
    assert seen["root"] == ["eval-2"] and seen["mine"] == "mine" and not seen["other"]
    assert "left-by-the-test" not in seen["tmp"], "a fresh /tmp"
    assert seen["cwd"] == str(root / "eval-2" / "candidate")
    if not as_root:
        assert seen["umount"] != 0 and seen["still_hidden"] == ["eval-2"]


def test_a_folder_python_runs_from_is_never_hidden(tmp_path):
    """A `PYTHONPATH` folder under /tmp is bound back into the fresh /tmp; Python's own prefix is
    never hidden (not covered, or bound back where a covered folder holds it)."""
    site = Path("/tmp") / f"arena-test-site-{os.getpid()}"
    site.mkdir(exist_ok=True)
    try:
        sys.path.append(str(site))
        covers, needed = isolation.plan([str(Path(sys.prefix).parent)], [])
        assert Path("/tmp") in [c for c, _ in covers]
        assert site in needed, "bound back where it was"
        prefix = Path(sys.prefix).resolve()
        assert prefix in needed or not any(isolation._within(prefix, c) for c, _ in covers), (
            "Python's own prefix stays: never covered, or bound back where it was"
        )
    finally:
        sys.path.remove(str(site))
        site.rmdir()


def test_the_meter_fails_timed_calls_that_move_nothing_between_ranks():
    honest, cheat, baseline = traffic.Meter(), traffic.Meter(), traffic.Meter()
    baseline.calls = [70_000, 66_000, 68_000]
    honest.calls = [60_000, 71_000, 65_000]
    cheat.calls = [0, 120, 0]
    assert traffic.problem(honest, baseline, "N=64") is None
    found = traffic.problem(cheat, baseline, "N=64")
    assert found and "collective_outside_timed_calls" in found and "120" not in found.split(":")[0]
    assert traffic.problem(cheat, traffic.Meter(), "N=64") is None, "nothing to compare with"


def test_loopback_bytes_are_read_from_the_kernel():
    found = traffic.loopback_bytes()
    assert found is None or found >= 0
