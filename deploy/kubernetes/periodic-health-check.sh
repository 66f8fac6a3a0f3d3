#!/bin/sh
# The gpu-accept DaemonSet's loop: the quick level every GPU_ACCEPT_INTERVAL seconds (default 300).
# Each check leaves, in GPU_ACCEPT_STATE (default /var/lib/gpu-accept):
#   health/            the reports of the last check (results.json, junit.xml, report.html, verdict.json,
#                      health-check.log); verdict.json says "in progress" while a check runs
#   status             one line of printable ASCII, read by node-problem-detector's plugin: the exit code
#                      (0 passed, 1 a check failed, 2 could not judge), then the failing tests or the
#                      cause, at most 80 characters (`gpu-accept report verdict`), written whole (renamed)
# and, where GPU_ACCEPT_METRICS names a file in node_exporter's textfile directory, the metrics.
state=${GPU_ACCEPT_STATE:-/var/lib/gpu-accept}
interval=${GPU_ACCEPT_INTERVAL:-300}
mkdir -p "$state/health"
while :; do
  if [ -n "${GPU_ACCEPT_METRICS:-}" ]; then
    set -- --metrics "$GPU_ACCEPT_METRICS"
  else
    set --
  fi
  rm -f "$state/health/verdict.json"  # the status below is this check's verdict, never an earlier one's
  gpu-accept health-check --profile "${GPU_ACCEPT_PROFILE:-auto}" --reports "$state/health" "$@" -q > "$state/last.out" 2>&1
  code=$?
  if ! gpu-accept report verdict "$state/health/verdict.json" --width 80 > "$state/status.partial" 2>/dev/null; then
    # no verdict: the check could not start (refused options, gpu-accept missing or killed)
    printf '2 could not judge: gpu-accept health-check exited %s and wrote no verdict: %s\n' "$code" \
      "$(tail -n 1 "$state/last.out" | LC_ALL=C tr -cd ' -~')" | cut -c1-82 > "$state/status.partial"
  fi
  mv "$state/status.partial" "$state/status"
  [ "${GPU_ACCEPT_ONCE:-0}" = 1 ] && exit "$code"
  sleep "$interval"
done
