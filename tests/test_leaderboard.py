"""The leaderboard (`core/store/leaderboard.py`, `arena leaderboard`): agents and their models ranked per
task family and device by the geometric mean of the speedup a user would get. A failed result
counts 1.0 (the baseline stays in use); a proven integrity violation fails, is never fast, and
sinks its entry below every honest one; timing kinds never share a board."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.model.result import Result
from core.store.db import Store
from core.store.errors import UnknownRunError
from core.store.leaderboard import board, boards
from core.store.standings import LeaderboardError
from tests.test_store import make_result

H200 = {"id": "cuda:0", "model": "NVIDIA H200", "vendor": "nvidia", "arch": "sm_90"}
GH200 = {"id": "box1/cuda:0", "model": "NVIDIA GH200", "vendor": "nvidia", "arch": "sm_90"}
MI300 = {"id": "cuda:1", "model": "AMD Instinct MI300X", "vendor": "amd", "arch": "gfx942"}
CPU = {"id": "cpu", "model": "x86_64", "vendor": "cpu", "arch": "x86_64"}


def result(
    task: str,
    speedup: float | None,
    *,
    device: dict = H200,
    timing: str = "measured",
    sol: float = 0.5,
    integrity: tuple[str, ...] = (),
    infra: bool = False,
) -> Result:
    """A passed result with this speedup; `None` is a failed one; `infra` an infrastructure error."""
    status = "infrastructure_error" if infra else "failed" if speedup is None else "passed"
    r = make_result(task, status, speedup=speedup or 1.0, device=device["id"], integrity=integrity)
    return replace(
        r, device=dict(device), timing_kind=timing, sol_fraction=sol if r.passed else None
    )


def record(
    store: Store,
    run_id: str,
    agent: str | None,
    *results: Result,
    model: str | None = None,
    candidate: str = "/c/solution.py",
) -> None:
    """Each result as a job of `agent` in the run; with a `model`, each comes from an agent attempt as `arena run` records it."""
    for r in results:
        n = len(store.jobs(run_id)) + 1
        job = store.add_job(
            run_id,
            task_id=r.task_id,
            device_id=r.device["id"],
            agent=agent,
            candidate=candidate,
            key=f"job-{n}",
        )
        store.record_result(job, r)
        if model is not None:
            attempt = store.add_attempt(
                run_id,
                n,
                key=f"attempt-{n}",
                agent=agent or "",
                agent_kind="cli",
                model=model,
                task_id=r.task_id,
                device_id=r.device["id"],
                variant="plain",
            )
            store.set_attempt_state(attempt, "done", job_id=job)


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "arena.db") as s:
        yield s


def rows(b) -> list[tuple]:
    return [(e.rank, e.agent, e.family, e.device) for e in b.entries]


# -- ranking ---------------------------------------------------------------------------------


def test_entries_are_ranked_by_geometric_mean_speedup_within_each_family_and_device(store):
    run = store.create_run("sweep")
    record(
        store,
        run,
        "claude",
        result("gemm/a", 2.0),
        result("gemm/b", 2.0),
        result("norm/r", 1.1),
        model="opus",
    )
    record(
        store,
        run,
        "codex",
        result("gemm/a", 1.5),
        result("gemm/b", 1.5),
        result("norm/r", 1.3),
        model="gpt-5",
    )
    record(
        store, run, "cursor", result("gemm/a", 4.0), result("gemm/b", 1.0), model="auto"
    )  # geomean 2.0, as claude's

    b = board(store, timing_kind="measured")
    assert rows(b) == [
        (1, "claude", "gemm", "NVIDIA H200"),
        (1, "cursor", "gemm", "NVIDIA H200"),
        (3, "codex", "gemm", "NVIDIA H200"),
        (1, "codex", "norm", "NVIDIA H200"),
        (2, "claude", "norm", "NVIDIA H200"),
    ]  # equal numbers share a rank; each family is its own ranking
    claude = b.entries[0]
    assert (claude.model, claude.speedup, claude.correct, claude.results, claude.tasks) == (
        "opus",
        pytest.approx(2.0),
        1.0,
        2,
        2,
    )
    assert (
        claude.fast_p == 1.0
        and claude.sol_fraction == 0.5
        and claude.vendor == "nvidia"
        and claude.violations == 0
    )
    assert [(f, d, [e.agent for e in es]) for f, d, es in b.groups()] == [
        ("gemm", "NVIDIA H200", ["claude", "cursor", "codex"]),
        ("norm", "NVIDIA H200", ["codex", "claude"]),
    ]


def test_equal_speedups_are_ordered_by_correctness(store):
    run = store.create_run("ties")
    record(
        store, run, "careful", result("gemm/a", 1.0), result("gemm/b", 1.0)
    )  # both correct, no faster: 1.0
    record(
        store, run, "sloppy", result("gemm/a", None), result("gemm/b", None)
    )  # both failed: also 1.0
    b = board(store, timing_kind="measured")
    assert [(e.rank, e.agent, e.speedup, e.correct) for e in b.entries] == [
        (1, "careful", pytest.approx(1.0), 1.0),
        (None, "sloppy", pytest.approx(1.0), 0.0),
    ]  # no correct result: listed after, never ranked


def test_speedups_whose_intervals_overlap_share_a_rank(store):
    """A difference inside the timer's noise is a tie: entries whose speedups' intervals (the
    geometric means of their results' `speedup_interval`) overlap share a rank; a clear gap
    does not."""
    run = store.create_run("noise")

    def timed(task: str, speedup: float, low: float, high: float) -> Result:
        return replace(result(task, speedup), speedup_interval=[low, high])

    record(store, run, "a", timed("gemm/a", 1.52, 1.48, 1.56))
    record(store, run, "b", timed("gemm/a", 1.50, 1.46, 1.54))  # inside a's noise
    record(store, run, "c", timed("gemm/a", 1.20, 1.18, 1.22))  # clearly slower
    b = board(store, timing_kind="measured")
    assert [(e.rank, e.agent) for e in b.entries] == [(1, "a"), (1, "b"), (3, "c")]
    assert b.entries[0].speedup_low == pytest.approx(1.48)


def test_a_failed_result_never_ranks_above_a_correct_one_and_joins_the_group_it_failed_in(store):
    """The issue's run: a tuned kernel slower than the baseline, a wrong shape and a syntax
    error. The failures count 1.00× (the baseline stays) but rank below the correct kernel;
    no baseline ran for them, so they sit in the tuned kernel's group, not one of their own."""
    run = store.create_run("four files")
    tuned = replace(result("gemm/a", 0.48, sol=0.34), baseline_impl="torch")
    record(store, run, None, tuned, candidate="/c/tuned.py")
    record(store, run, None, result("gemm/a", None), candidate="/c/wrongshape.py")
    record(store, run, None, result("gemm/a", None), candidate="/c/syntax.py")
    b = board(store, timing_kind="measured")
    assert [(e.rank, e.agent, e.device, e.failed) for e in b.entries] == [
        (1, "tuned.py", "NVIDIA H200 · vs torch", 0),
        (None, "syntax.py", "NVIDIA H200 · vs torch", 1),
        (None, "wrongshape.py", "NVIDIA H200 · vs torch", 1),
    ]
    assert len(b.groups()) == 1


def test_the_command_lists_failed_entries_last_with_their_failure_counts(store, capsys):
    run = store.create_run("four files")
    record(
        store,
        run,
        None,
        replace(result("gemm/a", 0.48), baseline_impl="torch"),
        candidate="/c/tuned.py",
    )
    record(store, run, None, result("gemm/a", None), candidate="/c/syntax.py")
    from rich.console import Console

    from arena_tui.leaderboard_cmd import render

    for width in (160, 80):
        out = Console(width=width, record=True)
        render(out, board(store, timing_kind="measured"))
        lines = [line.split() for line in out.export_text().splitlines()]
        tuned = next(line for line in lines if line[1:2] == ["tuned.py"])
        syntax = next(line for line in lines if line[1:2] and line[1].startswith("syntax."))
        assert lines.index(tuned) < lines.index(syntax)
        assert tuned[0] == "1" and "0.48×" in tuned
        assert syntax[0] == "–" and syntax[-1] == "1" and "1.00×" not in syntax, syntax


def test_a_failed_result_counts_speedup_one_and_is_never_fast(store):
    run = store.create_run("one pass, one failure")
    record(store, run, "claude", result("gemm/a", 4.0, sol=0.8), result("gemm/b", None))
    (e,) = board(store, timing_kind="measured").entries
    assert e.speedup == pytest.approx(
        2.0
    )  # sqrt(4 × 1): the failure keeps the baseline, it is not infinitely slow
    assert (e.correct, e.fast_p, e.sol_fraction, e.results) == (
        0.5,
        0.5,
        0.8,
        2,
    )  # SOL: over correct results only


def test_fast_p_counts_results_faster_than_p_times_the_baseline(store):
    run = store.create_run("p")
    record(
        store,
        run,
        "claude",
        result("gemm/a", 0.9),
        result("gemm/b", 1.2),
        result("gemm/c", 2.5),
        result("gemm/d", None),
    )
    assert board(store, timing_kind="measured").entries[0].fast_p == 0.5  # 1.2 and 2.5 of four
    assert board(store, timing_kind="measured", p=2.0).entries[0].fast_p == 0.25
    with pytest.raises(LeaderboardError, match="positive"):
        board(store, timing_kind="measured", p=0)


def test_an_integrity_violation_never_ranks_above_an_honest_result(store):
    run = store.create_run("cheats")
    record(
        store, run, "honest", result("gemm/a", 0.8), result("gemm/b", 0.9)
    )  # correct but slower than the baseline
    # A cheat that was caught once, and was fast (honestly, we assume) elsewhere; and one stored as
    # passed with a proven violation, whose 50× must count for nothing.
    record(
        store,
        run,
        "cheater",
        result("gemm/a", None, integrity=("output cached across calls",)),
        result("gemm/b", 10.0),
    )
    record(
        store, run, "bold", replace(result("gemm/a", 50.0), integrity_flags=["timer monkeypatched"])
    )

    b = board(store, timing_kind="measured")
    assert [(e.rank, e.agent, e.violations) for e in b.entries] == [
        (1, "honest", 0),
        (2, "cheater", 1),
        (None, "bold", 1),
    ]  # bold has no correct result: not ranked at all
    cheater, bold = b.entries[1], b.entries[2]
    assert cheater.speedup > b.entries[0].speedup  # its numbers alone would rank it first
    assert (cheater.fast_p, cheater.correct) == (
        0.5,
        0.5,
    )  # the violation counts as speedup 0: not fast, not correct
    assert (bold.fast_p, bold.correct, bold.speedup, bold.sol_fraction) == (
        0.0,
        0.0,
        pytest.approx(1.0),
        None,
    )


def test_infrastructure_errors_are_left_out_and_counted(store):
    run = store.create_run("flaky box")
    record(store, run, "claude", result("gemm/a", 2.0), result("gemm/b", None, infra=True))
    b = board(store, timing_kind="measured")
    (e,) = b.entries
    assert (e.results, e.speedup, e.correct) == (
        1,
        pytest.approx(2.0),
        1.0,
    ) and b.infrastructure_errors == 1


# -- who is an entry -------------------------------------------------------------------------


def test_an_entry_is_an_agent_and_its_model_and_plain_evaluations_go_by_file_name(store):
    run = store.create_run("agents")
    record(store, run, "claude", result("gemm/a", 2.0), model="opus")
    record(store, run, "claude", result("gemm/b", 1.5), model="sonnet")
    record(
        store, run, "claude", result("gemm/c", 1.2)
    )  # a job with an agent but no attempt: model unknown
    evals = store.create_run("eval")
    record(store, evals, None, result("gemm/a", 1.1), candidate="/home/me/my_gemm.py")
    record(store, evals, None, result("gemm/b", 1.3), candidate="/home/me/other/my_gemm.py")

    b = board(store, timing_kind="measured")
    assert {(e.agent, e.model, e.results) for e in b.entries} == {
        ("claude", "opus", 1),
        ("claude", "sonnet", 1),
        ("claude", None, 1),
        ("my_gemm.py", None, 2),
    }


# -- timing kinds ----------------------------------------------------------------------------


def test_timing_kinds_never_share_a_board(store):
    run = store.create_run("everywhere")
    record(
        store,
        run,
        "claude",
        result("gemm/a", 2.0),
        result("gemm/a", 9.0, timing="predicted", device={**H200, "id": "sim:h200"}),
        result("gemm/a", 0.01, timing="cpu", device=CPU, sol=None),
    )

    found = boards(store)
    assert list(found) == ["measured", "predicted", "cpu"]
    assert [(e.speedup, e.results) for e in found["measured"].entries] == [(pytest.approx(2.0), 1)]
    assert [(e.speedup, e.results) for e in found["predicted"].entries] == [(pytest.approx(9.0), 1)]
    assert "predicted" in found["predicted"].label
    cpu = found["cpu"]
    assert not cpu.ranked and "never ranked" in cpu.label
    assert [(e.rank, e.fast_p, e.speedup) for e in cpu.entries] == [
        (None, None, pytest.approx(0.01))
    ]  # shown, never ranked, no fast_p
    with pytest.raises(TypeError):
        board(store)  # type: ignore[call-arg]  # there is no board of every kind
    with pytest.raises(LeaderboardError, match="never mix"):
        board(store, timing_kind="any")


def test_a_cpu_board_lists_entries_by_name_not_by_speed(store):
    run = store.create_run("cpu")
    record(store, run, "zed", result("gemm/a", 3.0, timing="cpu", device=CPU))
    record(store, run, "amy", result("gemm/a", 0.5, timing="cpu", device=CPU))
    assert [e.agent for e in board(store, timing_kind="cpu").entries] == ["amy", "zed"]


# -- filters ---------------------------------------------------------------------------------


def test_filters_by_family_device_vendor_and_run(store):
    first = store.create_run("first")
    record(
        store,
        first,
        "claude",
        result("gemm/a", 2.0),
        result("norm/r", 1.5),
        result("gemm/a", 1.2, device=MI300),
    )
    second = store.create_run("second")
    record(store, second, "codex", result("gemm/a", 3.0, device=GH200))

    def agents_and_places(**filters) -> set[tuple[str, str, str]]:
        return {
            (e.agent, e.family, e.device)
            for e in board(store, timing_kind="measured", **filters).entries
        }

    assert agents_and_places(family="norm") == {("claude", "norm", "NVIDIA H200")}
    assert agents_and_places(device="h200") == {
        ("claude", "gemm", "NVIDIA H200"),
        ("claude", "norm", "NVIDIA H200"),
    }  # not GH200
    assert (
        agents_and_places(device="NVIDIA GH200")
        == agents_and_places(device="box1/cuda:0")
        == {("codex", "gemm", "NVIDIA GH200")}
    )
    assert agents_and_places(vendor="AMD") == {("claude", "gemm", "AMD Instinct MI300X")}
    assert agents_and_places(run=second[-4:]) == {
        ("codex", "gemm", "NVIDIA GH200")
    }  # a run as `arena runs show` takes it
    assert agents_and_places(family="moe") == set()
    with pytest.raises(UnknownRunError):
        board(store, timing_kind="measured", run="r-nope")


def test_devices_can_be_grouped_by_vendor(store):
    run = store.create_run("vendors")
    record(
        store,
        run,
        "claude",
        result("gemm/a", 2.0),
        result("gemm/b", 8.0, device=GH200),
        result("gemm/a", 1.5, device=MI300),
    )
    b = board(store, timing_kind="measured", by="vendor")
    assert [(e.device, e.results, e.speedup) for e in b.entries] == [
        ("amd", 1, pytest.approx(1.5)),
        ("nvidia", 2, pytest.approx(4.0)),
    ]


def failed_attempt(
    store: Store, run_id: str, agent: str, task: str, outcome: str, device: str = "cuda:0"
) -> None:
    """An attempt that ended with nothing to score, as `arena run` records it: no job, no result."""
    n = len(store.attempts(run_id)) + 100
    attempt = store.add_attempt(
        run_id,
        n,
        key=f"attempt-{n}",
        agent=agent,
        agent_kind="claude",
        model="opus",
        task_id=task,
        device_id=device,
        variant="plain",
    )
    store.end_agent(
        attempt,
        stop_reason="crashed",
        exit_status=127,
        submission="/x/solution.py",
        checks=0,
        seconds=0.1,
        usage={},
        outcome=outcome,
        outcome_reason="the `claude` CLI is not on PATH",
    )
    store.set_attempt_state(attempt, "done")


def test_attempts_with_nothing_to_score_are_failures_of_their_entry_never_results(store):
    run = store.create_run("sweep")
    record(store, run, "claude", result("gemm/a", 2.0), model="opus")
    failed_attempt(store, run, "claude", "gemm/b", "agent_error")
    failed_attempt(store, run, "claude", "gemm/c", "no_submission")
    failed_attempt(store, run, "ghost", "gemm/a", "agent_error")
    b = board(store, timing_kind="measured")
    claude, ghost = b.entries
    assert (claude.agent, claude.results, claude.correct, claude.speedup) == (
        "claude",
        1,
        1.0,
        2.0,
    ), "failures change no figure"
    assert (claude.failures, claude.agent_errors, claude.no_submissions) == (2, 1, 1)
    assert claude.device == "NVIDIA H200", "a failure sits with the results of the same device"
    assert (ghost.agent, ghost.results, ghost.correct, ghost.failures, ghost.rank) == (
        "ghost",
        0,
        0.0,
        1,
        None,
    ), "never correct: listed last, not ranked"
    assert b.failures == 3


def test_a_submitted_starter_is_counted_so_that_views_can_say_so(store):
    run = store.create_run("sweep")
    record(store, run, "ref", result("gemm/a", 1.0), model="m")
    attempt = store.attempts(run)[0]
    store.end_agent(
        attempt.id,
        stop_reason="finished",
        exit_status=0,
        submission="/x/solution.py",
        checks=1,
        seconds=0.1,
        usage={},
        outcome="starter",
        outcome_reason="the agent submitted the unchanged starter",
    )
    store.set_attempt_state(attempt.id, "done", job_id=attempt.job_id)
    [entry] = board(store, timing_kind="measured").entries
    assert entry.starters == 1 and entry.results == 1


# -- the command -----------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("COLUMNS", "200")  # one row a line, whatever the terminal
    path = tmp_path / "arena.db"
    with Store.open(path) as s:
        run = s.create_run("sweep")
        record(s, run, "claude", result("gemm/a", 2.0), result("gemm/b", None), model="opus")
        record(s, run, "codex", result("gemm/a", 1.2), model="gpt-5")
        record(s, run, "cheater", result("gemm/a", None, integrity=("outputs cached",)))
        record(
            s,
            run,
            "claude",
            result("gemm/a", 0.02, timing="cpu", device=CPU, sol=None),
            model="opus",
        )
    return path


def test_the_command_prints_one_table_per_timing_kind(db, capsys):
    assert main(["--db", str(db), "leaderboard"]) == 0
    text = capsys.readouterr().out
    measured, cpu = text.split("cpu: for information, never ranked")
    lines = [line.split() for line in measured.splitlines()]
    assert [
        "rank",
        "agent",
        "model",
        "family",
        "device",
        "speedup",
        "fast_1",
        "SOL",
        "gap",
        "correct",
        "results",
        "violations",
        "failures",
    ] in lines
    assert [
        "1",
        "claude",
        "opus",
        "gemm",
        "NVIDIA",
        "H200",
        "1.41×",
        "50%",
        "50.0%",
        "33%",  # gap closed: (2 − 1) / (2 − 0.5) for gemm/a, 0 for the failed gemm/b
        "50%",
        "2",
        "0",
        "1",
    ] in lines
    assert [
        "2",
        "codex",
        "gpt-5",
        "gemm",
        "NVIDIA",
        "H200",
        "1.20×",
        "100%",
        "50.0%",
        "29%",
        "100%",
        "1",
        "0",
        "0",
    ] in lines
    assert [
        "–",
        "cheater",
        "–",
        "gemm",
        "NVIDIA",
        "H200",
        "–",
        "0%",
        "–",
        "–",
        "0%",
        "1",
        "1",
        "1",
    ] in lines  # no correct result: not ranked, no speedup of its own, its failure counted
    assert "a failed result counts 1.0" in measured
    # A cpu board: interpreted times are no performance figure, so no speedup or SOL is printed (--json keeps them).
    assert [
        "–",
        "claude",
        "opus",
        "gemm",
        "x86_64",
        "interp.",
        "–",
        "interp.",
        "–",  # gap: no speed of light on the cpu
        "100%",
        "1",
        "0",
        "0",
    ] in [line.split() for line in cpu.splitlines()]
    assert "interpreted: not a performance figure" in cpu


def test_the_command_filters_and_picks_one_timing_kind(db, capsys):
    assert main(["--db", str(db), "leaderboard", "--timing", "cpu", "--p", "1.5"]) == 0
    text = capsys.readouterr().out
    assert "never ranked" in text and "codex" not in text
    assert main(["--db", str(db), "leaderboard", "--family", "moe"]) == 0
    assert "no results match --family moe" in capsys.readouterr().out


def test_the_command_prints_one_json_object(db, capsys):
    assert main(["--db", str(db), "leaderboard", "--json", "--p", "1.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["boards"]) == ["measured", "cpu"] and data["p"] == 1.5
    measured = data["boards"]["measured"]
    assert measured["ranked"] is True and measured["timing_kind"] == "measured"
    assert [(e["rank"], e["agent"], e["model"], e["fast_p"]) for e in measured["entries"]] == [
        (1, "claude", "opus", 0.5),
        (2, "codex", "gpt-5", 0.0),
        (None, "cheater", None, 0.0),
    ]
    assert (
        data["boards"]["cpu"]["ranked"] is False
        and data["boards"]["cpu"]["entries"][0]["rank"] is None
    )


def test_an_unknown_run_is_one_line_and_exit_2(db, capsys):
    assert main(["--db", str(db), "leaderboard", "--run", "r-nope"]) == 2
    err = capsys.readouterr().err
    assert (
        "unknown run `r-nope`" in err
        and len(err.strip().splitlines()) == 1
        and "Traceback" not in err
    )


def test_a_bad_p_is_one_line_and_exit_2(db, capsys):
    assert main(["--db", str(db), "leaderboard", "--p", "-1"]) == 2
    assert "p must be a positive number" in capsys.readouterr().err


def test_an_empty_store_says_so_and_exits_0(tmp_path: Path, capsys):
    assert main(["--db", str(tmp_path / "empty.db"), "leaderboard"]) == 0
    assert "no results yet" in capsys.readouterr().out
    assert main(["--db", str(tmp_path / "empty.db"), "leaderboard", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["boards"] == {}
