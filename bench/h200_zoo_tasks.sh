#!/bin/sh
# The device call for the tasks the model zoo asked for (issue 43), run from the repository root
# on the H200 with the wheels in .whl/:   sh bench/h200_zoo_tasks.sh $OUT
# Each new task's baseline is submitted as its own candidate (the identity: 1.00x, no flag, its
# times are docs/tasks.md's figures), then each starter; about 4 device-minutes, and a run cut
# short by the timeout keeps what it measured ($OUT/tasks_gpu.json after every evaluation).
set -e
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
timeout 230 python3 bench/tasks_gpu.py --device cuda:0 --out "$OUT" --tasks \
  elementwise/kv_cache_write_fp8 attention/decode_paged_gqa_fp8kv attention/decode_paged_multi_query \
  attention/decode_paged_local attention/mla_prefill moe/mxfp4_moe \
  2>&1 | tee "$OUT/tasks_gpu.log" || true
