#!/usr/bin/env bash
# Verifying gpu-accept on a lent GPU machine (no network). Installs the carried wheels, then runs
# the named stages; everything worth keeping is written to $OUT, the only thing that comes back.
#
#   scripts/gpu-session.sh TAG STAGE...
#
#   foundation   record facts (and raw NVML answers), run the suites with --profile auto; on 4+
#                GPUs also the wrong profile and CUDA_VISIBLE_DEVICES=0,1,2
#   calibrate    5 runs with scripts/calibration/<TAG>.yaml, then `gpu-accept profile init` from
#                them: the floors of the shipped profile, with their provenance
#   confirm      5 runs in a row with the calibrated profile of this session (the first saves a
#                baseline, the others are gated on it), then NCCL_MAX_NCHANNELS=1 against both
#   shipped      5 runs in a row of the whole suite with --profile auto (the shipped profile),
#                each run's DDP numbers into the log
#   ddp-small    3 runs of the DDP tests with scripts/calibration/<TAG>-gpt2-small.yaml (the GeForce
#                profiles' settings: GPT-2 small, gradient accumulation)
#   faults       NCCL_P2P_DISABLE=1, a hung collective, a GEMM load on GPU2
#   fidelity     bench/fidelity.py against nccl-tests in .nccl-tests/build; where only its source is
#                carried in .nccl-tests/ (git-ignored), built first against torch's NCCL (about a minute)
#   ddp-time     bench/ddp_stage.py, twice, then what the workers left in /dev/shm and on the GPUs
#   trust        TRUST_RUNS (default 10) healthy full runs in a row with --profile auto: every run's
#                outcome, wall time, stage times and every value measured again (scripts/run_digest.py);
#                TRUST_FIRST=N numbers them from N, to go on from an earlier call on the same machine
#   health       health readings: `gpu-accept record --measure` with the NVML answers (start snapshot,
#                a snapshot after each stage, XID events), the health suite alone (-m health_state:
#                no load) and whole (must pass on a healthy machine), then a GEMM load on the last
#                GPU: only that GPU's test_no_other_compute_process may fail
#   drills       fault drills with --profile auto: NCCL_P2P_DISABLE=1, NCCL_MAX_NCHANNELS=1, a GEMM
#                load on the last GPU, CUDA_VISIBLE_DEVICES hiding the last GPU, a one-off dip
#                (GPUACCEPT_INJECT_DIP), one measurement worker stopped with SIGSTOP; DRILLS="dip stop"
#                runs only those named (of nop2p onechannel hog hidden dip stop)
#   killed       a run killed with SIGKILL while one GPU's GEMM load hangs: its measurement workers
#                must end by themselves (and leave the GPU); then the retired-page and remapping
#                readings of the quick level
#   nvml-reads   bench/nvml_reads.py: each NVML query of a health reading timed over every GPU, the
#                kernel log apart, and the NVLink error counters in one field-values call a GPU
#   quick        the quick level (health readings, inventory, topology, P2P; no load) three times,
#                each from the call's bytecode cache and from source (as lent), wall times into the log
#   burnin       gpu-accept burn-in --duration ${BURNIN_DURATION:-5m} on every GPU lent; its reports
#                checked (scripts/check_reports.py) and report.html copied to $OUT for a screenshot
#   burnin-kill  a burn-in of 30m ended with SIGTERM at minute ${BURNIN_KILL_AT:-3}: exit code, and
#                its reports checked as valid (junit parses, results.json validates, HTML written)
#   burn-compare gpu-burn (built here from .gpu-burn, its public source, carried and git-ignored),
#                gpu-burn -tc and gpu-accept burn-in, BURN_S (default 120) seconds each, every GPU
#                sampled: power median and 10th percentile against the limit, hottest temperature,
#                time to thermal steady state, throughput (bench/burnin_power.py)
#   hostlink     a single GPU's host link and local copies: 3 standard runs of the shipped profile
#                with the copies added (floors of 1 GB/s: the values are what is wanted), then a burn-in
#                of HOSTLINK_BURN_S (default 120) seconds whose copies stage runs at rest and then beside
#                the sustained load every 40 s; then the health check twice (timed) and the CUDA
#                multicast attribute as the probe reads it
#   burn-drills  burn-ins of DRILL_S (default 60) seconds with rounds of 15 s and the fabric stages
#                beside the load every 30 s, over the shipped profile (else the fitted one, else one
#                `gpu-accept profile derive` writes): healthy, then a
#                competing GEMM load, a slow GEMM, a corrupted product and a flipped memory bit, each
#                on the last GPU: the failed tests of each; BURN_DRILLS="healthy hog" runs only those
#                named (of healthy hog SLOW_GEMM CORRUPT_GEMM MEMTEST_FLIP). Under about 60 s the load
#                leaves too little of the 20-s steady window, or of its products alone for power:
#                those are not judged (exit 2); so on 4 GPUs at 60 s, where the NCCL stage beside the
#                load takes 33 s (a 4xH200, 2026-11-28)
#   (burnin and burnin-kill each take one device call: 5 and 3 minutes of load, and the suites)
#   nodes        the machine split into two torchrun "nodes" of GPUS/2 GPUs each on localhost, with
#                a different NCCL_HOSTID per node so NCCL goes between them through its network
#                transport (sockets on lo: numbers that say nothing of a real network): a healthy
#                run with tiny floors, then floors at 0.7x of what it measured and a GEMM load on node
#                B's GPU, then GPUACCEPT_INJECT_SLOW on node A only: each must name that node;
#                NCCL_MAX_NCHANNELS=1 on node B only (NCCL 2.28 will not connect ranks set up unlike:
#                exit 2 with NCCL's reason); last, node A alone (node B never starts): one line, exit 2.
#                The agents run `gpu-accept torchrun`.
#                Needs 2 GPUs or more (ranks cannot share a GPU); skipped with the reason on 1.
#   fit          where no shipped profile matches the machine (a 2xH100 has none): one standard run
#                against scripts/calibration/fit.yaml (floors at 1), and `gpu-accept profile init
#                --margin 0.9` from it over the model's base (the per-GPU loads, burn-in and health
#                limits); every later run_suite of the call without --profile uses it
#   loads        the per-GPU loads (suites/test_compute.py) with --profile auto, every GPU at once:
#                LOADS_RUNS (default 5) healthy runs (their
#                values per GPU, and floors from them: scripts/calibrate_compute.py), the GEMM/HBM
#                reference bench (bench/gemm_reference.py), and a second GEMM load on the last GPU,
#                which must fail that GPU's GEMM test(s) and no other GPU's; the GEMM's timing window
#                (bench/gemm_window.py); one memory bit flipped on the last GPU
#                (GPUACCEPT_INJECT_MEMTEST_FLIP): only its test_memtest fails; on 1, 2, 4 or 8 GPUs
#   examples     the example facts and results the README's demo and the project's tests judge,
#                recorded again with everything a standard run now judges (health readings after each
#                stage, XID events, the kernel log, the per-GPU loads, the telemetry): on 4xH200
#                examples/facts/h200x4-measured.json (the README's demo) and h200x4.json (probed
#                only), examples/results/h200x4.json (a healthy run) and h200x4-nccl-p2p-disabled.json
#                (NCCL_P2P_DISABLE=1); on 2xH200 h200x2-measured.json and h200x2.json; on one GPU
#                h200x1.json or h100x1.json. Then the README's demo on the new facts, as CI runs it:
#                it must exit 0 with no area not checked. Everything under $OUT/examples/, laid out
#                as the checkout's examples/ (copy it over, then `python -m tests.verdicts`)
#   derived      the shipped profiles out of the way: `gpu-accept profile derive` (this machine, from
#                the catalogue alone) to $OUT/derived-TAG.yaml, a healthy whole run with --profile
#                derived (must pass), then the drills against the written profile: NCCL_P2P_DISABLE=1,
#                NCCL_MAX_NCHANNELS=1 (on 2+ GPUs) and a GEMM load on the last GPU; each run's facts
#                are judged again (--facts, no GPU) against the profile --profile auto picks (the
#                shipped one where one matches) and the failed tests of both compared
#                (scripts/derived_compare.py). About 4-5 minutes on 2 GPUs
#   run-time     bench/run_time.py: the standard run and the quick level (and health-check, and the
#                probe alone) of this checkout beside the previous commit's, whose tree `python
#                bench/run_time.py prepare --ref REF` put in .prev/ (carried, git-ignored) before the
#                call; then this checkout on 1, 2 and 4 of the GPUs, and both under -n <GPUs>, as
#                RUN_TIME_BUDGET_S (default: what is left of the session's budget, at most 480 s)
#                allows, with RUN_TIME_QUICK_RUNS (default 2) quick levels and health checks per
#                commit: wall times, where each run's time went (inside each stage too: its phases),
#                ratios, 8 GPUs projected. Writes run-time-TAG.md, .json and .tar.gz (every run's
#                results.json and output)
#   run-profile  where a run's own process spends its time: a standard run, then a quick level, each
#                under py-spy (carried in .whl: scripts/fetch-wheels.sh), every thread sampled, waits
#                included; its collapsed stacks to $OUT (run-profile-TAG-*.txt, read by
#                bench/run_profile.py) with each run's results.json
#   first-step   bench/ddp_first_step.py: a DDP worker's first training step by part (import, context,
#                model, cuBLAS, attention, forward, backward, optimizer), in rounds of 1, 2, 4 and 8
#                processes at once, each round on a cold kernel cache, then one on a warm one; then one
#                process under py-spy --native (carried in .whl) to FIRST_STEP-TAG.txt
#   copy-rounds  bench/copy_rounds.py: the copy stage with its copies between GPUs one at a time
#                and in rounds (copies.concurrent), COPY_ROUNDS (default 3) runs of each in turn:
#                each copy's GB/s both ways, the copy step's time
#   copy-setup   bench/copy_setup.py: the copy stage's set-up by part (contexts, buffers, pinned host
#                memory, peer access, the process's end), one GPU after another as its worker does
#                it and a thread a GPU, COPY_SETUP_ROUNDS (default 3) fresh processes each way in turn
#   host-size    bench/host_copy_size.py: each GPU's copies to and from pinned host memory through the
#                copy stage's code at 1 GiB and at 256 MiB, HOST_SIZE_ROUNDS (default 3) rounds each in
#                turn: GB/s of each, their ratio, the step's time
#   driver-start bench/driver_start.py: DRIVER_SETS (default 3) sets of a rank a GPU setting up at
#                once, the CUDA driver and NVML started at the go or before it, DRIVER_ROUNDS runs each
#   context-visibility  bench/context_visibility.py: a rank a GPU, seeing every GPU against only its
#                own (CUDA_VISIBLE_DEVICES): its CUDA context, process group, NCCL's first operations
#                and busbw, CONTEXT_ROUNDS (default 2) runs of each in turn
#   context-creation  bench/context_creation.py: 1, 2, 3 and 4 sets of a rank a GPU (CONTEXT_SETS)
#                setting up at once, as a standard run's second wave sets up three: each rank's CUDA
#                context and its set's NCCL communicator, the wall time of all, CONTEXT_ROUNDS runs each
#   ddp-ab       the DDP values of this checkout beside the previous commit's (.prev/, as run-time),
#                standard runs on the first DDP_AB_GPUS (default 2) GPUs, this and previous in turn
#                while the budget allows: each run's scaling efficiency, exposed communication and
#                P2P speedup, a line per run (both as `python3 -m gpuaccept`: the previous commit
#                may lack this one's console entry)
#   ddp-variance bench/ddp_variance.py: the DDP workload on every GPU in DDP_VARIANCE_RUNS (default
#                4) fresh sets of processes, each timing 8 blocks of 10 steps with and without
#                communication in turn; then as many runs with each rank bound to its own share of
#                the CPUs: whether the efficiency swings within a process or between processes
#
# The wheels it installs come from scripts/fetch-wheels.sh (run here, before the device call).
#
# faults and ddp-time use this session's calibrated profile where calibrate ran, otherwise the
# shipped profile <TAG>-nvswitch.
#
# Stages stop starting new work past GPU_SESSION_BUDGET_S (default 560 s) so the call returns
# within its limit with whatever finished.
#
# Python's bytecode: the lent machines' image has none for its packages (torch, pytest, pydantic)
# and sets PYTHONDONTWRITEBYTECODE=1, so each Python process there would compile them from source
# (import torch and torch._dynamo: 7-8 s, as against about 3 s from bytecode), where a package
# installed by pip has its bytecode. So the bytecode of the standard library, the image's packages
# and what this script installs is compiled once, into a cache of the call's own
# (PYTHONPYCACHEPREFIX), before anything is measured; every run of every commit reads it.
# GPU_SESSION_BYTECODE=source leaves the machine as lent (bytecode compiled by each process).
set -uo pipefail
tag=${1:?usage: scripts/gpu-session.sh TAG STAGE...}; shift
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
# this checkout itself, as users install it (no network: the build backend is the machine's own)
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade --target /tmp/site . >/dev/null || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
log="$OUT/log-$tag.txt"
# compile_bytecode FOLDER...: their Python files' bytecode into the call's cache (see the top)
compile_bytecode() {
  [ -n "${PYTHONPYCACHEPREFIX:-}" ] && python3 -m compileall -q -j 0 "$@" >/dev/null 2>&1
  return 0
}
if [ "${GPU_SESSION_BYTECODE:-cached}" = cached ]; then
  export PYTHONPYCACHEPREFIX=/tmp/pycache
  compiled=$(date +%s.%N); compile_bytecode $(python3 -c 'import site, sysconfig; print(sysconfig.get_paths()["stdlib"], *site.getsitepackages())') /tmp/site "$PWD/bench" "$PWD/scripts"
  echo "bytecode compiled into $PYTHONPYCACHEPREFIX in $(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$compiled") s" >> "$log"
