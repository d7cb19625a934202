"""The combined rows judged as a float32 accumulation, rounded once to bfloat16.

reference.run_all returns, per rank, the exact per-token sum S (float32), A = Σ|term| and m,
the number of copies of the token that come back ([T, 1]). The sum must be accumulated in
float32 (as DeepEP's combine does); each term may be rounded to bfloat16 once more on the way
(u·A, u = 2^-8), float32 accumulation in any order adds at most m·2^-24·A (slack 2^-20), and
rounding the result adds u·|S|. So an element passes iff

    |got − S| ≤ u·(A + |S|)·(1 + 2^-10) + m·2^-20·A

(float64 arithmetic): a token no rank holds (m = 0) must be exactly 0. Summing in bfloat16
(up to (m − 1)·u·A off), a dropped, doubled or misplaced row, or a garbage row beyond the
received count fails. NaN/Inf never pass."""

from core.harness.sum_check import sum_verdict  # the bound, shared by every summing task


def check(outputs, expected, inputs):
    return {
        "combined_x": sum_verdict(
            outputs[0],
            expected[0],
            expected[1],
            expected[2],
            "combined_x",
            term_roundings=1,
            float32=True,
        )
    }
