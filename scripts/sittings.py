#!/usr/bin/env python3
"""fe-meta vs ZooKeeper 3.8 over several sittings: the report of scripts/compare-zookeeper.sh.

    python3 scripts/sittings.py [--anchors DIR] SITTINGS_DIR

SITTINGS_DIR holds one folder per sitting (s1, s2, ...), each written by compare-zookeeper.sh:
    limits/results.txt                        the floor (anchors' limits/run.sh)
    limits/fanin.txt                          the W3 ceiling (scripts/tcp_fanin.c: echo servers)
    zookeeper/results/raw-*.txt               ZooKeeper's RESULT lines (anchors' zookeeper/run.sh)
    fe-meta/raw.txt                           ours (fe-meta bench --sittings 1)
    busy/zookeeper/results/raw-*.txt, busy/fe-meta/raw.txt   the same with a busy core
Prints, per sitting, the side-by-side table, then one table of the target figures: each
sitting's value, the median, the worst, and whether the worst meets the target (a target must
hold in every sitting). RESULT lines are read with the anchors' zookeeper/table.py parser.
"""
import argparse
import glob
import importlib.util
import os
import re
import statistics
import sys


def load_parser(anchors):
    path = os.path.join(anchors, "zookeeper", "table.py")
    spec = importlib.util.spec_from_file_location("table", path)
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    return table.parse


def num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def find(rows, **kv):
    for r in rows:
        if all(r.get(k) == v for k, v in kv.items()):
            return r
    return None


def newest(pattern):
    files = sorted(glob.glob(pattern), key=os.path.getmtime)
    return files[-1] if files else None


def read_rows(parse, path):
    if not path or not os.path.exists(path):
        return []
    return parse(path)[0]


def floor(path):
    """(fdatasync appending p50, overwriting p50, loopback RTT p50) in µs, or Nones."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None, None, None

    def p50(pat):
        m = re.search(r"(?m)" + pat + r".*? p50=([0-9.]+)", text)
        return float(m.group(1)) if m else None

    return p50(r"^append 4096 "), p50(r"^prealloc 4096 "), p50(r"^tcp_rtt pin=none ")


def ceiling(path):
    """{servers: ops/s} of the W3 ceiling (tcp_fanin lines), or {}."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        kv = dict(t.partition("=")[::2] for t in line.split()[1:]) if line.startswith("fanin ") else {}
        servers, ops = num(kv.get("servers")), num(kv.get("ops_per_s"))
        if servers is not None and ops is not None:
            out[int(servers)] = ops
    return out


# The echo servers standing for each W3 setup in the ceiling: 3 for the spread, 1 for the leader.
CEILING_SERVERS = {"ens-spread": 3, "ens-leader": 1}


class Sitting:
    """The results of one sitting."""

    def __init__(self, parse, d):
        self.name = os.path.basename(d.rstrip("/"))
        self.ours = read_rows(parse, os.path.join(d, "fe-meta", "raw.txt"))
        self.zk = read_rows(parse, newest(os.path.join(d, "zookeeper", "results", "raw-*.txt")))
        self.busy_ours = read_rows(parse, os.path.join(d, "busy", "fe-meta", "raw.txt"))
        self.busy_zk = read_rows(parse, newest(os.path.join(d, "busy", "zookeeper", "results", "raw-*.txt")))
        self.append, self.overwrite, self.rtt = floor(os.path.join(d, "limits", "results.txt"))
        self.ceiling = ceiling(os.path.join(d, "limits", "fanin.txt"))

    def steady(self, rows, w, label, key):
        r = find(rows, workload=w, label=label)
        return num(r.get(key)) if r else None

    def machine_us_per_op(self, rows, w, label):
        """The whole machine's CPU time per operation (servers, client and the rest), in µs."""
        busy, ops = self.steady(rows, w, label, "machine_busy_cores"), self.steady(rows, w, label, "ops_per_s")
        return busy * 1e6 / ops if busy is not None and ops else None

    def w4_worst(self, rows, key):
        vals = [num(r.get(key)) for r in rows if r.get("workload") == "W4" and "trial" in r]
        vals = [v for v in vals if v is not None]
        return max(vals) if vals else None


