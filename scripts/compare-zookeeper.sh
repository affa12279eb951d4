#!/usr/bin/env bash
# fe-meta vs Apache ZooKeeper 3.8, side by side on this machine, in several sittings.
#
#   scripts/compare-zookeeper.sh
#
# Each sitting runs, one after the other (each waits for an idle machine before every workload):
#   1. $ANCHORS/limits/run.sh      the physical floor: fdatasync latency, loopback TCP round trip;
#      then scripts/tcp_fanin.c      the W3 ceiling: W3_SESSIONS closed-loop clients against 1 and
#                                    3 echo servers that do no work (limits/fanin.txt)
#   2. $ANCHORS/zookeeper/run.sh   ZooKeeper's W0..W5 (installs zookeeper from Debian if needed)
#   3. fe-meta bench               our W0..W5 (release build) on a fresh 3-node cluster
#   4. with BUSY_CORES > 0, both again with that many cores kept busy by a spinning loop: for
#      ZooKeeper a `while :; do :; done` shell loop per core around its whole run (its idle
#      gate then waits for QUIET_CORES + BUSY_CORES), for ours `fe-meta bench
#      --background-cores` during each measured phase (W1 and W3 only)
# Sittings alternate which system goes first (odd: ZooKeeper first, even: fe-meta first).
# Then scripts/sittings.py prints each sitting's side-by-side table and one table of the
# targets: each sitting, the median and the worst, and whether the worst meets the target; the
# floor is one fdatasync + two loopback round trips of the same sitting. The SVG of the W1 and
# W3 latency percentiles (`fe-meta bench --svg`) is drawn from the last sitting.
#
# Environment:
#   FE_META_ANCHORS  the anchors folder (README.md, limits/, zookeeper/, common/);
#                    default /work/shared/anchors, else ../shared/anchors next to the repo
#   ANCHOR_OUT       where raw results go (default /tmp/anchor-out); ours in $ANCHOR_OUT/fe-meta
#   WARM RUN TRIALS W5_TXNS W3_SESSIONS W2_OUTSTANDING   passed to both benches (defaults
#                    3 10 3 100000 32 1000); a quick look: RUN=3 TRIALS=1 W5_TXNS=20000
#   QUIET_CORES QUIET_MAX_WAIT   the idle-machine gate of both (defaults 0.15 cores, 180 s)
#   SITTINGS         how many sittings (default 3)
#   BUSY_CORES       cores kept busy in each sitting's busy pass (default 1; 0 skips the pass)
#   SKIP_LIMITS=1 / SKIP_ZK=1 / SKIP_OURS=1   leave that part out of every sitting
#   SVG_OUT          the SVG of W1/W3 latency percentiles (default $ANCHOR_OUT/latency-w1-w3.svg)
#   Results go to $ANCHOR_OUT/sittings-<UTC stamp>/s1, s2, ...; re-render them with
#   `python3 scripts/sittings.py $ANCHOR_OUT/sittings-<stamp>`.
#   CARGO_TARGET_DIR  where the release build goes (default <repo>/target)
#   FE_META_BIN      use this fe-meta binary instead of building one
# Everything runs on 127.0.0.1; each step is wrapped in `timeout`, and every spinning loop in
# `timeout` too (and is killed by PID when its pass ends). Do not build or test on the machine
# while it runs: both benches compare only on an idle machine.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ANCHORS=${FE_META_ANCHORS:-/work/shared/anchors}
[[ -d "$ANCHORS" ]] || ANCHORS="$REPO/../shared/anchors"
[[ -f "$ANCHORS/zookeeper/table.py" ]] || {
  echo "anchors not found (set FE_META_ANCHORS): $ANCHORS" >&2
  exit 2
}
export ANCHOR_OUT=${ANCHOR_OUT:-/tmp/anchor-out}
export WARM=${WARM:-3} RUN=${RUN:-10} TRIALS=${TRIALS:-3} W5_TXNS=${W5_TXNS:-100000}
export W3_SESSIONS=${W3_SESSIONS:-32} W2_OUTSTANDING=${W2_OUTSTANDING:-1000}
export QUIET_CORES=${QUIET_CORES:-0.15} QUIET_MAX_WAIT=${QUIET_MAX_WAIT:-180}
SITTINGS=${SITTINGS:-3} BUSY_CORES=${BUSY_CORES:-1}
ROOT_OUT=$ANCHOR_OUT
RUN_DIR=$ROOT_OUT/sittings-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$RUN_DIR"
log() { echo "[compare $(date +%T)] $*" >&2; }

if [[ -n "${FE_META_BIN:-}" ]]; then
  FE_META=$FE_META_BIN
