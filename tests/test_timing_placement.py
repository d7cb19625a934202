"""Where a graph round's capture lies in memory (docs/fidelity.md, "Where the offset comes
from"). On the H200, captures of one call in one process differ by up to 3% as their memory
lies, and a process captures at the same place round after round, so each side of an
evaluation kept an offset of its own. `ARENA_TIMING_PLACEMENT=per_round` moves each round's
capture (a pad of a drawn size before it), `new_stream` puts each round on a stream of its own
and `new_code` loads each round's Triton kernels afresh; `fixed`, the default, is what every
H200 figure in docs/ was measured with. What the GPU does with them is measured by
`sh bench/h200_wave.sh $OUT 56` (60, 61); here: the pads, the order of a round's calls, the
request both sides read, and the engine's settings (this one and ARENA_TIMING_EVENTS)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from core.evaluation.job import (
    TIMING_EVENTS_ENV,
    TIMING_PLACEMENT_ENV,
    timing_events,
    timing_placement,
)
from core.harness import timing


def test_each_round_draws_its_pad_reproducibly_in_whole_allocator_segments() -> None:
    rounds = [r * 100_000 for r in range(32)]  # the performance stage's first input indices
    pads = [timing.placement_pad_bytes(first) for first in rounds]
    assert pads == [timing.placement_pad_bytes(first) for first in rounds]
    assert all(p % timing.PLACEMENT_STEP_BYTES == 0 for p in pads)
    assert all(0 <= p < timing.PLACEMENT_STEPS * timing.PLACEMENT_STEP_BYTES for p in pads)
    # consecutive rounds lie apart: a process does not capture at one place all evaluation
    assert len(set(pads)) >= 8
    assert sum(a != b for a, b in itertools.pairwise(pads)) >= 24


@pytest.mark.parametrize(
    "field", ["placement_per_round", "stream_per_round", "code_per_round", "events_inside"]
)
def test_both_sides_read_the_setting_from_the_round_they_are_asked_for(field: str) -> None:
    asked = {
        "budget_ms": 10.0,
        "min_calls": 1,
        "max_calls": 50,
        "first_index": 100_000,
        "graph": True,
    }
    assert getattr(timing.Round.from_request(asked), field) is False
    moved = timing.Round.from_request({**asked, field: True})
    assert getattr(moved, field) is True and moved.graph is True


# The engine's timing settings: (variable, reader, the job's key, default, another value)
SETTINGS = [
    (TIMING_PLACEMENT_ENV, timing_placement, "placement", "fixed", "new_code"),
    (TIMING_EVENTS_ENV, timing_events, "events", "outside", "inside"),
]


@pytest.mark.parametrize(("env", "read", "key", "default", "other"), SETTINGS)
def test_the_engine_keeps_the_measured_default_and_names_the_fix_for_a_bad_value(
    monkeypatch: pytest.MonkeyPatch,
    env: str,
    read: Callable[[], str],
    key: str,
    default: str,
    other: str,
) -> None:
    monkeypatch.delenv(env, raising=False)
    assert read() == default
    monkeypatch.setenv(env, f" {other.title()} ")
    assert read() == other
    monkeypatch.setenv(env, "random")
    with pytest.raises(ValueError, match=rf"{env}='random'.*{default}, .*{other}"):
        read()


@pytest.mark.parametrize(("env", "read", "key", "default", "other"), SETTINGS)
def test_a_built_job_carries_the_setting_to_the_performance_stage(
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    env: str,
    read: Callable[[], str],
    key: str,
    default: str,
    other: str,
) -> None:
    from core.devices.device import probe
    from core.evaluation.evaluator import build_job
    from core.tasks.spec import load_task
    from tests.conftest import FIXTURES

    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    candidate = FIXTURES / "tasks" / "elementwise" / "axpy" / "baseline.py"
    monkeypatch.setenv(env, other)
    assert build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)["timing"][key] == other
    monkeypatch.delenv(env)
    assert build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)["timing"][key] == default


@pytest.mark.parametrize("env", [TIMING_PLACEMENT_ENV, TIMING_EVENTS_ENV])
def test_arena_eval_refuses_a_misspelt_setting_in_one_line_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: str
) -> None:
    from arena_tui.cli import EXIT_BAD_INPUT, main
    from core.evaluation.sandbox import SWITCH

    monkeypatch.setenv(SWITCH, "off")  # as --unsandboxed would, undone after the test
    monkeypatch.setenv(env, "per-round")
    argv = ["eval", "--task", "activation/silu_mul", "--device", "cpu", "--no-store"]
    code = main([*argv, "--candidate", "tasks/activation/silu_mul/baseline.py"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{env}='per-round'" in err and "Traceback" not in err


class _Recorder:
    """Stands in for the CUDA calls a graph round makes, in order (no GPU on CI)."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import contextlib

        import torch

        log = self.log

        class Stream:
            def wait_stream(self, other: object) -> None:
                pass

        class Graph:
            def replay(self) -> None:
                log.append("replay")

        class Events:
            def __init__(self, device_type: str) -> None:
                pass

            def new(self) -> object:
                return object()

            def record(self, event: object) -> None:
                pass

            def elapsed_ms(self, start: object, end: object) -> float:
                return 0.005

        @contextlib.contextmanager
        def capture(graph: object):  # type: ignore[no-untyped-def]
            log.append("capture")
            yield

        def empty(n: int, dtype: object = None, device: object = None) -> torch.Tensor:
            log.append(f"pad {n}")
            return torch.empty(0, dtype=torch.uint8)

        monkeypatch.setattr(timing, "_sync", lambda kind: None)
        monkeypatch.setattr(timing, "_Stream", lambda device: Stream())
        monkeypatch.setattr(timing, "_current_stream", lambda device=None: Stream())
        monkeypatch.setattr(timing, "_stream_ctx", lambda s: contextlib.nullcontext())
        monkeypatch.setattr(timing, "_CUDAGraph", Graph)
        monkeypatch.setattr(timing, "_graph_ctx", capture)
        monkeypatch.setattr(timing, "_Events", Events)
        monkeypatch.setattr(timing, "_zero", lambda t: None)
        monkeypatch.setattr(timing, "_empty", empty)
        monkeypatch.setattr(timing, "flush_buffer", lambda device: torch.empty(4))
        monkeypatch.setattr(timing, "release_cached", lambda kind: log.append(f"release {kind}"))

    def time_graph_round(self, fn: Callable | None = None, **setting: bool) -> dict:
        """One graph round of two timed calls, first input index 300,000, under `setting` (a
        Round field); `fn` adds one by default."""
        import torch

        rnd = timing.Round(1.0, 2, 2, 300_000, graph=True, **setting)
        call = fn or (lambda x: x + 1)
        return timing.time_round(call, lambda i: [torch.zeros(4)], torch.device("cuda"), rnd)


