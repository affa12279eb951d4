#!/usr/bin/env bash
# Wait (at most SECS seconds, default 30) until a node's admin port answers /ready with 200;
# prints how long it took, or the last /ready answer and exits 1.
#
#   scripts/ops-demo/wait-ready.sh http://HOST:9930 [SECS]
set -u
url=${1:?admin URL}
secs=${2:-30}
start=$(date +%s%N)
for _ in $(seq 1 $(( secs * 5 ))); do
  if curl -sf -o /dev/null "$url/ready"; then
    echo "ready after $(( ($(date +%s%N) - start) / 1000000 )) ms"
    exit 0
  fi
  sleep 0.2
done
echo "not ready after ${secs} s: $(curl -s "$url/ready")"
exit 1
