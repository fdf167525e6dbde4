#!/usr/bin/env python3
"""The injection library's launch feed without the gearshift process: runs CMD with GEARSHIFT_RUNTIME_SOCKET
naming a Unix socket of our own, accepts every connection the job's CUDA processes make and reads what they
send until they close; sends no command back. Measures what the job's side of the feed costs by itself (the
runtime's reading, predicting and scheduling left out). CMD's stdout and stderr pass through; the exit code is
CMD's.

  feed_sink.py [--bytes-to FILE] [--phases SPEC] -- CMD [ARGS...]

--phases "T:CMDS;T:CMDS;...": control commands sent to every connection, in turn, each T seconds after the last
(CMDS: commands separated by "|", e.g. "M 5000|A 5000 200"); the list repeats until the job ends, except a last
entry "O" (the feed off, for good) sent once --off-after seconds after the first connection. Each send is printed
as "SINK_PHASE <CLOCK_MONOTONIC s> <index>", so that the job's step times can be split by phase.
"""
import argparse
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading


def drain(listener, stop, counts, phases=(), off_after=None):
    import time
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    conns, first, k, next_t, off_sent = [], None, 0, None, False

    def tell(text, tag):
        for c in conns:
            try:
                c.send(text.encode())
            except OSError:
                pass
        print(f"SINK_PHASE {time.monotonic():.3f} {tag}", file=sys.stderr, flush=True)

    while not stop.is_set():
        now = time.monotonic()
        if first is not None and phases and not off_sent and now >= next_t:
            secs, cmds = phases[k % len(phases)]
            tell("".join(c + "\n" for c in cmds), k % len(phases))
            k, next_t = k + 1, now + secs
        if first is not None and off_after is not None and not off_sent and now >= first + off_after:
            tell("O\n", "off")
            off_sent = True
        for key, _ in sel.select(timeout=0.05):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                conns.append(conn)
                counts["connections"] += 1
                if first is None:
                    first, next_t = time.monotonic(), time.monotonic()
                continue
            try:
                data = key.fileobj.recv(1 << 16)
            except BlockingIOError:
                continue
            if data:
                counts["bytes"] += len(data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bytes-to", help="write 'connections=N bytes=N' to this file at the end")
    p.add_argument("--phases", default="", help="T:CMDS;T:CMDS;...: control commands in turn (see above)")
    p.add_argument("--off-after", type=float, help="send O this many seconds after the first connection")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("no command given (feed_sink.py -- CMD ...)")
    with tempfile.TemporaryDirectory(prefix="gs-feed-sink-") as d:
        path = os.path.join(d, "feed.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(64)
        stop, counts = threading.Event(), {"connections": 0, "bytes": 0}
        phases = []
        for part in filter(None, a.phases.split(";")):
            secs, _, cmds = part.partition(":")
            phases.append((float(secs), [c.strip() for c in cmds.split("|") if c.strip()]))
        t = threading.Thread(target=drain, args=(listener, stop, counts, phases, a.off_after), daemon=True)
        t.start()
        rc = subprocess.call(cmd, env=dict(os.environ, GEARSHIFT_RUNTIME_SOCKET=path))
        stop.set()
        t.join()
        listener.close()
    if a.bytes_to:
        with open(a.bytes_to, "w") as f:
            f.write(f"connections={counts['connections']} bytes={counts['bytes']}\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
