#!/bin/sh
# node-problem-detector custom plugin: the verdict of gpu-accept's last periodic check on this node.
# NPD's plugin protocol: exit 0 OK (condition False), 1 NonOK (True), anything else Unknown; the
# first max_output_length (80) bytes of stdout are the condition's message.
# It reads the status file the gpu-accept DaemonSet writes (periodic-health-check.sh): one line, the
# exit code of the last check, then its failing tests or its cause. NPD gives a plugin seconds, the
# check itself takes about 8 s on an H100, so it runs beside NPD, not inside it.
# A check that could not judge (exit 2) is Unknown with its cause as the message; so are a node where
# no check has run yet and one whose last check is older than GPU_ACCEPT_MAX_AGE.
status_file=${GPU_ACCEPT_STATUS:-/var/lib/gpu-accept/status}
max_age=${GPU_ACCEPT_MAX_AGE:-900}  # seconds: three missed checks at the default interval
OK=0
NONOK=1
UNKNOWN=2

# printable ASCII only (escape sequences and anything else a file may hold are dropped), cut to 80
say() { printf '%s\n' "$1" | LC_ALL=C tr -cd ' -~\n' | head -n 1 | cut -c1-80; }

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
  1) say "$line"; exit $NONOK ;;
  2) say "$line"; exit $UNKNOWN ;;
  *) say "gpu-accept: $status_file holds no verdict"; exit $UNKNOWN ;;
esac