fi
work=/tmp/gpuaccept-$tag; mkdir -p "$work"
started=$(date +%s)
budget=${GPU_SESSION_BUDGET_S:-560}
say() { echo "=== [$(( $(date +%s) - started ))s] $*" | tee -a "$log"; }
time_left() { echo $(( budget - ($(date +%s) - started) )); }
enough() { [ "$(time_left)" -ge "$1" ] || { say "skipped (needs ${1}s, $(time_left)s left): $2"; return 1; }; }
calibration=scripts/calibration/$tag.yaml
calibrated=$work/calibrated.yaml
under_test() { if [ -f "$calibrated" ]; then echo "$calibrated"; else echo "$tag-nvswitch"; fi; }
# ddp_numbers RESULTS...: every DDP check's measured value and expectation, a line per run
ddp_numbers() {
  python3 - "$@" <<'PY' | tee -a "$log"
import json, sys
for path in sys.argv[1:]:
    tests = json.load(open(path))["tests"]
    cells = [f"{t['verdict']['check']}[{t['verdict']['subject']}] {t['verdict']['measured']} ({t['verdict']['expected']})"
             for t in tests if t["nodeid"].startswith("test_ddp.py") and t.get("verdict") and t["verdict"]["measured"] is not None]
    print(path.split("/")[-2] + ": " + "; ".join(cells))
PY
}

# run_suite NAME [gpu-accept run arguments...]: one run, its summary into the log
run_suite() {
  local name=$1; shift
  # a machine no shipped profile matches is judged against the profile the fit stage made for it
  if [ -f "$work/fitted.yaml" ] && [[ " $* " != *" --profile "* ]]; then set -- "$@" --profile "$work/fitted.yaml"; fi
  ${GPU_ACCEPT:-gpu-accept} run --reports "$work/$name" -q "$@" > "$work/$name.out" 2>&1
  local code=$?
  grep -E "passed|failed|error" "$work/$name.out" | tail -1 | sed "s/^/$name: exit $code: /" | tee -a "$log"
  sed -n '/gpu-accept summary/,$p' "$work/$name.out" | grep -E "^(PASS|FAIL|COULD NOT JUDGE|not checked|partly checked|ERROR| +FAIL| +ERROR| +and [0-9]+ test|[0-9]+ test)" | head -${LINES_PER_RUN:-12} >> "$log"
  return 0
}

# bench_into NAME SCRIPT [ARGS...]: a bench script's table into $OUT/NAME-TAG.md and the log, its JSON into $OUT/NAME-TAG.json
bench_into() {
  local name=$1 script=$2; shift 2
  python3 "$script" "$@" --out "$OUT/$name-$tag.json" 2>&1 | tee "$OUT/$name-$tag.md" | tee -a "$log"
}

# only_last_failed WHAT RUN TEST: after a fault on the last GPU, TEST[gpu<last>] failed and no other GPU's test
only_last_failed() {
  python3 - "$work/$2/results.json" "$last" "$3" "$1" <<'PY' 2>&1 | tee -a "$log"
import sys
from gpuaccept.facts.run_record import load_results
record, last, test, what = load_results(sys.argv[1]), f"gpu{sys.argv[2]}", sys.argv[3], sys.argv[4]
bad = sorted(t.id for t in record.tests if t.outcome not in ("passed", "skipped"))
others = [name for name in bad if f"[{last}]" not in name]
ok = f"{test}[{last}]" in bad and not others
print(f"{what} on {last}: {'as expected' if ok else 'NOT as expected'}: failed {bad or 'nothing'}")
for t in record.tests:
    if t.id == f"{test}[{last}]" and t.verdict is not None:
        print(f"  {t.id}: {t.verdict.message}")
PY
}

