#!/usr/bin/env python3
"""How long the kernel takes to close a SIGKILLed process's sockets, by the process's RSS.

For each size in MiB given (default 10 200 1000 2000): a child touches that much anonymous
memory and holds one end of a socket pair; the parent SIGKILLs it and times the end-of-file on
its own end (the socket closes) and the reaping. The kernel frees a dying process's address
space before it closes its files, so the end-of-file comes after the memory is freed: this is
the floor under any failover a peer detects by a closed connection.
"""
import os
import signal
import socket
import sys
import time


def one(mib: int) -> tuple[float, float]:
    parent_end, child_end = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        parent_end.close()
        buf = bytearray(mib * 1024 * 1024)
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        child_end.send(b"r")
        time.sleep(60)
        os._exit(0)
    child_end.close()
    if parent_end.recv(1) != b"r":
        raise SystemExit("the child did not start")
    time.sleep(0.2)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    parent_end.recv(1)
    t_eof = time.monotonic()
    os.waitpid(pid, 0)
    t_reaped = time.monotonic()
    parent_end.close()
    return (t_eof - t0) * 1e3, (t_reaped - t0) * 1e3


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10, 200, 1000, 2000]
    print(f"{'rss_mib':>8} {'socket_eof_ms':>14} {'reaped_ms':>10} {'ms_per_gib':>11}")
    for mib in sizes:
        eof, reaped = one(mib)
        print(f"{mib:>8} {eof:>14.1f} {reaped:>10.1f} {eof * 1024 / mib:>11.1f}")


if __name__ == "__main__":
    main()
