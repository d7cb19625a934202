"""Job keys have one grammar (core.model.keys): the engine writes them, the front ends read them."""

from __future__ import annotations

from core.model import keys


def test_an_attempts_keys_read_back_to_the_attempt():
    attempt = keys.attempt_key("claude", "gemm/bf16", "box1/sim:h200", "default", 2)
    assert keys.parts(attempt) == ["claude", "gemm/bf16", "box1/sim:h200", "default", "2"]
    assert keys.attempt_of_final(keys.final_key(attempt)) == attempt
    check = keys.check_key(attempt, 3)
    assert keys.is_check(check) and keys.attempt_of_check(check) == attempt
    assert not keys.is_check(attempt) and keys.attempt_of_final(attempt) is None


def test_a_rerun_key_extends_its_original():
    original = keys.job_key("norm/rmsnorm", "starter", "cuda:0", 0)
    assert keys.parts(original)[:3] == ["norm/rmsnorm", "starter", "cuda:0"]
    rerun = keys.rerun_key(original, "rerun", "cuda:1", 2)
    assert rerun.startswith(keys.rerun_prefix(original, "rerun")) and rerun.endswith("cuda:1-2")
