#!/usr/bin/env bash
# gpu-accept's quick level (no load) as Slurm runs a node check: HealthCheckProgram, Prolog or Epilog.
#
#   slurm.conf:  HealthCheckProgram=/usr/local/sbin/gpu-accept-health.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=IDLE          # only between jobs: the check reads the GPUs, loads nothing
#                Prolog=/usr/local/sbin/gpu-accept-health.sh   (or Epilog=; or both)
#
# A node whose check fails (exit 1) is drained with the failing test ids as the reason:
#   scontrol update nodename=$SLURMD_NODENAME state=drain reason="gpu-accept: test_gpu_model[gpu3] ..."
# Nothing is ever resumed: an operator does that (scontrol update nodename=N state=resume).
# Slurm kills a HealthCheckProgram after 60 s; the check is given GPU_ACCEPT_TIMEOUT (45 s; about 8 s
# on an H100) and a check that runs past it counts as "could not judge".
# Exit status: in a prolog or epilog (SLURM_JOB_ID is set) the verdict, 0, 1 or 2: Slurm drains a node
# whose prolog or epilog fails, and requeues the job of a failed prolog. As HealthCheckProgram, 0 once
# the node is drained or left alone: there the drain is the action, and a slurmd that runs the program
# at start until it exits 0 must not be kept from registering a node that is drained already.
#
# Settings, from the environment (slurmd's, or /etc/default/gpu-accept where present):
#   GPU_ACCEPT_PROFILE   profile name or YAML path (default auto)
#   GPU_ACCEPT_REPORTS   where the reports of the last check are kept (default /var/lib/gpu-accept/health)
#   GPU_ACCEPT_METRICS   a .prom file in node_exporter's textfile directory (default: none written)
#   GPU_ACCEPT_ON_ERROR  drain | none: also drain a node that could not be judged (no driver, a hung probe)
#                        (default drain: a GPU node without a working driver takes no GPU job)
#   GPU_ACCEPT_TIMEOUT   seconds (default 45)
#   GPU_ACCEPT           the gpu-accept command (default: gpu-accept on PATH)
set -u
[ -r /etc/default/gpu-accept ] && . /etc/default/gpu-accept
profile=${GPU_ACCEPT_PROFILE:-auto}
reports=${GPU_ACCEPT_REPORTS:-/var/lib/gpu-accept/health}
on_error=${GPU_ACCEPT_ON_ERROR:-drain}
limit=${GPU_ACCEPT_TIMEOUT:-45}
node=${SLURMD_NODENAME:-$(hostname -s)}
metrics=()
[ -n "${GPU_ACCEPT_METRICS:-}" ] && metrics=(--metrics "$GPU_ACCEPT_METRICS")

timeout --kill-after=5 "$limit" ${GPU_ACCEPT:-gpu-accept} health-check --profile "$profile" --reports "$reports" \
  --node "$node" --on-fail drain --on-error "$on_error" "${metrics[@]}" -q
status=$?
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  # the check itself was stopped: gpu-accept could not drain, so this script does
  if [ "$on_error" = drain ]; then
    scontrol update nodename="$node" state=drain reason="gpu-accept: health check did not finish within ${limit} s"
  fi
  status=2
fi
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
exit "$status"
