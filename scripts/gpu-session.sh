#!/usr/bin/env bash
# Run on a lent GPU machine (no network): install the carried wheels, then verify gpu-accept
# there. Everything worth keeping is written to $OUT (the only thing that comes back).
#
#   scripts/gpu-session.sh foundation TAG   record facts, run the suites with --profile auto,
#                                           and the fault drills that need several GPUs
set -uo pipefail
stage=${1:?stage}; tag=${2:?tag}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
log="$OUT/log-$tag.txt"
say() { echo "=== $*" | tee -a "$log"; }

say "machine"
{ nvidia-smi; nvidia-smi topo -m; python3 -c 'import torch, pynvml; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "devices", torch.cuda.device_count())'; } >>"$log" 2>&1

case "$stage" in
foundation)
  say "record"
  gpu-accept record -o "$OUT/facts-$tag.json" --nvml-log "$OUT/nvml-$tag.json" 2>&1 | tee -a "$log"
  say "run --profile auto"
  gpu-accept run --reports /tmp/reports-auto -q 2>&1 | tail -25 | tee -a "$log"
  echo "exit code: ${PIPESTATUS[0]}" | tee -a "$log"
  cp /tmp/reports-auto/junit.xml "$OUT/junit-$tag.xml" 2>/dev/null
  gpus=$(nvidia-smi -L | wc -l)
  if [ "$gpus" -ge 4 ]; then
    say "run --profile h100-8-nvswitch (the wrong profile: must fail naming what differs)"
    gpu-accept run --profile h100-8-nvswitch --reports /tmp/reports-wrong -q 2>&1 | grep -E "^FAILED|passed|failed" | head -60 | tee -a "$log"
    echo "exit code: ${PIPESTATUS[0]}" | tee -a "$log"
    say "CUDA_VISIBLE_DEVICES=0,1,2 run --profile h200-4-nvswitch (must fail the count and gpu3 tests)"
    CUDA_VISIBLE_DEVICES=0,1,2 gpu-accept run --profile h200-4-nvswitch --reports /tmp/reports-three -q 2>&1 | grep -E "^FAILED|passed|failed" | head -40 | tee -a "$log"
    echo "exit code: ${PIPESTATUS[0]}" | tee -a "$log"
  fi
  ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
