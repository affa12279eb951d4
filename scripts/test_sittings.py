#!/usr/bin/env python3
"""Tests of scripts/sittings.py on made-up sittings (a stand-in for the anchors' table.py)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sittings  # noqa: E402

TABLE_PY = '''
import shlex
def parse(path):
    rows = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        if line.startswith("RESULT "):
            d = {}
            for tok in shlex.split(line[7:]):
                k, _, v = tok.partition("=")
                d[k] = v if _ else True
            rows.append(d)
    return rows, []
'''

LIMITS = """append 4096 2000 p50=200.0 p99=400
prealloc 4096 2000 p50=100.0 p99=300
tcp_rtt pin=none 64 20000 p50=50.0 p99=90
"""

FANIN = """fanin servers=1 clients=32 bytes=128 secs=5 ops_per_s=200000 p50_us=150 p99_us=300 server_cores=0.70
fanin servers=3 clients=32 bytes=128 secs=5 ops_per_s=250000 p50_us=30 p99_us=2000 server_cores=1.00
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def steady(w, label, ops, p50, p99, busy_cores=1.5):
    return (f"RESULT workload={w} label={label} ops_per_s={ops} p50_us={p50} p99_us={p99} "
            f"machine_busy_cores={busy_cores}\n")


def sitting(root, name, ours_w3, zk_w3, ours_w1, busy=None):
    d = os.path.join(root, name)
    write(os.path.join(d, "limits", "results.txt"), LIMITS)
    write(os.path.join(d, "limits", "fanin.txt"), FANIN)
    ours = steady("W3", "ens-spread", ours_w3, 1000, 2000) + steady("W1", "ens-leader", 1000, ours_w1, 900)
    ours += "RESULT workload=W4 label=ens trial=1 new_leader_reported_ms=60 fresh_client_first_write_ms=70\n"
    ours += "RESULT workload=W4 label=ens trial=2 new_leader_reported_ms=95 fresh_client_first_write_ms=130\n"
    write(os.path.join(d, "fe-meta", "raw.txt"), ours)
    zk = steady("W3", "ens-spread", zk_w3, 3000, 8000, busy_cores=1.6) + steady("W1", "ens-leader", 800, 1000, 5000)
    write(os.path.join(d, "zookeeper", "results", "raw-1.txt"), zk)
    if busy:
        ours_busy, zk_busy = busy
        write(os.path.join(d, "busy", "fe-meta", "raw.txt"), steady("W3", "ens-spread", ours_busy, 1, 1))
        write(os.path.join(d, "busy", "zookeeper", "results", "raw-1.txt"), steady("W3", "ens-spread", zk_busy, 1, 1))


class SittingsTest(unittest.TestCase):
    def run_report(self, root):
        table = os.path.join(root, "anchors", "zookeeper", "table.py")
        write(table, TABLE_PY)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = sittings.main(["--anchors", os.path.join(root, "anchors"), root])
        self.assertEqual(rc, 0)
        return out.getvalue()

    def row(self, text, name):
        lines = [l for l in text.splitlines() if l.startswith(f"| {name} |")]
        self.assertEqual(len(lines), 1, f"{name} in\n{text}")
        return [c.strip() for c in lines[0].strip("|").split("|")]

    def test_the_worst_sitting_decides_a_target(self):
        with tempfile.TemporaryDirectory() as root:
            sitting(root, "s1", 50000, 10000, 400)  # 5x
            sitting(root, "s2", 30000, 10000, 300)  # 3x
            sitting(root, "s3", 45000, 10000, 350)  # 4.5x
            text = self.run_report(root)
            r = self.row(text, "W3 ens-spread ops/s ours/ZK")
            self.assertEqual(r[2:], ["5.00", "3.00", "4.50", "4.50", "3.00", "**no**"])
            # floor = 100 + 2 * 50 = 200 µs; W1 p50 400/300/350 -> 2.0/1.5/1.75: met at <= 2.
            r = self.row(text, "W1 ens-leader p50 / floor")
            self.assertEqual(r[2:], ["2.00", "1.50", "1.75", "1.75", "2.00", "yes"])
            # W4: the worst trial of each sitting (95 ms, 130 ms).
            self.assertEqual(self.row(text, "W4 new leader ms (worst trial)")[-1], "yes")
            self.assertEqual(self.row(text, "W4 fresh client first write ms (worst trial)")[-1], "**no**")
            # No busy pass: not measured, never "yes".
            r = self.row(text, "busy W3 ens-spread ops_per_s: share kept, ours - ZK")
            self.assertEqual(r[-1], "not measured")

    def test_the_w3_ceiling_and_cpu_per_write_are_reported_beside_the_ratio(self):
        with tempfile.TemporaryDirectory() as root:
            sitting(root, "s1", 50000, 10000, 400)
            text = self.run_report(root)
            # the spread against the three echo servers: 50k / 250k, ZooKeeper 10k / 250k.
            self.assertEqual(self.row(text, "W3 ens-spread ops/s ours/ceiling")[2], "0.20")
            self.assertEqual(self.row(text, "W3 ens-spread ops/s ZK/ceiling")[2], "0.04")
            # machine CPU per write: 1.5 cores / 50k = 30 µs against 1.6 / 10k = 160 µs.
            self.assertEqual(self.row(text, "W3 ens-spread machine CPU µs/op ours/ZK")[2], "0.19")
            self.assertIn("1 server(s) 200000 ops/s, 3 server(s) 250000 ops/s", text)

    def test_busy_degradation_compares_the_shares_kept(self):
        with tempfile.TemporaryDirectory() as root:
            # ours keeps 0.8 of its idle W3, ZooKeeper 0.6: ours degrades less.
            sitting(root, "s1", 50000, 10000, 400, busy=(40000, 6000))
            text = self.run_report(root)
            r = self.row(text, "busy W3 ens-spread ops_per_s: share kept, ours - ZK")
            self.assertEqual(r[2], "0.20")
            self.assertEqual(r[-1], "yes")

    def test_no_sittings_is_an_error(self):
        with tempfile.TemporaryDirectory() as root:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(sittings.main([root]), 1)
            self.assertIn("no sittings", err.getvalue())


if __name__ == "__main__":
    unittest.main()