def ratio(a, b):
    return a / b if a is not None and b else None


def figures(s):
    """(name, target text, value, better, threshold) for one sitting; value None = not measured."""
    f = []
    st = s.steady
    for label in ("ens-spread", "ens-leader"):
        f.append((f"W3 {label} ops/s ours/ZK", ">= 4", ratio(st(s.ours, "W3", label, "ops_per_s"),
                                                           st(s.zk, "W3", label, "ops_per_s")), "higher", 4.0))
        f.append((f"W3 {label} p99 ours/ZK", "<= 0.5", ratio(st(s.ours, "W3", label, "p99_us"),
                                                            st(s.zk, "W3", label, "p99_us")), "lower", 0.5))
        # On a machine the workload saturates, the throughput ratio follows the CPU per write:
        # 4x needs this at about 0.25. The ceiling is what echo servers that do no work reach.
        f.append((f"W3 {label} machine CPU µs/op ours/ZK", "", ratio(s.machine_us_per_op(s.ours, "W3", label),
                                                                     s.machine_us_per_op(s.zk, "W3", label)), "lower", None))
        top = s.ceiling.get(CEILING_SERVERS[label])
        f.append((f"W3 {label} ops/s ours/ceiling", "", ratio(st(s.ours, "W3", label, "ops_per_s"), top), "higher", None))
        f.append((f"W3 {label} ops/s ZK/ceiling", "", ratio(st(s.zk, "W3", label, "ops_per_s"), top), "higher", None))
    fl = s.overwrite + 2 * s.rtt if s.overwrite is not None and s.rtt is not None else None
    for label in ("ens-leader", "ens-follower"):
        ours = st(s.ours, "W1", label, "p50_us")
        f.append((f"W1 {label} p50 ours/ZK", "<= 0.5", ratio(ours, st(s.zk, "W1", label, "p50_us")), "lower", 0.5))
        f.append((f"W1 {label} p50 / floor", "<= 2", ratio(ours, fl), "lower", 2.0))
    f.append(("W4 new leader ms (worst trial)", "<= 100",
              s.w4_worst(s.ours, "new_leader_reported_ms"), "lower", 100.0))
    f.append(("W4 fresh client first write ms (worst trial)", "<= 100",
              s.w4_worst(s.ours, "fresh_client_first_write_ms"), "lower", 100.0))
    f.append(("W4 ZooKeeper new leader ms (worst trial)", "", s.w4_worst(s.zk, "new_leader_reported_ms"), "lower", None))
    f.append(("W2 ops/s ours/ZK", "", ratio(st(s.ours, "W2", "ens-leader", "ops_per_s"),
                                           st(s.zk, "W2", "ens-leader", "ops_per_s")), "higher", None))
    # A busy machine: how much each system keeps of its idle figure, ours minus ZooKeeper's
    # share (>= 0 means ours degraded no more than ZooKeeper's did).
    for w, label, key, better in (("W1", "ens-leader", "p50_us", "lower"), ("W1", "ens-follower", "p50_us", "lower"),
                                  ("W3", "ens-spread", "ops_per_s", "higher"), ("W3", "ens-leader", "ops_per_s", "higher")):
        def kept(idle, busy):
            a, b = st(idle, w, label, key), st(busy, w, label, key)
            if a is None or b is None or not a or not b:
                return None
            return b / a if better == "higher" else a / b
        ko, kz = kept(s.ours, s.busy_ours), kept(s.zk, s.busy_zk)
        d = ko - kz if ko is not None and kz is not None else None
        f.append((f"busy {w} {label} {key}: share kept, ours - ZK", ">= 0", d, "higher", 0.0))
        f.append((f"busy {w} {label} {key}: share kept, ours", "", ko, "higher", None))
        f.append((f"busy {w} {label} {key}: share kept, ZK", "", kz, "higher", None))
    if fl is not None:
        f.append(("floor: fdatasync overwrite + 2 RTT µs", "", fl, "lower", None))
    return f


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"