say "machine"
{ nvidia-smi -L; nvidia-smi topo -m; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "devices", torch.cuda.device_count())'; } >>"$log" 2>&1

for stage in "$@"; do
  case "$stage" in
  foundation)
    say "record"
    gpu-accept record -o "$OUT/facts-$tag.json" --nvml-log "$OUT/nvml-$tag.json" 2>&1 | tee -a "$log"
    say "run --profile auto (foundation suites)"
    run_suite auto -k "inventory or topology or p2p and not copy"
    if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
      say "the wrong profile: h100-8-nvswitch"
      LINES_PER_RUN=40 run_suite wrong --profile h100-8-nvswitch -k "inventory or topology or p2p and not copy"
      say "CUDA_VISIBLE_DEVICES=0,1,2 against h200-4-nvswitch"
      CUDA_VISIBLE_DEVICES=0,1,2 LINES_PER_RUN=40 run_suite three --profile h200-4-nvswitch -k "inventory or topology or p2p and not copy"
    fi
    ;;
  calibrate)
    for i in 1 2 3 4 5; do
      enough 70 "calibration run $i" || break
      say "calibration run $i"
      run_suite "cal$i" --profile "$calibration"
    done
    runs=$(ls "$work"/cal*/results.json 2>/dev/null)
    tar -czf "$OUT/calibration-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d cal*/results.json cal*/facts.json 2>/dev/null)
    say "profile init from $(echo $runs | wc -w) runs"
    gpu-accept profile init --from $runs --margin 0.93 --name "$tag-calibrated" -o "$calibrated" 2>&1 | tee -a "$log"
    cp "$calibrated" "$OUT/$tag-calibrated.yaml"
    ;;
  confirm)
    for i in 1 2 3 4 5; do
      enough 65 "confirmation run $i" || break
      say "confirmation run $i with the calibrated profile"
      # the first run saves a baseline; the others are gated on it as well
      gate=(--save-baseline "$work/baseline.json")
      [ "$i" != 1 ] && gate=(--baseline "$work/baseline.json" --max-regression 5%)
      run_suite "confirm$i" --profile "$calibrated" "${gate[@]}"
    done
    cp "$work/confirm5/report.html" "$OUT/report-$tag.html" 2>/dev/null
    cp "$work/confirm5/results.json" "$OUT/results-$tag.json" 2>/dev/null
    if enough 110 "NCCL_MAX_NCHANNELS=1 against the floors and the baseline"; then
      say "NCCL_MAX_NCHANNELS=1: large-size busbw must fail, and the baseline gate name the regressed values"
      NCCL_MAX_NCHANNELS=1 LINES_PER_RUN=60 run_suite onechannel --profile "$calibrated" --baseline "$work/baseline.json" --max-regression 5% -k "test_busbw or no_regression"
    fi
    tar -czf "$OUT/confirm-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d confirm*/results.json onechannel/results.json baseline.json 2>/dev/null)
    ;;
  shipped)
    for i in 1 2 3 4 5; do
      enough 60 "shipped-profile run $i" || break
      say "run $i with the shipped profile (--profile auto)"
      run_suite "shipped$i"
    done
    ddp_numbers "$work"/shipped*/results.json
    cp "$work/shipped5/report.html" "$OUT/report-shipped-$tag.html" 2>/dev/null
    tar -czf "$OUT/shipped-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d shipped*/results.json shipped*/facts.json 2>/dev/null)
    ;;
  ddp-small)
    for i in 1 2 3; do
      enough 60 "gpt2-small DDP run $i" || break
      say "DDP with the GeForce profiles' settings, run $i"
      run_suite "small$i" --profile "scripts/calibration/$tag-gpt2-small.yaml" -k ddp
    done
    ddp_numbers "$work"/small*/results.json
    ;;
  faults)
    if enough 95 "NCCL_P2P_DISABLE=1"; then
      say "NCCL_P2P_DISABLE=1: busbw, pairwise and DDP scaling must fail"
      NCCL_P2P_DISABLE=1 LINES_PER_RUN=40 run_suite nop2p --profile "$(under_test)" -k "busbw or pair_busbw or ddp_scaling"
    fi
    if enough 50 "a hung collective"; then
      say "GPUACCEPT_INJECT_HANG=all_reduce 1 GiB, 20 s limit: killed, named, the rest measured"
      base=h200-2-nvswitch
      [ "$(nvidia-smi -L | wc -l)" -ge 4 ] && base=h200-4-nvswitch
      printf 'schema: 1\nextends: %s/profiles/%s.yaml\nnccl: {timeout_s: 20, busbw: {all_reduce: {256MiB: 1, 1GiB: 1, 4GiB: 1}, broadcast: {1GiB: 1}}}\n' "$(pwd)" "$base" > "$work/hang.yaml"
      GPUACCEPT_INJECT_HANG="all_reduce 1 GiB" LINES_PER_RUN=20 run_suite hang --profile "$work/hang.yaml" -k "busbw or correct"
    fi
    if [ "$(nvidia-smi -L | wc -l)" -ge 4 ] && enough 50 "GEMM load on GPU2"; then
      say "a competing GEMM load on GPU2: DDP scaling must fail"
      python3 scripts/gemm_load.py --gpu 2 > "$work/gemm.out" 2>&1 &
      hog=$!
      sleep 5
      LINES_PER_RUN=20 run_suite hog --profile "$(under_test)" -k ddp_scaling
      kill $hog; wait $hog 2>/dev/null
    fi
    tar -czf "$OUT/faults-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d nop2p/results.json hang/results.json hog/results.json 2>/dev/null)
    ;;
  fidelity)
    if [ ! -x .nccl-tests/build/all_reduce_perf ] && [ -f .nccl-tests/Makefile ] && enough 200 "building nccl-tests"; then
      # nccl-tests' public source, carried (git-ignored), built against the NCCL torch uses
      nccl=$(python3 -c 'import nvidia.nccl, pathlib; print(pathlib.Path(next(iter(nvidia.nccl.__path__))))')
      home=/tmp/nccl-home; mkdir -p "$home/lib"; ln -sfn "$nccl/include" "$home/include"
      for library in "$nccl"/lib/libnccl.so*; do ln -sf "$library" "$home/lib/"; done
      [ -e "$home/lib/libnccl.so" ] || ln -sf "$nccl/lib/libnccl.so.2" "$home/lib/libnccl.so"
      say "fidelity: building nccl-tests against $nccl"
      make -C .nccl-tests -j16 MPI=0 NCCL_HOME="$home" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$work/nccl-tests-build.txt" 2>&1 \
        || { say "nccl-tests did not build"; tail -20 "$work/nccl-tests-build.txt" | tee -a "$log"; }
    fi
    if enough 150 "fidelity bench"; then
      say "fidelity: gpu-accept against nccl-tests"
      python3 bench/fidelity.py --nccl-tests .nccl-tests/build --gpus "$(nvidia-smi -L | wc -l)" --markdown "$OUT/fidelity-$tag.md" --logs "$work/nccl-tests.txt" 2>&1 | tee -a "$log"
    fi
    ;;
  ddp-time)
    shm_before=$(ls /dev/shm | wc -l)
    for i in 1 2; do
      enough 60 "DDP stage time $i" || break
      say "DDP stage wall time $i"
      python3 bench/ddp_stage.py --profile "$(under_test)" 2>&1 | tee -a "$log"
    done
    # the launcher kills its workers once they report done: nothing may be left behind
    sleep 2
    say "left behind: $(( $(ls /dev/shm | wc -l) - shm_before )) new entries in /dev/shm; GPU processes: $(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | wc -l)"
    ;;
  ddp-variance)
    if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
      say "ddp-variance: needs 2 GPUs or more"
    else
      for pin in "" --pin; do
        enough 120 "DDP variance ${pin:-unpinned}" || break
        say "DDP variance ${pin:-unpinned}"
        python3 bench/ddp_variance.py --runs "${DDP_VARIANCE_RUNS:-4}" $pin --json "$OUT/ddp-variance-$tag${pin:+-pinned}.json" 2>&1 | tee -a "$log"
      done
    fi
    ;;
  trust)
    # TRUST_FIRST numbers the runs on from an earlier call on the same warm machine
    first=${TRUST_FIRST:-1}
    for i in $(seq "$first" $((first + ${TRUST_RUNS:-10} - 1))); do
      enough 60 "healthy run $i" || break
      say "healthy run $i with --profile auto"
      run_suite "trust$i"
    done
    python3 scripts/run_digest.py "$work"/trust*/results.json | tee -a "$log"
    cp "$(ls -d "$work"/trust*/ | tail -1)report.html" "$OUT/report-trust-$tag.html" 2>/dev/null
    tar -czf "$OUT/trust-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d trust*/results.json trust*/facts.json 2>/dev/null)
    ;;
  drills)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    wanted() { [[ " ${DRILLS:-nop2p onechannel hog hidden dip stop} " == *" $1 "* ]]; }
    if wanted nop2p && enough 90 "NCCL_P2P_DISABLE=1"; then
      say "NCCL_P2P_DISABLE=1: busbw, pairs and DDP must fail"
      NCCL_P2P_DISABLE=1 LINES_PER_RUN=40 run_suite nop2p -k "busbw or pair_busbw or ddp"
    fi
    if wanted onechannel && enough 60 "NCCL_MAX_NCHANNELS=1"; then
      say "NCCL_MAX_NCHANNELS=1: busbw must fail"
      NCCL_MAX_NCHANNELS=1 LINES_PER_RUN=40 run_suite onechannel -k "busbw"
    fi
    if wanted hog && enough 90 "GEMM load on GPU$last"; then
      say "a competing GEMM load on GPU$last: its tests must fail, naming it"
      python3 scripts/gemm_load.py --gpu "$last" > "$work/gemm.out" 2>&1 &
      hog=$!
      sleep 5
      LINES_PER_RUN=40 run_suite hog
      kill $hog; wait $hog 2>/dev/null
    fi
    if wanted hidden && [ "$gpus" -ge 2 ] && enough 70 "CUDA_VISIBLE_DEVICES hiding GPU$last"; then
      say "CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((last - 1))) (GPU$last hidden), --profile auto: the installed machine's profile, the hidden GPU named"
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((last - 1))) LINES_PER_RUN=12 run_suite hidden
    fi
    if wanted dip && enough 60 "a one-off dip"; then
      say "GPUACCEPT_INJECT_DIP=all_reduce 1 GiB: the first measurement a third slower, the repeat healthy: must pass, transient"
      GPUACCEPT_INJECT_DIP="all_reduce 1 GiB" run_suite dip -k "busbw"
    fi
    if wanted stop && enough 120 "SIGSTOP"; then
      say "SIGSTOP: the first measurement worker stopped 3 s after it starts"
      began=$(date +%s)
      gpu-accept run --reports "$work/stop" -q > "$work/stop.out" 2>&1 &
      runner=$!
      worker=""
      # the run's child that imported torch forks the ranks: the first rank forked is the one stopped
      for _ in $(seq 1 900); do
        forker=$(pgrep -P "$runner" -f gpuaccept.measure.worker | head -1)
        [ -n "$forker" ] && worker=$(pgrep -P "$forker" | head -1)
        [ -n "$worker" ] && break; sleep 0.1
      done
      sleep "${STOP_AFTER_S:-3}"  # within the first stage: on one GPU its copies take about 7 s
      kill -STOP "$worker"; stopped=$(date +%s.%N)
      wait $runner; code=$?
      ended=$(date +%s.%N)
      left=$(pgrep -f gpuaccept.measure.worker | wc -l)
      say "SIGSTOP drill: worker $worker stopped $(( ${stopped%.*} - began )) s into the run; run exit $code, ended $(python3 -c "print(f'{$ended - $stopped:.1f}')") s after the stop; measurement workers left: $left"
      grep -E "stopped responding|passed|failed" "$work/stop.out" | head -8 | tee -a "$log"
      [ "$left" = 0 ] || pkill -CONT -f gpuaccept.measure.worker
    fi
    python3 scripts/run_digest.py $(ls "$work"/{nop2p,onechannel,hog,hidden,dip,stop}/results.json 2>/dev/null) | tee -a "$log"
    tar -czf "$OUT/drills-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d {nop2p,onechannel,hog,hidden,dip,stop}/results.json 2>/dev/null)
    ;;
  derived)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    derived_yaml="$OUT/derived-$tag.yaml"
    say "profile derive: this machine's profile from the catalogue alone"
    gpu-accept profile derive -o "$derived_yaml" 2>&1 | tee -a "$log"
    if enough 90 "healthy run with --profile derived"; then
      say "healthy whole run, --profile derived (no profile folder searched): must pass"
      LINES_PER_RUN=30 run_suite derived-healthy --profile derived
      grep -m1 "^gpu-accept: profile" "$work/derived-healthy.out" | tee -a "$log"
    fi
    # each drill: (name, the tests it runs, its environment); the GEMM load is started around its run
    drill_names=(nop2p onechannel hog); drill_tests=("busbw or pair_busbw or ddp" "busbw" "")
    drill_envs=("NCCL_P2P_DISABLE=1" "NCCL_MAX_NCHANNELS=1" "")
    for i in 0 1 2; do
      name=${drill_names[$i]}; tests=${drill_tests[$i]}
      if [ "$gpus" -lt 2 ] && [ "$name" != hog ]; then say "derived $name: skipped, one GPU has no collectives"; continue; fi
      enough 100 "derived drill $name" || continue
      selection=(); [ -n "$tests" ] && selection=(-k "$tests")
      if [ "$name" = hog ]; then
        say "a competing GEMM load on GPU$last against the derived profile"
        python3 scripts/gemm_load.py --gpu "$last" > "$work/gemm-derived.out" 2>&1 &
        hog=$!; sleep 5
      else
        say "${drill_envs[$i]} against the derived profile"
      fi
      # in a subshell: the drill's variable reaches this run only
      ( [ -n "${drill_envs[$i]}" ] && export "${drill_envs[$i]}"; LINES_PER_RUN=40 run_suite "derived-$name" --profile "$derived_yaml" "${selection[@]}" )
      [ "$name" = hog ] && { kill $hog; wait $hog 2>/dev/null; }
      # the same measurements judged by the profile --profile auto picks: the shipped one where one matches
      gpu-accept run --facts "$work/derived-$name/facts.json" --reports "$work/derived-$name-auto" -q "${selection[@]}" \
        > "$work/derived-$name-auto.out" 2>&1
      python3 scripts/derived_compare.py "$name" "$work/derived-$name/results.json" "$work/derived-$name-auto/results.json" 2>&1 | tee -a "$log"
    done
    python3 scripts/run_digest.py $(ls "$work"/derived-*/results.json 2>/dev/null) | tee -a "$log"
    tar -czf "$OUT/derived-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d derived-*/results.json derived-*/facts.json derived-*/*.yaml 2>/dev/null)
    ;;
  killed)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    say "a run killed with SIGKILL while gpu$last's GEMM load hangs (GPUACCEPT_INJECT_HANG): its workers must end by themselves"
    GPUACCEPT_INJECT_HANG=load/gemm/gpu$last gpu-accept run --reports "$work/killed" -q -k test_compute > "$work/killed.out" 2>&1 &
    victim=$!
    for _ in $(seq 1 60); do grep -q "compute stage" "$work/killed.out" 2>/dev/null && break; sleep 1; done
    sleep 10  # the other GPUs' loads finish; gpu$last's worker sits in its hang
    workers() { pgrep -f "gpuaccept.measure.worker" | tr '\n' ' '; }
    apps() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | tr '\n' ' '; }
    say "before the kill: workers [$(workers)], compute processes on the GPUs [$(apps)]"
    kill -9 "$victim"; wait "$victim" 2>/dev/null
    sleep 5
    say "5 s after the kill: workers [$(workers)], compute processes on the GPUs [$(apps)]"
    grep -h "launcher .* is gone" /tmp/gpuaccept-measure-*/rank*.log 2>/dev/null | head -4 | tee -a "$log"
    pkill -9 -f "gpuaccept.measure.worker" 2>/dev/null  # whatever the fix did not end, so later stages start clean
    say "retired pages and the rest of the start snapshot, as the quick level reads them"
    run_suite quickread --level quick -k "retired_pages or row_remapping or sram_ecc"
    python3 - "$work/quickread/results.json" <<'PY' 2>&1 | tee -a "$log"
