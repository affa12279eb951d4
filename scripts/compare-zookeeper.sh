#!/usr/bin/env bash
# fe-meta vs Apache ZooKeeper 3.8, side by side, measured in one sitting on this machine.
#
#   scripts/compare-zookeeper.sh
#
# Runs, one after the other (each waits for an idle machine before every workload):
#   1. $ANCHORS/limits/run.sh      the physical floor: fdatasync latency, loopback TCP round trip
#   2. $ANCHORS/zookeeper/run.sh   ZooKeeper's W0..W5 (installs zookeeper from Debian if needed)
#   3. fe-meta bench               our W0..W5 (release build) on a fresh 3-node cluster
# and prints both tables side by side with ratios (ours / theirs) per figure, and the floor
# (one fdatasync + two loopback round trips: the least a replicated durable write can cost),
# and draws the W1 and W3 latency percentiles of both as an SVG (`fe-meta bench --svg`).
#
# Environment:
#   FE_META_ANCHORS  the anchors folder (README.md, limits/, zookeeper/, common/);
#                    default /work/shared/anchors, else ../shared/anchors next to the repo
#   ANCHOR_OUT       where raw results go (default /tmp/anchor-out); ours in $ANCHOR_OUT/fe-meta
#   WARM RUN TRIALS W5_TXNS W3_SESSIONS W2_OUTSTANDING   passed to both benches (defaults
#                    3 10 3 100000 32 1000); a quick look: RUN=3 TRIALS=1 W5_TXNS=20000
#   QUIET_CORES QUIET_MAX_WAIT   the idle-machine gate of both (defaults 0.15 cores, 180 s)
#   SKIP_LIMITS=1 / SKIP_ZK=1 / SKIP_OURS=1   reuse the newest earlier result of that part
#   SVG_OUT          the SVG of W1/W3 latency percentiles (default $ANCHOR_OUT/latency-w1-w3.svg)
#   CARGO_TARGET_DIR  where the release build goes (default <repo>/target)
#   FE_META_BIN      use this fe-meta binary instead of building one
# Everything runs on 127.0.0.1; each step is wrapped in `timeout`. Do not build or test on the
# machine while it runs: both benches compare only on an idle machine.
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
OURS_DIR=$ANCHOR_OUT/fe-meta
mkdir -p "$OURS_DIR"
log() { echo "[compare $(date +%T)] $*" >&2; }

if [[ -n "${FE_META_BIN:-}" ]]; then
  FE_META=$FE_META_BIN
else
  log "building fe-meta (release)"
  (cd "$REPO" && cargo build --release -q -p fe-meta-cli --bin fe-meta)
  FE_META="${CARGO_TARGET_DIR:-$REPO/target}/release/fe-meta"
fi

if [[ -z "${SKIP_LIMITS:-}" ]]; then
  log "1/3 the floor: $ANCHORS/limits/run.sh"
  timeout 900 bash "$ANCHORS/limits/run.sh" >&2
fi
if [[ -z "${SKIP_ZK:-}" ]]; then
  log "2/3 ZooKeeper: $ANCHORS/zookeeper/run.sh (WARM=$WARM RUN=$RUN TRIALS=$TRIALS W5_TXNS=$W5_TXNS)"
  timeout 5400 bash "$ANCHORS/zookeeper/run.sh" >&2 || {
    bash "$ANCHORS/zookeeper/run.sh" stop || true
    log "ZooKeeper run failed"
    exit 1
  }
fi
if [[ -z "${SKIP_OURS:-}" ]]; then
  OURS="$OURS_DIR/raw-$(date -u +%Y%m%dT%H%M%SZ).txt"
  log "3/3 fe-meta bench -> $OURS"
  timeout 5400 "$FE_META" bench --warm "$WARM" --run "$RUN" --trials "$TRIALS" --w5-txns "$W5_TXNS" \
    --w3-sessions "$W3_SESSIONS" --w2-outstanding "$W2_OUTSTANDING" \
    --quiet-cores "$QUIET_CORES" --quiet-max-wait "$QUIET_MAX_WAIT" >"$OURS"
fi

ZK_RAW=$(ls -t "$ANCHOR_OUT"/zookeeper/results/raw-*.txt 2>/dev/null | head -1 || true)
OURS_RAW=$(ls -t "$OURS_DIR"/raw-*.txt 2>/dev/null | head -1 || true)
LIMITS="$ANCHOR_OUT/limits/results.txt"
[[ -n "$ZK_RAW" && -n "$OURS_RAW" ]] || {
  echo "missing results: zookeeper='$ZK_RAW' fe-meta='$OURS_RAW'" >&2
  exit 1
}
log "comparing $OURS_RAW with $ZK_RAW"
python3 - "$ANCHORS/zookeeper/table.py" "$OURS_RAW" "$ZK_RAW" "$LIMITS" <<'PY'
import importlib.util, re, sys