def summary(sittings):
    """The markdown table of the target figures across sittings."""
    per = [figures(s) for s in sittings]
    out = ["| figure | target | " + " | ".join(s.name for s in sittings) + " | median | worst | met |",
           "|---|---|" + "---:|" * (len(sittings) + 2) + "---|"]
    for i, (name, target, _, better, thr) in enumerate(per[0]):
        vals = [p[i][2] for p in per]
        have = [v for v in vals if v is not None]
        worst = (min(have) if better == "higher" else max(have)) if have else None
        med = statistics.median(have) if have else None
        if thr is None or worst is None:
            met = "" if thr is None else "not measured"
        else:
            met = "yes" if (worst >= thr if better == "higher" else worst <= thr) else "**no**"
        out.append(f"| {name} | {target} | " + " | ".join(fmt(v) for v in vals) +
                   f" | {fmt(med)} | {fmt(worst)} | {met} |")
    return "\n".join(out)


FIGS = [("ops_per_s", "ops/s"), ("p50_us", "p50 µs"), ("p99_us", "p99 µs"),
        ("server_cpu_us_per_op", "server CPU µs/op"), ("server_cores", "server cores")]


def side_by_side(s):
    out = [f"\n### {s.name}: fe-meta / ZooKeeper 3.8\n",
           "| workload | setup | figure | fe-meta | ZooKeeper | ours / theirs |", "|---|---|---|---:|---:|---:|"]
    for tag, ours, zk in (("", s.ours, s.zk), (" (busy)", s.busy_ours, s.busy_zk)):
        for w, label in [("W0", "ens-leader"), ("W1", "ens-leader"), ("W1", "ens-follower"),
                         ("W2", "ens-leader"), ("W3", "ens-spread"), ("W3", "ens-leader")]:
            a, b = find(ours, workload=w, label=label), find(zk, workload=w, label=label)
            if not a or not b:
                continue
            for k, name in FIGS:
                va, vb = num(a.get(k)), num(b.get(k))
                out.append(f"| {w}{tag} | {label} | {name} | {fmt(va)} | {fmt(vb)} | {fmt(ratio(va, vb))} |")
    for key, name in (("new_leader_reported_ms", "new leader ms (worst trial)"),
                      ("fresh_client_first_write_ms", "fresh client first write ms (worst trial)"),
                      ("unavail_ms", "existing client unavailable ms (worst trial)")):
        a, b = s.w4_worst(s.ours, key), s.w4_worst(s.zk, key)
        out.append(f"| W4 | ens | {name} | {fmt(a)} | {fmt(b)} | {fmt(ratio(a, b))} |")
    for label in ("ens-set", "ens-create"):
        a = num((find(s.ours, workload="W5", label=label) or {}).get("restart_to_caught_up_ms"))
        b = num((find(s.zk, workload="W5", label=label) or {}).get("restart_to_caught_up_ms"))
        out.append(f"| W5 | {label} | restart -> caught up ms | {fmt(a)} | {fmt(b)} | {fmt(ratio(a, b))} |")
    if s.rtt is not None:
        out.append(f"\nfloor: fdatasync 4 KiB p50 {fmt(s.append)} µs appending, {fmt(s.overwrite)} µs "
                   f"overwriting; loopback RTT p50 {fmt(s.rtt)} µs")
    if s.ceiling:
        out.append("W3 ceiling (closed-loop clients, echo servers that do no work): " +
                   ", ".join(f"{n} server(s) {fmt(v)} ops/s" for n, v in sorted(s.ceiling.items())))
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--anchors", default=os.environ.get("FE_META_ANCHORS", "/work/shared/anchors"))
    ap.add_argument("dir")
    a = ap.parse_args(argv)
    dirs = sorted(glob.glob(os.path.join(a.dir, "s[0-9]*")), key=lambda d: int(os.path.basename(d)[1:]))
    if not dirs:
        print(f"no sittings (s1, s2, ...) under {a.dir}", file=sys.stderr)
        return 1
    parse = load_parser(a.anchors)
    sittings = [Sitting(parse, d) for d in dirs]
    print(f"## fe-meta / ZooKeeper 3.8: {len(sittings)} sitting(s) in {a.dir}")
    for s in sittings:
        print(side_by_side(s))
    print(f"\n### Targets across the sittings (met = the worst sitting meets it)\n")
    print(summary(sittings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
