#!/usr/bin/env python3
"""Plays a recorded gearshift trace (from `gearshift trace`) into `gearshift run`'s launch feed in real time,
as the injection library would on the GPU machine: an L line at each kernel's launch time, C lines for the
kernels completed so far every 10 ms (CUPTI's flush period in feed mode). No GPU needed: this checks the
live runtime (prediction, scheduling, in-time accounting) on a real launch stream.

  gearshift run --plan plan.json -- python3 feed_replay.py TRACE.jsonl.gz [--steps-from-marker N]
"""
import gzip
import json
import os
import socket
import sys
import time


def connect():
    """The connection to `gearshift run`'s socket, its hello line sent (protocol: src/feed/protocol.hpp)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GEARSHIFT_RUNTIME_SOCKET"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    s.sendall(f"H 1 {os.getpid()} -1 -1 -1 {'-' if visible is None else '=' + visible}\n".encode())
    return s


def main():
    path = sys.argv[1]
    conn = connect()
    names, ops = {}, []
    with gzip.open(path, "rt") as f:
        f.readline()
        for line in f:
            r = json.loads(line)
            if r[0] == "n":
                names[r[1]] = r[2]
            elif r[0] == "k" and r[14] >= 0:  # kernels with a launch time, as the feed carries
                ops.append((r[14], r[6], names[r[1]], r[2], r[2] + r[3], r[5], r[4]))
    ops.sort()
    t_cpu0, t_mono0 = ops[0][0], time.monotonic_ns() + 50_000_000
    shift = t_mono0 - t_cpu0
    done = sorted((o[4], o) for o in ops)
    i = j = 0
    out = conn.makefile("w", buffering=1 << 16)
    next_flush = 0
    while i < len(ops) or j < len(done):
        now = time.monotonic_ns() - shift
        while i < len(ops) and ops[i][0] <= now:
            o = ops[i]
            out.write(f"L {o[0] + shift} {o[1]} {o[2]}\n")
            i += 1
        if now >= next_flush:
            while j < len(done) and done[j][0] <= now:
                o = done[j][1]
                out.write(f"C {o[1]} {o[3] + shift} {o[4] + shift} {o[5]} {o[6]}\n")
                j += 1
            next_flush = now + 10_000_000
        out.flush()
        nxt = min(ops[i][0] if i < len(ops) else 1 << 62, next_flush)
        time.sleep(max(0, min(nxt - (time.monotonic_ns() - shift), 2_000_000)) / 1e9)
    out.close()


if __name__ == "__main__":
    main()