import sys
from gpuaccept.facts.run_record import load_results
record = load_results(sys.argv[1])
for t in record.tests:
    print(f"{t.id}: {t.outcome}: {t.message[:160]}")
for s in record.facts.health.snapshots[:1]:
    print("retired_pages_sbe", s.retired_pages_sbe, "| retired_pages_dbe", s.retired_pages_dbe)
PY
    ;;
  nvml-reads)
    say "nvml-reads: the health reading's time, query by query (bench/nvml_reads.py)"
    python3 bench/nvml_reads.py --out "$OUT/nvml-reads-$tag.json" 2>&1 | tee -a "$log"
    ;;
  run-profile)
    # a folder of its own: installing this checkout into /tmp/site with --upgrade replaced its bin/
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py-spy .whl/py_spy-*.whl 2>/dev/null
    PATH=/tmp/py-spy/bin:$PATH
    if ! command -v py-spy >/dev/null; then say "run-profile: skipped: no py-spy (scripts/fetch-wheels.sh puts it in .whl)"; continue; fi
    for level in standard quick; do
      say "run-profile: a $level run under py-spy"
      py-spy record --idle --threads --rate 200 --format raw -o "$OUT/run-profile-$tag-$level.txt" -- \
        python3 -m gpuaccept run --profile auto --level "$level" --reports "$work/profiled-$level" -q \
        > "$work/profiled-$level.out" 2>&1
      say "run-profile: $level exit $?: $(tail -1 "$work/profiled-$level.out")"
    done
    tar -czf "$OUT/run-profile-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d profiled-*/results.json profiled-*.out 2>/dev/null)
    ;;
  quick)
    # each run twice: from the bytecode compiled for the call (as a pip install leaves it), and with
    # each process compiling it from source, as the lent image leaves it
    for i in 1 2 3; do
      for bytecode in cached source; do
        say "quick level run $i, bytecode $bytecode"
        began_run=$(date +%s.%N)
        if [ "$bytecode" = source ]; then (unset PYTHONPYCACHEPREFIX; run_suite "quick$i-$bytecode" --level quick)
        else run_suite "quick$i-$bytecode" --level quick; fi
        say "quick level run $i, bytecode $bytecode: $(python3 -c "print(f'{$(date +%s.%N) - $began_run:.1f}')") s wall"
      done
    done
    ;;
  burnin)
    duration=${BURNIN_DURATION:-5m}
    need=$(python3 -c "from gpuaccept.vocabulary.telemetry import parse_duration; print(int(parse_duration('$duration')) + 90)")
    enough "$need" "burn-in of $duration" || continue
    say "gpu-accept burn-in --duration $duration"
    gpu-accept burn-in --duration "$duration" --reports "$work/burnin" > "$work/burnin.out" 2>&1
    code=$?
    say "burn-in exit $code"
    grep -E "burn-in round|burn-in done|burn-in ended" "$work/burnin.out" | tail -40 >> "$log"
    sed -n '/gpu-accept summary/,$p' "$work/burnin.out" | head -60 >> "$log"
    python3 scripts/check_reports.py "$work/burnin" --telemetry 2>&1 | tee -a "$log"
    cp "$work/burnin/report.html" "$OUT/report-burnin-$tag.html" 2>/dev/null
    cp "$work/burnin/results.json" "$OUT/results-burnin-$tag.json" 2>/dev/null
    cp "$work/burnin.out" "$OUT/burnin-$tag.out" 2>/dev/null
    ;;
  burnin-kill)
    kill_at=${BURNIN_KILL_AT:-3}
    enough $(( kill_at * 60 + 50 )) "burn-in killed at minute $kill_at" || continue
    say "gpu-accept burn-in --duration 30m, SIGTERM at minute $kill_at"
    gpu-accept burn-in --duration 30m --reports "$work/burnin-kill" > "$work/burnin-kill.out" 2>&1 &
    runner=$!
    sleep $(( kill_at * 60 ))
    kill -TERM "$runner"; signalled=$(date +%s)
    wait "$runner"; code=$?
    say "killed burn-in: exit $code (2: cut short with no failure; 1: a check failed), $(( $(date +%s) - signalled )) s from SIGTERM to exit; measurement workers left: $(pgrep -f gpuaccept.measure.worker | wc -l)"
    grep -E "burn-in round|burn-in done|burn-in ended" "$work/burnin-kill.out" | tail -20 >> "$log"
    python3 scripts/check_reports.py "$work/burnin-kill" --telemetry 2>&1 | tee -a "$log"
    cp "$work/burnin-kill/report.html" "$OUT/report-burnin-kill-$tag.html" 2>/dev/null
    cp "$work/burnin-kill/results.json" "$OUT/results-burnin-kill-$tag.json" 2>/dev/null
    cp "$work/burnin-kill/junit.xml" "$OUT/junit-burnin-kill-$tag.xml" 2>/dev/null
    ;;
  nodes)
    gpus=$(nvidia-smi -L | wc -l); per=$((gpus / 2))
    if [ "$per" -lt 1 ]; then say "nodes: skipped: $gpus GPU, two nodes need one GPU each (ranks cannot share a GPU)"; continue; fi
    first=$(seq -s, 0 $((per - 1))); second=$(seq -s, "$per" $((2 * per - 1)))
    # one_job NAME PROFILE [VAR=VALUE on node A] [VAR=VALUE on node B]: two torchrun agents, one a node
    one_job() {
      local name=$1 spec=$2 extra_a=${3:-} extra_b=${4:-} port=$((29400 + RANDOM % 1000))
      local common=(gpu-accept torchrun --nnodes 2 --nproc-per-node "$per" --rdzv-backend c10d
        --rdzv-endpoint "localhost:$port" --rdzv-id "$name-$port" --rdzv-conf join_timeout=120
        -- --profile "$spec" --out "$work/$name" --name two-nodes)
      env CUDA_VISIBLE_DEVICES="$first" NCCL_HOSTID=node-a NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo $extra_a \
        timeout 240 "${common[@]}" > "$work/$name-a.out" 2>&1 &
      local a=$!
      env CUDA_VISIBLE_DEVICES="$second" NCCL_HOSTID=node-b NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo $extra_b \
        timeout 240 "${common[@]}" > "$work/$name-b.out" 2>&1 &
      local b=$!
      wait $a; local code_a=$?; wait $b; local code_b=$?
      say "nodes $name: agents exit $code_a $code_b"
      grep -hE "^(PASSED|FAILED|ERROR) |passed, |^gpu-accept: " "$work/$name-a.out" "$work/$name-b.out" | tee -a "$log"
      [ -f "$work/$name/cluster-results.json" ] && python3 - "$work/$name/cluster-results.json" <<'PY' | tee -a "$log"
import json, sys
facts = json.load(open(sys.argv[1]))["cluster"]  # a results.json record: the job's facts under cluster
for r in facts["collectives"]:
    print(f"  {r['collective']} {r['nominal_size']}: busbw {r['busbw_GBps']:.2f} GB/s over {r['ranks']} ranks")
for n in facts["nodes"]:
    env = {k: v for k, v in n["environment"].items() if k in ("NCCL_HOSTID", "NCCL_MAX_NCHANNELS", "GPUACCEPT_INJECT_SLOW")}
    print(f"  node{n['node']} {n['host']} ranks {n['ranks']} transport {n['transport']} {env}")
found = facts["localization"]
if found:
    print(f"  localization: slow {found['slow']} undecided {found['undecided']}: {found['reason']}")
    for t in found["trials"]:
        print(f"    round {t['round']} nodes {t['nodes']}{' alone' if t['alone'] else ''}: {t['value_GBps']:.3f} GB/s {'pass' if t['passed'] else 'MISS'}")
PY
      tar -czf "$OUT/nodes-$tag-$name.tar.gz" -C "$work" "$name" "$name-a.out" "$name-b.out"
    }
    cat > "$work/nodes-healthy.yaml" <<YAML
