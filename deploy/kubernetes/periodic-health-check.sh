#!/bin/sh
# The gpu-accept DaemonSet's loop: the quick level every GPU_ACCEPT_INTERVAL seconds (default 300).
# Each check leaves, in GPU_ACCEPT_STATE (default /var/lib/gpu-accept):
#   health/            the reports of the last check (results.json, junit.xml, report.html)
#   status             one line: the exit code, then the check's last line (PASS, FAIL: test ids, ...),
#                      written whole (a temporary file renamed), read by node-problem-detector's plugin
# and, where GPU_ACCEPT_METRICS names a file in node_exporter's textfile directory, the metrics.
state=${GPU_ACCEPT_STATE:-/var/lib/gpu-accept}
interval=${GPU_ACCEPT_INTERVAL:-300}
mkdir -p "$state/health"
while :; do
  if [ -n "${GPU_ACCEPT_METRICS:-}" ]; then
    gpu-accept health-check --profile "${GPU_ACCEPT_PROFILE:-auto}" --reports "$state/health" \
      --metrics "$GPU_ACCEPT_METRICS" -q > "$state/last.out" 2>&1
  else
    gpu-accept health-check --profile "${GPU_ACCEPT_PROFILE:-auto}" --reports "$state/health" -q > "$state/last.out" 2>&1
  fi
  code=$?
  printf '%s %s\n' "$code" "$(tail -n 1 "$state/last.out")" > "$state/status.partial" && mv "$state/status.partial" "$state/status"
  [ "${GPU_ACCEPT_ONCE:-0}" = 1 ] && exit "$code"
  sleep "$interval"
done
