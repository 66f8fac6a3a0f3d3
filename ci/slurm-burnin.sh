#!/usr/bin/env bash
# Slurm burn-in: per node of a list, one job running the full suite on its whole node, then one
# running `gpu-accept burn-in` for DURATION; then one fleet report over every node's results.
#
#   ci/slurm-burnin.sh nodes.txt [PROFILE] [DURATION]   # nodes.txt: one hostname a line; DURATION 30m, 2h ...
#
# Results land in burnin-<date>/<node>/ (the acceptance run) and burnin-<date>/<node>/burnin/ (the
# burn-in: telemetry plots in its report.html); when every job has ended, a last job writes
# burnin-<date>/fleet.xml of the acceptance runs and burnin-<date>/burnin-fleet.xml of the burn-ins (a
# JUnit test case per node, and one per value far below the fleet median), and lists those nodes. A fleet
# report judges each node by its latest run: the two levels are reported apart, so that a burn-in that
# passed never hides a failed acceptance run of its node; the job fails where either report does. The burn-in job's limit is BURNIN_TIME (default 04:00:00); Slurm sends it SIGTERM 2 minutes
# before (--signal=B:TERM@120), which ends the burn-in with what ran judged and its reports written.
# NCCL's settings pass through from the submitting shell (--export=ALL): NVLink SHARP stays on where the
# nodes have it. Where multicast must stay off, export NCCL_NVLS_ENABLE=0 before running this (docs/nvls.md).
set -euo pipefail
nodes_file=${1:?usage: ci/slurm-burnin.sh nodes.txt [PROFILE]}
profile=${2:-auto}
duration=${3:-30m}
out="burnin-$(date +%Y%m%d-%H%M)"
mkdir -p "$out"
jobs=()
while read -r node; do
  [ -z "$node" ] && continue
  case "$node" in \#*) continue ;; esac
  mkdir -p "$out/$node"
  job=$(sbatch --parsable --job-name="gpu-accept-$node" --nodelist="$node" --nodes=1 --exclusive \
        --time=01:00:00 --output="$out/$node/slurm-%j.log" \
        --export=ALL \
        --wrap="gpu-accept run --profile $profile --reports $out/$node")
  jobs+=("$job")
  echo "$node: job $job"
  # exec: gpu-accept is the batch shell itself, so that Slurm's SIGTERM reaches it
  burn=$(sbatch --parsable --job-name="gpu-accept-burnin-$node" --nodelist="$node" --nodes=1 --exclusive \
        --dependency="afterany:$job" --time="${BURNIN_TIME:-04:00:00}" --signal=B:TERM@120 \
        --output="$out/$node/burnin-slurm-%j.log" \
        --export=ALL \
        --wrap="exec gpu-accept burn-in --duration $duration --profile $profile --reports $out/$node/burnin")
  jobs+=("$burn")
  echo "$node: burn-in job $burn ($duration)"
done < "$nodes_file"
[ ${#jobs[@]} -gt 0 ] || { echo "no nodes in $nodes_file" >&2; exit 2; }
dependency=$(IFS=:; echo "afterany:${jobs[*]}")
sbatch --parsable --job-name=gpu-accept-fleet --dependency="$dependency" --time=00:10:00 \
       --output="$out/fleet-%j.log" \
       --wrap="gpu-accept report fleet $out/*/results.json -o $out/fleet.xml; a=\$?; \
gpu-accept report fleet $out/*/burnin/results.json -o $out/burnin-fleet.xml; b=\$?; exit \$(( a == 1 || b == 1 ? 1 : a | b ))"
echo "fleet reports: $out/fleet.xml and $out/burnin-fleet.xml once every node's job has ended"