@pytest.mark.parametrize("moved", [False, True])
def test_a_moved_round_releases_the_cache_and_pads_before_its_capture_and_only_then(
    monkeypatch: pytest.MonkeyPatch, moved: bool
) -> None:
    calls = _Recorder()
    calls.install(monkeypatch)
    timed = calls.time_graph_round(placement_per_round=moved)
    assert timed["times_us"] == [5.0, 5.0]
    pad = timing.placement_pad_bytes(300_000)
    before_capture = calls.log[: calls.log.index("capture")]
    assert before_capture == (["release cuda", f"pad {pad}"] if moved else [])
    assert calls.log.count("replay") == 3  # the timing probe's, then each timed call's


@pytest.mark.parametrize("own_stream", [False, True])
def test_a_new_stream_round_is_captured_replayed_and_timed_on_a_stream_of_its_own(
    monkeypatch: pytest.MonkeyPatch, own_stream: bool
) -> None:
    import contextlib

    calls = _Recorder()
    calls.install(monkeypatch)
    streams = iter(range(100))
    monkeypatch.setattr(timing, "_Stream", lambda device: _NamedStream(next(streams)))

    @contextlib.contextmanager
    def on(stream: _NamedStream):  # type: ignore[no-untyped-def]
        calls.log.append(f"enter {stream.name}")
        yield
        calls.log.append(f"leave {stream.name}")

    monkeypatch.setattr(timing, "_stream_ctx", on)
    timed = calls.time_graph_round(stream_per_round=own_stream)
    assert timed["mode"] == "graph"
    log = calls.log
    if own_stream:  # the round's stream around all of it, the warm-up's side stream inside
        assert log[0] == "enter stream0" and log[-1] == "leave stream0"
        assert log[1:3] == ["enter stream1", "leave stream1"]
        assert log.index("capture") < log.index("replay") < log.index("leave stream0")
    else:  # the warm-up's side stream only
        assert log[:2] == ["enter stream0", "leave stream0"] and "enter stream1" not in log
    assert log.count("replay") == 3


class _NamedStream:
    def __init__(self, number: int) -> None:
        self.name = f"stream{number}"

    def wait_stream(self, other: object) -> None:
        pass


@pytest.mark.parametrize("new_code", [False, True])
def test_a_new_code_round_loads_its_triton_kernels_afresh_before_its_warm_up(
    monkeypatch: pytest.MonkeyPatch, new_code: bool
) -> None:
    import torch

    calls = _Recorder()
    calls.install(monkeypatch)
    monkeypatch.setattr(timing, "reload_triton_code", lambda: calls.log.append("reload") or 1)

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.log.append("call")
        return x + 1

    calls.time_graph_round(fn, code_per_round=new_code)
    if new_code:
        assert calls.log.index("reload") < calls.log.index("call") < calls.log.index("capture")
        assert calls.log.count("reload") == 1
    else:
        assert "reload" not in calls.log


def test_loading_afresh_forgets_every_kernel_triton_has_loaded() -> None:
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    def copy(x, y, n: tl.constexpr):  # type: ignore[no-untyped-def]
        tl.store(y + tl.arange(0, n), tl.load(x + tl.arange(0, n)))

    _copy = JITFunction(copy)  # what triton.jit makes, interpreter or not (TRITON_INTERPRET)

    class Trap:  # a candidate's object that answers isinstance with an error
        @property
        def __class__(self):  # type: ignore[no-untyped-def,override]
            raise RuntimeError("asked")

    trap = Trap()
    _copy.device_caches[0] = ({"loaded": "kernel"}, None, None, None, None)  # as a launch leaves it
    assert timing.reload_triton_code() >= 1 and trap is not None
    assert _copy.device_caches == {}  # the next launch loads its module again
