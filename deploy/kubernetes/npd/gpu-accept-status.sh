#!/bin/sh
# node-problem-detector custom plugin: the verdict of gpu-accept's last periodic check on this node.
# NPD's plugin protocol: exit 0 OK, 1 NonOK (the condition turns True), anything else Unknown; the
# first max_output_length (80) characters of stdout are the condition's message.
# It reads the status file the gpu-accept DaemonSet writes (periodic-health-check.sh): NPD gives a
# plugin seconds, the check itself takes about 8 s on an H100, so it runs beside NPD, not inside it.
status_file=${GPU_ACCEPT_STATUS:-/var/lib/gpu-accept/status}
max_age=${GPU_ACCEPT_MAX_AGE:-900}  # seconds: three missed checks at the default interval
OK=0
NONOK=1
UNKNOWN=2

say() { printf '%s\n' "$1" | cut -c1-80; }

if [ ! -r "$status_file" ]; then
  say "gpu-accept: no check has run on this node yet ($status_file)"
  exit $UNKNOWN
fi
age=$(( $(date +%s) - $(stat -c %Y "$status_file") ))
if [ "$age" -gt "$max_age" ]; then
  say "gpu-accept: last check ${age}s ago, older than ${max_age}s"
  exit $UNKNOWN
fi
read -r code line < "$status_file"
case "$code" in
  0) say "gpu-accept: quick check passed"; exit $OK ;;
  1) say "${line#gpu-accept health-check: FAIL: }"; exit $NONOK ;;
  *) say "gpu-accept: could not judge the node (exit $code)"; exit $UNKNOWN ;;
esac
