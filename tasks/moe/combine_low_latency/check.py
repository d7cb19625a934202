"""The weighted combine judged as a float32 accumulation, rounded once to bfloat16.

reference.run_all returns, per rank, the exact per-token sum S = Σ w·x (float32), A = Σ|w·x|
and m, the number of (expert, token) terms that come back ([T, 1]). The sum must be
accumulated in float32 (as DeepEP's combine does); each term may be rounded to bfloat16 at
most twice on the way (its product, and a per-rank partial sum sent as bfloat16: 2u·A,
u = 2^-8), float32 accumulation in any order adds at most m·2^-24·A (slack 2^-20), and
rounding the result adds u·|S|. So an element passes iff

    |got − S| ≤ u·(2·A + |S|)·(1 + 2^-10) + m·2^-20·A

(float64 arithmetic): a token no expert holds (m = 0) must be exactly 0. Summing in bfloat16
may exceed it; a dropped, doubled, unweighted or misplaced term, or a garbage slot beyond
recv_count fails. NaN/Inf never pass."""

from core.harness.sum_check import sum_verdict  # the bound, shared by every summing task


def check(outputs, expected, inputs):
    return {
        "combined_x": sum_verdict(
            outputs[0],
            expected[0],
            expected[1],
            expected[2],
            "combined_x",
            term_roundings=2,
            float32=True,
        )
    }
