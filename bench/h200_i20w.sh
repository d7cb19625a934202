#!/bin/sh
# Issue 20, kept workers for timing (core/harness/quiesce.py), in one device call:
#   sh bench/h200_i20w.sh $OUT
# 1. the checkpoint probe as root, each step printed as it happens (bench/checkpoint_probe.py);
# 2. `train` batches of 16 on two tasks with K = 8, one with K = 4 (bench/batch_rewards.py);
# 3. where a warm visible-only turn spends its time (bench/turn_profile.py).
# Unsandboxed as root (candidates uid 65534): the harness's helper may lock their CUDA.
OUT=${1:-.}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 ARENA_SANDBOX=off
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== 1. probe"
timeout 35 python3 bench/checkpoint_probe.py --modes root --out "$OUT" 2>&1 | tail -2 | cut -c1-3000
echo "== 2. K=8"
timeout 125 python3 bench/batch_rewards.py --device cuda:0 --tasks moe/route_topk_softmax gemm/bf16_gemm \
  --candidates 16 --full-tasks 0 --singles 0 --phases train,warm --concurrency 8 \
  --budget-s 118 --cheats-s 0 --reserve-s 0 --out "$OUT/k8" 2>&1 | grep -v "^ " | tail -8
echo "== 2. K=4"
timeout 65 python3 bench/batch_rewards.py --device cuda:0 --tasks gemm/bf16_gemm \
  --candidates 16 --full-tasks 0 --singles 0 --phases train --concurrency 4 \
  --budget-s 60 --cheats-s 0 --reserve-s 0 --out "$OUT/k4" 2>&1 | grep -v "^ " | tail -5
echo "== 3. turn"
timeout 35 python3 bench/turn_profile.py --device cuda:0 --tasks gemm/bf16_gemm moe/route_topk_softmax \
  --repeats 3 --out "$OUT" 2>&1 | tail -6
