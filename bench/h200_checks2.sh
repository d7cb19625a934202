#!/bin/sh
# The second device call of this wave (bench/h200_checks.sh was the first): after the sandbox
# bound the C compiler's folder (/opt/gcc on the H200 image), the sandboxed evaluation, the two
# published kernels that had failed inside it, and imported KernelBench problems.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
echo "== 1. sandboxed evaluation on cuda:0"
timeout 120 python3 -m arena_tui.cli eval --task activation/silu_mul --candidate tasks/activation/silu_mul/starter.py \
  --device cuda:0 --json --no-store > "$OUT/sandbox_eval.json" 2> "$OUT/sandbox_eval.err"
echo "exit $?"; python3 -c "import json; r=json.load(open('$OUT/sandbox_eval.json')); print(r['status'], r.get('failed_stage'), r['sandbox']['mode'], r['sandbox']['source'], r.get('integrity_flags'), round(r.get('speedup') or 0, 3), r.get('baseline_impl'))" || tail -5 "$OUT/sandbox_eval.err"
echo "== 2. published kernels, honest, in the sandbox"
timeout 100 python3 tests/gpu/run_cheats.py --out "$OUT" --only published 2>&1 | tail -6
echo "== 3. imported KernelBench problems"
timeout 170 python3 bench/interop_gpu.py --tasks-dir .kbtasks --out "$OUT" \
  kernelbench/l2_001_conv2d_relu_biasadd=bench/interop_candidates/kernelbench_conv_relu_bias.py \
  kernelbench/l1_095_crossentropyloss 2>&1 | tail -8
