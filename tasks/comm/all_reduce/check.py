"""A bfloat16 sum judged against the rounding error any summation order may make.

reference.run_all returns, per rank, the exact sum S (float32, accumulated from the bfloat16
inputs), A = Σ|term| and m, the number of terms. With u = 2^-8 (bfloat16's unit roundoff), m − 1
additions in any order (a ring, a tree, in-switch NVLS, one-shot), each rounded to bfloat16,
are off by at most (m − 1)·u·A (to first order), and rounding the result adds u·|S|; one more
u·A of slack admits one extra rounding of a term. So an element passes iff

    |got − S| ≤ u·(m·A + |S|)·(1 + 2^-10)

(float64 arithmetic). An fp32-accumulating kernel lands within half an ulp of S; NCCL's bf16
ring lands well inside the bound; a dropped, doubled or fp8-compressed contribution, or a
chunk from the wrong rank, does not. NaN/Inf never pass."""

from core.harness.sum_check import sum_verdict  # the bound, shared by every summing task


def check(outputs, expected, inputs):
    exact, abs_sum, terms = expected[0], expected[1], expected[2]
    return {"out": sum_verdict(outputs[0], exact, abs_sum, int(terms), "out")}
