#!/bin/bash
# gpu-accept's quick level (no load) as Slurm runs a node check: HealthCheckProgram, Prolog or Epilog.
#
#   slurm.conf:  HealthCheckProgram=/usr/local/sbin/gpu-accept-health.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=IDLE          # only between jobs: the check reads the GPUs, loads nothing
#                Prolog=/usr/local/sbin/gpu-accept-health.sh   (or Epilog=; or both)
#
# A node whose check fails (exit 1) is drained with the failing test ids as the reason:
#   scontrol update nodename=$SLURMD_NODENAME state=drain reason="test_gpu_model[gpu3] ... (gpu-accept exit 1, ...)"
# and one that could not be judged (exit 2) with why: "could not judge: no NVIDIA driver found: ...".
# Nothing is ever resumed: an operator does that (scontrol update nodename=N state=resume).
#
# slurmd starts this program with SLURMD_NODENAME alone in its environment (a prolog or epilog with
# SLURM_* alone): no PATH, no HOME. The PATH below finds gpu-accept where pip installs it; a venv is
# named by GPU_ACCEPT in the defaults file. A check that cannot run (gpu-accept not found, not
# executable, killed, past its time) could not judge the node: it is drained saying so (unless
# GPU_ACCEPT_ON_ERROR=none), and the exit status is 2, never 0.
#
# Slurm kills a HealthCheckProgram after 60 s; the check is given GPU_ACCEPT_TIMEOUT (45 s; about 8 s
# on an H100). It prints one line (slurmd logs a failed program's output); pytest's own output goes
# to health-check.log in the reports folder, the verdict to verdict.json there.
# Exit status: the verdict, 0 passed, 1 a check failed, 2 could not judge. Slurm drains a node whose
# prolog or epilog fails, and requeues the job of a failed prolog; a HealthCheckProgram's exit status
# is only logged by slurmd ("health_check failed: rc:1 output:...").
#
# Settings, from the environment, or from the defaults file where present: GPU_ACCEPT_DEFAULTS
# (default /etc/default/gpu-accept), lines of VAR=value, each exported to the check:
#   GPU_ACCEPT_PROFILE   profile name or YAML path (default auto)
#   GPU_ACCEPT_REPORTS   where the reports of the last check are kept (default /var/lib/gpu-accept/health)
#   GPU_ACCEPT_METRICS   a .prom file in node_exporter's textfile directory (default: none written)
#   GPU_ACCEPT_ON_ERROR  drain | none: also drain a node that could not be judged (no driver, a hung probe)
#                        (default drain: a GPU node without a working driver takes no GPU job)
#   GPU_ACCEPT_TIMEOUT   seconds (default 45)
#   GPU_ACCEPT           the gpu-accept command (default: gpu-accept on PATH)
#   SLURM_CONF           where scontrol reads slurm.conf, where that is not its built-in path
set -u
# the caller's PATH (bash's own default where slurmd gave none), without '.' and empty entries, then
# the system's folders, /usr/local/bin among them (pip's, which NHC's PATH lacks)
searched=""
IFS=: read -r -a given <<< "${PATH:-}"
for folder in "${given[@]}"; do case "$folder" in ""|.) ;; *) searched="$searched$folder:" ;; esac; done
export PATH="${searched}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
defaults=${GPU_ACCEPT_DEFAULTS:-/etc/default/gpu-accept}
if [ -r "$defaults" ]; then
  set -a
  . "$defaults"
  set +a
fi
profile=${GPU_ACCEPT_PROFILE:-auto}
reports=${GPU_ACCEPT_REPORTS:-/var/lib/gpu-accept/health}
on_error=${GPU_ACCEPT_ON_ERROR:-drain}
limit=${GPU_ACCEPT_TIMEOUT:-45}
command=${GPU_ACCEPT:-gpu-accept}
node=${SLURMD_NODENAME:-$(hostname -s)}
metrics=()
[ -n "${GPU_ACCEPT_METRICS:-}" ] && metrics=(--metrics "$GPU_ACCEPT_METRICS")

say() { printf 'gpu-accept-health: %s\n' "$1"; }  # one line: what slurmd logs of this program
finish() { exit "$1"; }  # the verdict, 0, 1 or 2, as this program's exit status

# one plain Slurm node name: scontrol reads brackets, commas and spaces as a list of nodes to drain
if ! [[ "$node" =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]]; then
  say "could not judge: the node name $(printf '%q' "$node") is not one plain Slurm node name: nothing drained"
  finish 2
fi
case "$on_error" in drain|none) ;; *) say "could not judge: GPU_ACCEPT_ON_ERROR=$(printf '%q' "$on_error") is neither drain nor none"; finish 2 ;; esac
if ! [[ "$limit" =~ ^[0-9]+$ ]] || [ "$limit" -lt 1 ]; then
  say "could not judge: GPU_ACCEPT_TIMEOUT=$(printf '%q' "$limit") is not a number of seconds"
  finish 2
fi

began=$SECONDS
output=$(timeout --kill-after=5 "$limit" "$command" health-check --profile "$profile" --reports "$reports" \
  --node "$node" --on-fail drain --on-error "$on_error" "${metrics[@]}" -q 2>&1 < /dev/null)
status=$?
case "$status" in
  0|1|2)
    # gpu-accept's own line: the verdict and what it drained
    last=$(printf '%s\n' "$output" | grep -v '^[[:space:]]*$' | tail -n 1)
    printf '%s\n' "${last:-gpu-accept exited $status and printed nothing}"
    finish "$status" ;;
  124) why="health check did not finish within ${limit} s (exit $status)" ;;
  126) why="gpu-accept could not be run: $(printf '%q' "$command") is not executable (exit 126)" ;;
  127) why="gpu-accept not found: $(printf '%q' "$command") on PATH=$(printf '%q' "$PATH") (exit 127)" ;;
  *) if [ "$status" -eq 137 ] && [ $((SECONDS - began)) -ge "$limit" ]; then  # timeout's KILL after --kill-after
       why="health check did not finish within ${limit} s (exit $status)"
     elif [ "$status" -gt 128 ]; then
       why="gpu-accept was killed by signal $((status - 128))"
     else
       why="gpu-accept exited $status"
     fi ;;
esac
# the check itself could not run or was stopped: gpu-accept could not drain, so this program does
reason="could not judge: $why (gpu-accept-health)"
if [ "$on_error" = drain ]; then
  if said=$(timeout 30 scontrol update nodename="$node" state=drain reason="$reason" 2>&1); then
    say "$reason [drained $node]"
  else
    say "$reason [could not drain $node: $(printf '%s' "$said" | tail -n 1 | tr -d '\000-\037\177')]"
  fi
else
  say "$reason"
fi
finish 2