schema: 1
description: two torchrun nodes of $per GPUs on one machine, NCCL between them over sockets on lo
gpus: {count: $per, model: "*"}
cluster:
  nodes: 2
  transport: [Socket]  # NCCL_HOSTID differs per node: NET/Socket between them
  warmup: 3
  iterations: 10
  timeout_s: 120
  rendezvous_s: 120
  busbw:  # tiny: this run only measures
    all_reduce: {256MiB: 0.01}
    all_gather: {256MiB: 0.01}
  localize: {size: 64MiB}
YAML
    if enough 120 "nodes: healthy"; then
      say "nodes: two torchrun nodes x $per GPUs ($first | $second), healthy"
      one_job healthy "$work/nodes-healthy.yaml"
      # floors at 0.7x of what the healthy run measured: a node at one channel, or slowed, misses them
      python3 - "$work/healthy/cluster-results.json" "$work/nodes-healthy.yaml" "$work/nodes-floors.yaml" <<'PY'
import json, sys, yaml
facts = json.load(open(sys.argv[1]))["cluster"]
spec = yaml.safe_load(open(sys.argv[2]))
for r in facts["collectives"]:
    spec["cluster"]["busbw"][r["collective"]][r["nominal_size"]] = round(0.7 * r["busbw_GBps"], 3)
