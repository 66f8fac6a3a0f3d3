#!/usr/bin/env bash
# Slurm burn-in: one job per node of a list, each running the full suite on its whole node, then
# one fleet report over every node's results.
#
#   ci/slurm-burnin.sh nodes.txt [PROFILE]      # nodes.txt: one hostname a line
#
# Results land in burnin-<date>/<node>/; when every job has ended, a last job writes
# burnin-<date>/fleet.xml (a JUnit testsuite per node) and lists the nodes far below the fleet median.
set -euo pipefail
nodes_file=${1:?usage: ci/slurm-burnin.sh nodes.txt [PROFILE]}
profile=${2:-auto}
out="burnin-$(date +%Y%m%d-%H%M)"
mkdir -p "$out"
jobs=()
while read -r node; do
  [ -z "$node" ] && continue
  case "$node" in \#*) continue ;; esac
  mkdir -p "$out/$node"
  job=$(sbatch --parsable --job-name="gpu-accept-$node" --nodelist="$node" --nodes=1 --exclusive \
        --time=01:00:00 --output="$out/$node/slurm-%j.log" \
        --export=ALL,NCCL_NVLS_ENABLE=0 \
        --wrap="gpu-accept run --profile $profile --reports $out/$node")
  jobs+=("$job")
  echo "$node: job $job"
done < "$nodes_file"
[ ${#jobs[@]} -gt 0 ] || { echo "no nodes in $nodes_file" >&2; exit 2; }
dependency=$(IFS=:; echo "afterany:${jobs[*]}")
sbatch --parsable --job-name=gpu-accept-fleet --dependency="$dependency" --time=00:10:00 \
       --output="$out/fleet-%j.log" \
       --wrap="gpu-accept report fleet $out/*/results.json -o $out/fleet.xml"
echo "fleet report: $out/fleet.xml once every node's job has ended"
