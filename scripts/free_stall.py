#!/usr/bin/env python3
"""How long freeing a file's blocks holds up the syncs of its filesystem.

A thread runs a 4 KiB pwrite + fdatasync loop on one file (a txn log's syncs) while the main
thread frees another file of SIZE MiB whose pages are cached: with one unlink, or by shrinking
it STEP MiB at a time with a pause between steps, then unlinking it (what zab-store's
`discard.rs` does). Prints, per way, how long the freeing took and the loop's sync latencies.

    python3 scripts/free_stall.py [DIR] [SIZE_MIB ...]

DIR (default: the current directory) must be on the filesystem to measure; the script works in
a fresh subdirectory of it and removes it. Bounded: two rounds of three ways per size, about
2 s each.
"""

import os
import sys
import tempfile
import threading
import time

MIB = 1 << 20


def make(path, mib):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    block = b"\1" * MIB
    for i in range(mib):
        os.pwrite(fd, block, i * MIB)
    os.fsync(fd)
    os.close(fd)


def sync_loop(fd, secs, out):
    start = time.perf_counter()
    off = 0
    page = b"x" * 4096
    while time.perf_counter() - start < secs:
        t = time.perf_counter()
        os.pwrite(fd, page, off)
        os.fdatasync(fd)
        out.append(time.perf_counter() - t)
        off = (off + 4096) % (60 * MIB)


def unlink(path):
    os.unlink(path)


def stepwise(step_mib, pause_s):
    def free(path):
        fd = os.open(path, os.O_WRONLY)
        size = os.fstat(fd).st_size
        while size > step_mib * MIB:
            size -= step_mib * MIB
            os.ftruncate(fd, size)
            time.sleep(pause_s)
        os.close(fd)
        os.unlink(path)

    return free


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "."
    sizes = [int(s) for s in sys.argv[2:]] or [64, 350]
    ways = [("unlink", unlink), ("4 MiB steps, 2 ms", stepwise(4, 0.002)),
            ("8 MiB steps, 2 ms", stepwise(8, 0.002))]
    with tempfile.TemporaryDirectory(dir=base, prefix="free-stall.") as d:
        log = os.path.join(d, "log")
        make(log, 64)
        fd = os.open(log, os.O_WRONLY)
        print(f"{'size MiB':>8} {'way':<18} {'free ms':>8} {'syncs':>6} {'p50 us':>7} "
              f"{'p99.9 ms':>9} {'max ms':>7}")
        for _ in range(2):
            for mib in sizes:
                for name, free in ways:
                    victim = os.path.join(d, "victim")
                    make(victim, mib)
                    lat = []
                    loop = threading.Thread(target=sync_loop, args=(fd, 0.4 + mib / 300, lat))
                    loop.start()
                    time.sleep(0.1)
                    t = time.perf_counter()
                    free(victim)
                    took = time.perf_counter() - t
                    loop.join()
                    lat.sort()
                    print(f"{mib:>8} {name:<18} {took * 1e3:>8.1f} {len(lat):>6} "
                          f"{lat[len(lat) // 2] * 1e6:>7.0f} "
                          f"{lat[int(len(lat) * 0.999)] * 1e3:>9.2f} {lat[-1] * 1e3:>7.1f}")
                    time.sleep(0.3)
        os.close(fd)


if __name__ == "__main__":
    main()