yaml.safe_dump(spec, open(sys.argv[3], "w"))
PY
    fi
    if [ -f "$work/nodes-floors.yaml" ] && enough 150 "nodes: a GEMM load on node B's GPU"; then
      say "nodes: a GEMM load on node B's first GPU ($per): the localization must name node B"
      python3 scripts/gemm_load.py --gpu "$per" > "$work/gemm-nodes.out" 2>&1 &
      hog=$!
      sleep 5
      one_job gemmload "$work/nodes-floors.yaml"
      kill $hog; wait $hog 2>/dev/null
    fi
    if [ -f "$work/nodes-floors.yaml" ] && enough 60 "nodes: NCCL_MAX_NCHANNELS=1 on node B"; then
      say "nodes: NCCL_MAX_NCHANNELS=1 on node B only: NCCL refuses to connect ranks set up unlike (exit 2, NCCL's reason)"
      one_job onechannel "$work/nodes-floors.yaml" "" "NCCL_MAX_NCHANNELS=1"
    fi
    if [ -f "$work/nodes-floors.yaml" ] && enough 150 "nodes: GPUACCEPT_INJECT_SLOW on node A"; then
      say "nodes: GPUACCEPT_INJECT_SLOW=0.5 on node A only: the localization must name node A"
      one_job injected "$work/nodes-floors.yaml" "GPUACCEPT_INJECT_SLOW=0.5" ""
    fi
    if enough 40 "nodes: node B never starts"; then
      say "nodes: node A alone, node B never started: one line and exit 2 once cluster.rendezvous_s (10 s) passed"
      sed 's/rendezvous_s: 120/rendezvous_s: 10/' "$work/nodes-healthy.yaml" > "$work/nodes-alone.yaml"
      env CUDA_VISIBLE_DEVICES="$first" timeout 120 gpu-accept torchrun --nnodes 2 --nproc-per-node "$per" --rdzv-backend c10d \
        --rdzv-endpoint "localhost:$((29400 + RANDOM % 1000))" --rdzv-id alone -- --profile "$work/nodes-alone.yaml" \
        --out "$work/alone" > "$work/alone.out" 2>&1
      say "nodes alone: exit $?"; grep -E "^gpu-accept:|Traceback" "$work/alone.out" | tee -a "$log"
    fi
    # every job's results in a store, as a fleet keeps them: the cluster's history by its name (--name two-nodes)
    jobs=("$work"/*/cluster-results.json)
    if [ -f "${jobs[0]}" ]; then
      say "nodes: the jobs' results into a store, and the history of cluster two-nodes"
      gpu-accept store add "${jobs[@]}" --db "$work/nodes.duckdb" 2>&1 | tee -a "$log"
      gpu-accept store info --db "$work/nodes.duckdb" 2>&1 | tee -a "$log"
      gpu-accept report history --db "$work/nodes.duckdb" --show two-nodes 2>&1 | tee -a "$log"
      cp "$work/nodes.duckdb" "$OUT/nodes-$tag.duckdb"
    fi
    ;;
  health)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    if enough 120 "health record"; then
      say "record with health snapshots and the raw NVML answers (--measure: a snapshot after each stage)"
      gpu-accept record -o "$OUT/health-facts-$tag.json" --nvml-log "$OUT/health-nvml-$tag.json" --measure 2>&1 | tail -3 | tee -a "$log"
      python3 - "$OUT/health-facts-$tag.json" <<'PY' | tee -a "$log"
import json, sys
health = json.load(open(sys.argv[1])).get("health", {})
print("snapshots:", [(s["gpu"], s["label"]) for s in health.get("snapshots", [])])
print("events:", health.get("events"), "| listener:", health.get("listener"), "| kernel log:", health.get("kernel_log"))
for s in health.get("snapshots", [])[:len(set(x["gpu"] for x in health["snapshots"]))]:
    print(f"gpu{s['gpu']} start:", {k: s[k] for k in ("recovery_action", "pcie_replay", "remap_pending", "temperature_C", "memory_temperature_C",
          "slowdown_C", "memory_max_C", "power_W", "inforom_valid", "mig_mode", "virtualization_mode", "sram_threshold_exceeded")})
PY
    fi
    if enough 40 "health state tests alone"; then
      say "the health state tests alone (-m health_state): no measurement stage runs"
      LINES_PER_RUN=40 run_suite health-state -m health_state
    fi
    if enough 120 "the health suite, healthy"; then
      say "the whole health suite on a healthy machine: must pass (every stage runs first for the run checks)"
      LINES_PER_RUN=40 run_suite health -k test_health
    fi
    if enough 60 "GEMM load on GPU$last"; then
      say "a competing GEMM load on GPU$last: only test_no_other_compute_process[gpu$last] may fail"
      python3 scripts/gemm_load.py --gpu "$last" > "$work/gemm-health.out" 2>&1 &
      hog=$!
      sleep 8
      LINES_PER_RUN=40 run_suite health-hog -m health_state
      kill $hog; wait $hog 2>/dev/null
    fi
    for name in health-state health health-hog; do
      [ -f "$work/$name/results.json" ] || continue
      python3 - "$work/$name/results.json" "$name" <<'PY' | tee -a "$log"
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
by = {}
for t in tests:
    by.setdefault(t["outcome"], []).append(t["id"])
print(sys.argv[2] + ":", {k: len(v) for k, v in by.items()}, "| not passed:", [t["id"] + ": " + t["message"][:160] for t in tests if t["outcome"] in ("failed", "error")])
print(sys.argv[2] + " skip reasons:", sorted({t["message"].split(": ", 1)[-1][:90] for t in tests if t["outcome"] == "skipped"})[:12])
PY
    done
    cp "$work/health/report.html" "$OUT/report-health-$tag.html" 2>/dev/null
    tar -czf "$OUT/health-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d health*/results.json health*/facts.json 2>/dev/null)
    ;;
  loads)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    for i in $(seq 1 "${LOADS_RUNS:-5}"); do
      enough 45 "per-GPU load run $i" || break
      say "per-GPU load run $i with --profile auto (every GPU at once)"
      LINES_PER_RUN=30 run_suite "loads$i" -k test_compute
    done
    say "floors from the healthy runs"
    python3 scripts/calibrate_compute.py "$work"/loads*/results.json 2>&1 | tee -a "$log" | tee "$OUT/calibrate-compute-$tag.txt"
    if enough 120 "GEMM/HBM reference bench"; then
      say "gpu-accept's GEMM and HBM beside plain torch loops, same GPU, same run"
      python3 bench/gemm_reference.py --gpus "$gpus" --markdown "$OUT/gemm-reference-$tag.md" 2>&1 | tee -a "$log"
    fi
    if enough 60 "GEMM timing window"; then
      say "GEMM TFLOP/s over 50 and 500 products, gpu-accept's and plain variants (bench/gemm_window.py)"
      python3 bench/gemm_window.py --gpu 0 --markdown "$OUT/gemm-window-$tag.md" 2>&1 | tee -a "$log"
    fi
    if enough 60 "a second GEMM load on GPU$last"; then
      say "a second GEMM load on GPU$last: its GEMM throughput (and, on 2+ GPUs, within-best) must fail, no other GPU's test"
      python3 scripts/gemm_load.py --gpu "$last" > "$work/gemm-loads.out" 2>&1 &
      hog=$!
      sleep 5
      LINES_PER_RUN=30 run_suite loadhog -k "test_gemm"
      kill $hog; wait $hog 2>/dev/null
      only_last_failed "second GEMM load" loadhog test_gemm_throughput
    fi
    if enough 60 "one memory bit flipped on GPU$last"; then
      say "GPUACCEPT_INJECT_MEMTEST_FLIP=gpu$last: its memory test must fail with 1 mismatch, no other GPU's"
      GPUACCEPT_INJECT_MEMTEST_FLIP=gpu$last LINES_PER_RUN=30 run_suite memflip -k "test_memtest"
      only_last_failed "one bit flipped" memflip test_memtest
    fi
    tar -czf "$OUT/loads-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d loads*/results.json loads*/facts.json loadhog/results.json memflip/results.json 2>/dev/null)
    ;;
  burn-compare)
    if [ -f .gpu-burn/Makefile ] && enough 60 "building gpu-burn"; then
      say "building gpu-burn from .gpu-burn (COMPUTE=90)"
      cuda=$(dirname "$(dirname "$(command -v nvcc)")")
      (cd .gpu-burn && make COMPUTE=90 CUDAPATH="$cuda" > "$work/gpu-burn-build.log" 2>&1) || tail -5 "$work/gpu-burn-build.log" | tee -a "$log"
    fi
    seconds=${BURN_S:-120}
    if enough $((seconds + 60)) "gpu-accept burn-in beside gpu-burn"; then
      say "gpu-burn, gpu-burn -tc and gpu-accept burn-in, ${seconds}s each (bench/burnin_power.py)"
      # BURN_SKIP: tools left out of this call (gpu-burn gpu-burn-tc gpu-accept), to fit a call's limit
      python3 bench/burnin_power.py --duration "$seconds" --gpu-burn .gpu-burn/gpu_burn --out "$work/burn" ${BURN_SKIP:+--skip $BURN_SKIP} 2>&1 | tee -a "$log"
      grep -E "gpu-accept: burn-in" "$work/burn/gpu-accept.log" | tail -6 >> "$log"
      grep -E "passed|failed|error" "$work/burn/gpu-accept.log" | tail -1 >> "$log"
      sed -n '/gpu-accept summary/,$p' "$work/burn/gpu-accept.log" | grep -E "^(FAILED|ERROR)" | head -20 >> "$log"
      cp "$work/burn/burnin-power.json" "$OUT/burnin-power-$tag.json" 2>/dev/null
      gzip -c "$work/burn/gpu-accept/results.json" > "$OUT/results-burn-$tag.json.gz" 2>/dev/null
      cp "$work/burn/gpu-accept/report.html" "$OUT/report-burn-$tag.html" 2>/dev/null
      tar -czf "$OUT/burn-logs-$tag.tar.gz" -C "$work/burn" $(cd "$work/burn" && ls *.log) "$work/gpu-burn-build.log" 2>/dev/null
    fi
    ;;
  hostlink)
    base=$(gpu-accept profile list 2>/dev/null | awk -v t="$tag" '$1 == t || $1 == t"-nvswitch" {print $1; exit}')
    printf 'schema: 1\nextends: %s\ncopies: {size: 1GiB, iterations: 10, local_min: 1, host_to_device_min: 1, device_to_host_min: 1}\nburnin: {fabric_interval: 40s}\n' "$base" > "$work/hostlink.yaml"
    for i in 1 2 3; do
      if enough 60 "standard run $i with copies"; then
        say "standard run $i: $base with the copies"; run_suite "hostlink$i" --profile "$work/hostlink.yaml"
        python3 - "$work/hostlink$i/results.json" <<'PY' | tee -a "$log"