else
  log "building fe-meta (release)"
  (cd "$REPO" && cargo build --release -q -p fe-meta-cli --bin fe-meta)
  FE_META="${CARGO_TARGET_DIR:-$REPO/target}/release/fe-meta"
fi

SPINNERS=()
stop_spinners() {
  local p
  for p in "${SPINNERS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${SPINNERS[@]}"; do wait "$p" 2>/dev/null || true; done
  SPINNERS=()
}
trap 'stop_spinners; bash "$ANCHORS/zookeeper/run.sh" stop >/dev/null 2>&1 || true' EXIT

run_zk() { # out-dir busy-cores
  local out=$1 busy=$2 i
  [[ -z "${SKIP_ZK:-}" ]] || return 0
  for ((i = 0; i < busy; i++)); do
    timeout 5400 bash -c 'while :; do :; done' &
    SPINNERS+=($!)
  done
  log "ZooKeeper ($busy busy core(s)) -> $out"
  ANCHOR_OUT=$out QUIET_CORES=$(awk -v q="$QUIET_CORES" -v b="$busy" 'BEGIN{print q + b}') \
    timeout 5400 bash "$ANCHORS/zookeeper/run.sh" >&2 || {
    stop_spinners
    bash "$ANCHORS/zookeeper/run.sh" stop || true
    log "ZooKeeper run failed"
    exit 1
  }
  stop_spinners
}

run_ours() { # out-dir busy-cores
  local out=$1 busy=$2 workloads=all
  [[ -z "${SKIP_OURS:-}" ]] || return 0
  ((busy == 0)) || workloads=W1,W3
  mkdir -p "$out/fe-meta"
  log "fe-meta bench ($busy busy core(s)) -> $out/fe-meta/raw.txt"
  timeout 5400 "$FE_META" bench --sittings 1 --workload "$workloads" --background-cores "$busy" \
    --warm "$WARM" --run "$RUN" --trials "$TRIALS" --w5-txns "$W5_TXNS" \
    --w3-sessions "$W3_SESSIONS" --w2-outstanding "$W2_OUTSTANDING" \
    --quiet-cores "$QUIET_CORES" --quiet-max-wait "$QUIET_MAX_WAIT" >"$out/fe-meta/raw.txt"
}

for ((s = 1; s <= SITTINGS; s++)); do
  SD=$RUN_DIR/s$s
  mkdir -p "$SD"
  log "sitting $s of $SITTINGS in $SD"
  if [[ -z "${SKIP_LIMITS:-}" ]]; then
    log "the floor: $ANCHORS/limits/run.sh"
    ANCHOR_OUT=$SD timeout 900 bash "$ANCHORS/limits/run.sh" >&2
    log "the W3 ceiling: scripts/tcp_fanin.c"
    mkdir -p "$SD/limits/build"
    gcc -O2 -Wall -pthread -o "$SD/limits/build/tcp_fanin" "$REPO/scripts/tcp_fanin.c"
    for servers in 1 3; do
      timeout 60 "$SD/limits/build/tcp_fanin" "$servers" "$W3_SESSIONS" 5 128
    done | tee "$SD/limits/fanin.txt" >&2
  fi
  passes=(0)
  ((BUSY_CORES == 0)) || passes+=("$BUSY_CORES")
  for busy in "${passes[@]}"; do
    out=$SD
    ((busy == 0)) || out=$SD/busy
    if ((s % 2 == 1)); then
      run_zk "$out" "$busy"
      run_ours "$out" "$busy"
    else
      run_ours "$out" "$busy"
      run_zk "$out" "$busy"
    fi
  done
done

python3 "$REPO/scripts/sittings.py" --anchors "$ANCHORS" "$RUN_DIR"
LAST=$RUN_DIR/s$SITTINGS
ZK_RAW=$(ls -t "$LAST"/zookeeper/results/raw-*.txt 2>/dev/null | head -1 || true)
if [[ -f "$LAST/fe-meta/raw.txt" ]]; then
  SVG_OUT=${SVG_OUT:-$ROOT_OUT/latency-w1-w3.svg}
  if [[ -n "$ZK_RAW" ]]; then
    "$FE_META" bench --results "$LAST/fe-meta/raw.txt" --zookeeper-results "$ZK_RAW" --svg "$SVG_OUT"
  else
    "$FE_META" bench --results "$LAST/fe-meta/raw.txt" --svg "$SVG_OUT"
  fi
  echo
  echo "W1/W3 latency percentiles of the last sitting, fe-meta and ZooKeeper: $SVG_OUT"
fi
echo "all results: $RUN_DIR (re-render: python3 scripts/sittings.py $RUN_DIR)"