spec = importlib.util.spec_from_file_location("table", sys.argv[1])
table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(table)
ours, _ = table.parse(sys.argv[2])
zk, _ = table.parse(sys.argv[3])


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def ratio(a, b):
    a, b = num(a), num(b)
    return f"{a / b:.2f}x" if a is not None and b else "-"


def find(rows, **kv):
    for r in rows:
        if all(r.get(k) == v for k, v in kv.items()):
            return r
    return None


print(f"\n## fe-meta / ZooKeeper 3.8, one sitting\nours: {sys.argv[2]}\ntheirs: {sys.argv[3]}\n")
print("| workload | setup | figure | fe-meta | ZooKeeper | ours / theirs |")
print("|---|---|---|---:|---:|---:|")
figs = [("ops_per_s", "ops/s"), ("p50_us", "p50 µs"), ("p99_us", "p99 µs"), ("p999_us", "p99.9 µs"),
        ("server_cpu_us_per_op", "server CPU µs/op"), ("server_cores", "server cores")]
for w, label in [("W0", "ens-leader"), ("W1", "ens-leader"), ("W1", "ens-follower"), ("W2", "ens-leader"),
                 ("W3", "ens-spread"), ("W3", "ens-leader")]:
    a, b = find(ours, workload=w, label=label), find(zk, workload=w, label=label)
    if not a and not b:
        continue
    for k, name in figs:
        va, vb = (a or {}).get(k, "-"), (b or {}).get(k, "-")
        print(f"| {w} | {label} | {name} | {va} | {vb} | {ratio(va, vb)} |")
a = next((r for r in ours if r.get("workload") == "W4" and "summary" in r), {})
b = next((r for r in zk if r.get("workload") == "W4" and "summary" in r), {})
for k, name in [("mean_new_leader_ms", "new leader reported ms (mean)"),
                ("mean_fresh_client_first_write_ms", "fresh client first write ms (mean)"),
                ("mean_unavail_ms", "existing client unavailable ms (mean)"),
                ("max_unavail_ms", "existing client unavailable ms (max)")]:
    print(f"| W4 | ens | {name} | {a.get(k, '-')} | {b.get(k, '-')} | {ratio(a.get(k), b.get(k))} |")
for label in ("ens-set", "ens-create"):
    a, b = find(ours, workload="W5", label=label) or {}, find(zk, workload="W5", label=label) or {}
    for k, name in [("restart_to_serving_ms", "restart -> serving ms"),
                    ("restart_to_caught_up_ms", "restart -> caught up ms")]:
        print(f"| W5 | {label} ({a.get('txns', b.get('txns', '?'))} txns) | {name} | {a.get(k, '-')} | "
              f"{b.get(k, '-')} | {ratio(a.get(k), b.get(k))} |")
    sa, sb = find(ours, workload="W5-sync", label=label) or {}, find(zk, workload="W5-sync", label=label) or {}
    print(f"| W5 | {label} | how synced | {sa.get('info', '-')} | {sb.get('info', '-').strip()[:60]} | |")

try:
    text = open(sys.argv[4]).read()
except OSError:
    text = ""
p50 = lambda pat: (re.search(pat + r".*? p50=([0-9.]+)", text) or [None, None])[1]
fa, fp, rtt = p50(r"^append 4096 "), p50(r"(?m)^prealloc 4096 "), p50(r"(?m)^tcp_rtt pin=none ")
fa = fa or p50(r"(?m)^append 4096 ")
if fa and rtt:
    print(f"\nfloor ({sys.argv[4]}): fdatasync 4 KiB p50 {fa} µs appending, {fp} µs overwriting; "
          f"loopback RTT p50 {rtt} µs (pin=none)")
    for name, f in (("appending", fa), ("overwriting", fp)):
        if f:
            print(f"  one fdatasync ({name}) + two round trips = {float(f) + 2 * float(rtt):.0f} µs")
    w1 = find(ours, workload="W1", label="ens-leader")
    if w1 and num(w1.get("p50_us")):
        print(f"  fe-meta W1 p50 on the leader = {w1['p50_us']} µs = "
              f"{float(w1['p50_us']) / (float(fa) + 2 * float(rtt)):.2f}x the floor (appending)")
else:
    print(f"\nfloor: no limits results in {sys.argv[4]}")
PY
echo
echo "## fe-meta, rendered by the anchors' table.py"
python3 "$ANCHORS/zookeeper/table.py" "$OURS_RAW"
SVG_OUT=${SVG_OUT:-$ANCHOR_OUT/latency-w1-w3.svg}
"$FE_META" bench --results "$OURS_RAW" --zookeeper-results "$ZK_RAW" --svg "$SVG_OUT"
echo
echo "W1/W3 latency percentiles, fe-meta and ZooKeeper: $SVG_OUT"