import json, sys
copies = json.load(open(sys.argv[1]))["facts"]["measurements"]["copies"]
print("copies:", ", ".join(f"{r['what']} gpu{r['gpus'][0]} {r['GBps']:.2f} GB/s" for r in copies["results"]))
PY
      fi
    done
    seconds=${HOSTLINK_BURN_S:-120}
    if enough $((seconds + 40)) "burn-in with the copies beside the load"; then
      say "burn-in ${seconds}s: the copies at rest, then beside the sustained load every 40 s"
      LINES_PER_RUN=20 run_suite hostlink-burn --level burn-in --duration "${seconds}s" --profile "$work/hostlink.yaml"
      grep -E "gpu-accept: burn-in" "$work/hostlink-burn.out" | tail -12 >> "$log"
      python3 - "$work/hostlink-burn/results.json" <<'PY' | tee -a "$log"
import json, sys
burnin = json.load(open(sys.argv[1]))["facts"]["burnin"]
for r in burnin["rounds"]:
    m = r["measurements"]
    copies = ", ".join(f"{c['what']} {c['GBps']:.1f}" for c in (m.get("copies") or {}).get("results", []))
    memtest = [x for x in (m.get("compute") or {}).get("results", []) if x["load"] == "memtest"]
    print(f"round {r['index']} at {r['started_s']:.0f}s {r['stages']} beside={r.get('beside_load', False)} {copies}{' memtest' if memtest else ''}")
