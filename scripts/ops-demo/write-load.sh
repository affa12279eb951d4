#!/usr/bin/env bash
# A bounded client write load for the procedures of docs/OPERATIONS.md: COUNT `fe-meta set-var`
# writes, one CLI process each, through every endpoint of $FE_META_SERVER (the CLI moves to the
# next endpoint when a connection fails). Stops early when the file STOP_FILE appears. Prints one
# line per failed write and, at the end, how many writes ended with each exit status.
#
#   FE_META_SERVER=a:9630,b:9630,c:9630 scripts/ops-demo/write-load.sh COUNT PREFIX [STOP_FILE]
set -u
count=${1:?COUNT}
prefix=${2:?PREFIX}
stop_file=${3:-/nonexistent}
declare -A tally=()
written=0
for i in $(seq 1 "$count"); do
  [ -e "$stop_file" ] && break
  err=$(fe-meta set-var "$prefix$i" "$i" 2>&1 >/dev/null)
  rc=$?
  tally[$rc]=$(( ${tally[$rc]:-0} + 1 ))
  written=$i
  [ "$rc" -ne 0 ] && echo "$(date -u +%T.%3N) write $prefix$i: exit $rc: $err"
done
summary="writes=$written"
for rc in $(printf '%s\n' "${!tally[@]}" | sort -n); do summary+=" exit$rc=${tally[$rc]}"; done
echo "$summary"
