#!/bin/sh
# The device call behind bench/results/h200_baselines.json and docs/tasks.md's baseline table
# (run from the repository root on the H200, with the Liger wheel in .whl/):
#   sh bench/h200_baselines.sh $OUT
set -e
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
python3 -m core.harness probe cuda:0 --peaks > "$OUT/probe.json"
# The weakest baselines first: a run cut short by the device's time limit keeps them.
python3 bench/tasks_gpu.py --impls --device cuda:0 --out "$OUT" --tasks \
  elementwise/kv_cache_write moe/align_permute moe/route_topk_softmax moe/route_grouped_topk \
  elementwise/rope elementwise/rope_qknorm activation/silu_mul_fp8_quant activation/silu_mul \
  norm/add_rmsnorm norm/rmsnorm_fp8_quant attention/mla_decode attention/decode_paged_gqa \
  sampling/top_k_top_p_sampling moe/fused_moe gemm/small_m_gemm gemm/bf16_gemm gemm/fp8_blockscale_gemm \
  gemm/bf16_grouped_gemm attention/prefill_gqa attention/prefill_sliding_window_sinks gemm/fp8_blockscale_grouped_gemm \
  2>&1 | tee "$OUT/baselines_gpu.log"