PY
    fi
    for i in 1 2; do
      if enough 30 "health check $i"; then
        began=$(date +%s.%N); gpu-accept health-check --reports "$work/hc$i" --metrics "$work/hc$i.prom" > "$work/hc$i.out" 2>&1; code=$?
        say "health check $i: exit $code in $(python3 -c "print(round($(date +%s.%N) - $began, 1))") s: $(tail -1 "$work/hc$i.out")"
      fi
    done
    python3 -c "from gpuaccept.probe.nvls import probe_multicast; import torch; print('multicast:', probe_multicast(torch.cuda.device_count()))" 2>&1 | tail -2 | tee -a "$log"
    tar -czf "$OUT/hostlink-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d hostlink*/results.json hc1.prom 2>/dev/null)
    ;;
  burn-drills)
    gpus=$(nvidia-smi -L | wc -l); last=$((gpus - 1))
    seconds=${DRILL_S:-60}
    base=${DRILL_PROFILE:-$(gpu-accept profile list 2>/dev/null | awk -v t="$tag" '$1 == t || $1 == t"-nvswitch" {print $1; exit}')}
    [ -z "${DRILL_PROFILE:-}" ] && [ -f "$work/fitted.yaml" ] && base=$work/fitted.yaml
    # no shipped profile for this machine (a 2xH100) and none fitted: its profile derived from the catalogue
    if [ -z "$base" ]; then
      gpu-accept profile derive -o "$work/derived-base.yaml" >> "$log" 2>&1 && base=$work/derived-base.yaml
    fi
    # the fabric stages run at rest in the first round, then beside the load every 30 s: a 60-s burn-in
    # keeps about 10 s of products alone after the load settled, what its power is judged on
    printf 'schema: 1\nextends: %s\nburnin: {round_s: 15, steady_window_s: 20, fabric_interval: 30s}\n' "$base" > "$work/drill.yaml"
    burn_drills=" ${BURN_DRILLS:-healthy hog SLOW_GEMM CORRUPT_GEMM MEMTEST_FLIP} "
    say "drill profile: $(tr '\n' ' ' < "$work/drill.yaml")"
    burn() { local name=$1; shift; LINES_PER_RUN=${LINES_PER_RUN:-30} run_suite "$name" --level burn-in --duration "${seconds}s" --profile "$work/drill.yaml" "$@"; }
    if [[ $burn_drills == *" healthy "* ]] && enough $((seconds + 40)) "healthy burn-in"; then say "healthy burn-in, ${seconds}s"; burn burn-healthy; fi
    if [[ $burn_drills == *" hog "* ]] && enough $((seconds + 40)) "competing load"; then
      say "a competing GEMM load on gpu$last under the burn-in: gpu$last's tests must fail"
      python3 scripts/gemm_load.py --gpu "$last" > "$work/gemm.out" 2>&1 &
      hog=$!; sleep 5
      burn burn-hog
      kill $hog; wait $hog 2>/dev/null
    fi
    for drill in SLOW_GEMM CORRUPT_GEMM MEMTEST_FLIP; do
      if [[ $burn_drills == *" $drill "* ]] && enough $((seconds + 40)) "$drill"; then
        say "GPUACCEPT_INJECT_$drill=gpu$last under the burn-in"
        export "GPUACCEPT_INJECT_$drill=gpu$last"; burn "burn-$drill"; unset "GPUACCEPT_INJECT_$drill"
      fi
    done
    tar -czf "$OUT/burn-drills-$tag.tar.gz" -C "$work" $(cd "$work" && ls -d burn-*/results.json 2>/dev/null)
    ;;
  fit)
    # --profile auto falls back to the smallest profile of the model with more GPUs (a 2xH100 is
    # judged as an h100-8-nvswitch missing six GPUs): fit when no shipped profile matches exactly
    model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l)
    if python3 -c "import sys; from gpuaccept.profile import ProfileCatalog; sys.exit(0 if any(p.matches_machine(sys.argv[1], int(sys.argv[2])) for p in ProfileCatalog.with_shipped().load_all()) else 1)" "$model" "$gpus"; then
      say "fit: a shipped profile matches ${gpus}x $model"
      continue
    fi
    say "fit: no shipped profile matches ${gpus}x $model; one run with floors at 1, then profile init --margin 0.9"
    sed "s/@GPUS@/$gpus/" scripts/calibration/fit.yaml > "$work/fit.yaml"
    run_suite fit-run --profile "$work/fit.yaml"
    gpu-accept profile init --from "$work/fit-run/results.json" --margin 0.9 --name "$tag-fitted" -o "$work/fitted.yaml" 2>&1 | tail -2 | tee -a "$log"
    # a profile made from runs holds no per-GPU loads, burn-in or health limits: the model's base gives them
    case "$model" in
      *H100*) base=hgx-h100 ;;
      *H200*) base=hgx-h200 ;;
      *) base="" ;;
    esac
    [ -n "$base" ] && sed -i "0,/^schema: 1\$/s//schema: 1\nextends: bases\/$base/" "$work/fitted.yaml"
    cp "$work/fitted.yaml" "$OUT/$tag-fitted.yaml" 2>/dev/null
    ;;
  examples)
    gpus=$(nvidia-smi -L | wc -l)
    model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    case "$model" in *H200*) kind=h200 ;; *H100*) kind=h100 ;; *) kind="" ;; esac
    case "$kind-$gpus" in h200-4) profile=h200-4-nvswitch ;; h200-2) profile=h200-2-nvswitch ;; *-1) profile=$kind-1 ;; *) profile="" ;; esac
    if [ -z "$kind" ] || [ -z "$profile" ]; then
      say "examples: skipped: the examples are of 1, 2 or 4 H200s or one H100 ($gpus x $model here)"
      continue
    fi
    name=${kind}x$gpus
    mkdir -p "$OUT/examples/facts" "$OUT/examples/results"
    say "examples: $name probed only: examples/facts/$name.json"
    gpu-accept record -o "$OUT/examples/facts/$name.json" 2>&1 | tee -a "$log"
    if [ "$gpus" -ge 2 ] && enough 110 "a full standard run for examples/facts/$name-measured.json"; then
      say "examples: a full standard run against $profile: its facts and results become examples/facts/$name-measured.json and examples/results/$name.json"
      LINES_PER_RUN=40 run_suite example --profile "$profile"
      cp "$work/example/facts.json" "$OUT/examples/facts/$name-measured.json"
      cp "$work/example/results.json" "$OUT/examples/results/$name.json"
      cp "$work/example/report.html" "$OUT/report-example-$tag.html" 2>/dev/null
      say "the README's demo on the new facts, as CI runs it: exit 0, and no area not checked"
      gpu-accept run --profile "$profile" --facts "$OUT/examples/facts/$name-measured.json" --reports "$work/demo" > "$work/demo.out" 2>&1
      code=$?
      sed -n '/gpu-accept summary/,$p' "$work/demo.out" | grep -E "^(PASS|FAIL|COULD NOT JUDGE|not checked|partly checked)|passed|failed" | tee -a "$log"
      say "README demo on the re-recorded facts: exit $code"
    fi
    if [ "$gpus" -ge 4 ] && enough 100 "NCCL_P2P_DISABLE=1 for examples/results/$name-nccl-p2p-disabled.json"; then
      say "examples: NCCL_P2P_DISABLE=1 against $profile: examples/results/$name-nccl-p2p-disabled.json"
      NCCL_P2P_DISABLE=1 LINES_PER_RUN=40 run_suite example-nop2p --profile "$profile"
      cp "$work/example-nop2p/results.json" "$OUT/examples/results/$name-nccl-p2p-disabled.json"
    fi
    ;;
  run-time)
    if [ ! -f .prev/pyproject.toml ]; then
      say "run-time: skipped: no .prev/ (python bench/run_time.py prepare --ref REF, and carry .prev)"
      continue
    fi
    # the previous commit beside this one, with the same wheels (its own gpuaccept first on PYTHONPATH)
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
      --target /tmp/site-prev .prev >/dev/null || { say "run-time: the previous commit did not install"; continue; }
    compile_bytecode /tmp/site-prev
    allowed=${RUN_TIME_BUDGET_S:-$(( $(time_left) < 480 ? $(time_left) : 480 ))}
    say "run-time: this checkout beside commit $(cat .prev/REVISION 2>/dev/null || echo '?'), ${allowed}s"
    fitted=(); [ -f "$work/fitted.yaml" ] && fitted=(--profile "$work/fitted.yaml")
    python3 bench/run_time.py measure --previous-site /tmp/site-prev --out "$OUT" --tag "$tag" --budget-s "$allowed" \
      --quick-runs "${RUN_TIME_QUICK_RUNS:-2}" "${fitted[@]}" 2>&1 | tee -a "$log"
    ;;
  first-step)
    say "first-step: a DDP worker's first training step by part (bench/ddp_first_step.py)"
    python3 bench/ddp_first_step.py --processes "${FIRST_STEP_PROCESSES:-1,2,4,8}" --eager --out "$OUT/first-step-$tag.json" 2>&1 | tee -a "$log"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py-spy .whl/py_spy-*.whl 2>/dev/null
    if [ -x /tmp/py-spy/bin/py-spy ]; then
      say "first-step: one process under py-spy --native"
      CUDA_CACHE_PATH=$work/spy-cache /tmp/py-spy/bin/py-spy record --native --idle --rate 200 --format raw \
        -o "$OUT/first-step-$tag-native.txt" -- python3 bench/ddp_first_step.py --child 0 2>&1 | tail -3 | tee -a "$log"
    fi
    ;;
  copy-rounds)
    say "copy-rounds: copies between GPUs one at a time and in rounds (bench/copy_rounds.py)"
    bench_into copy-rounds bench/copy_rounds.py --rounds "${COPY_ROUNDS:-3}"
    ;;
  copy-setup)
    say "copy-setup: the copy stage's set-up by part, one GPU after another and a thread a GPU (bench/copy_setup.py)"
    bench_into copy-setup bench/copy_setup.py --rounds "${COPY_SETUP_ROUNDS:-3}"
    ;;
  host-size)
    say "host-size: each GPU's host copies of 1 GiB and of 256 MiB through the copy stage's code (bench/host_copy_size.py)"
    bench_into host-size bench/host_copy_size.py --rounds "${HOST_SIZE_ROUNDS:-3}"
    ;;
  driver-start)
    say "driver-start: sets of a rank a GPU setting up with the driver started at the go or before it (bench/driver_start.py)"
    bench_into driver-start bench/driver_start.py --rounds "${DRIVER_ROUNDS:-3}" --sets "${DRIVER_SETS:-3}"
    ;;
  context-visibility)
    say "context-visibility: a rank seeing every GPU against its own (bench/context_visibility.py)"
    bench_into context-visibility bench/context_visibility.py --rounds "${CONTEXT_ROUNDS:-2}"
    ;;
  context-creation)
    say "context-creation: sets of a rank a GPU setting up at once (bench/context_creation.py)"
    # CONTEXT_SETS unquoted: the counts of sets, one argument each
    bench_into context-creation bench/context_creation.py --rounds "${CONTEXT_ROUNDS:-2}" --sets ${CONTEXT_SETS:-1 2 3 4}
    ;;
  ddp-ab)
    if [ ! -f .prev/pyproject.toml ]; then say "ddp-ab: skipped: no .prev/"; continue; fi
    # a run's DDP numbers and results.json kept; a run that wrote none says why (its output's end)
    ab_kept() {
      if [ -f "$work/$1/results.json" ]; then
        ddp_numbers "$work/$1/results.json"; cp "$work/$1/results.json" "$OUT/$1.json"
      else
        say "$1: no results.json; its output ends:"; tail -5 "$work/$1.out" | tee -a "$log"; cp "$work/$1.out" "$OUT/"
      fi
    }
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
      --target /tmp/site-prev .prev >/dev/null || { say "ddp-ab: the previous commit did not install"; continue; }
    compile_bytecode /tmp/site-prev
    visible=$(seq -s, 0 $(( ${DDP_AB_GPUS:-2} - 1 )))
    # the shipped profile of that many GPUs (--profile auto would judge the machine as installed)
    model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    ab_profile=$(python3 -c 'import sys; sys.path.insert(0, "bench"); from run_time import profile_for; print(profile_for(sys.argv[1], int(sys.argv[2])) or "auto")' "$model" "${DDP_AB_GPUS:-2}")
    say "ddp-ab: GPUs $visible, this checkout beside commit $(cat .prev/REVISION 2>/dev/null || echo '?')"
    for round in 1 2 3; do
      enough 75 "ddp-ab this-$round" || break
      say "ab-this-$round"
      CUDA_VISIBLE_DEVICES=$visible GPU_ACCEPT="python3 -m gpuaccept" run_suite "ab-this-$round" --profile "$ab_profile"
      ab_kept "ab-this-$round"
      enough 75 "ddp-ab previous-$round" || break
      say "ab-previous-$round"
      CUDA_VISIBLE_DEVICES=$visible GPU_ACCEPT="python3 -m gpuaccept" PYTHONPATH=/tmp/site-prev:$PYTHONPATH run_suite "ab-previous-$round" --profile "$ab_profile"
      ab_kept "ab-previous-$round"
    done
    ;;
  *) say "unknown stage $stage" ;;
  esac
done
say "done"
