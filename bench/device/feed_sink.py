#!/usr/bin/env python3
"""The injection library's launch feed without the gearshift process: runs CMD with GEARSHIFT_RUNTIME_SOCKET
naming a Unix socket of our own, accepts every connection the job's CUDA processes make and reads what they
send until they close; sends no command back. Measures what the job's side of the feed costs by itself (the
runtime's reading, predicting and scheduling left out). CMD's stdout and stderr pass through; the exit code is
CMD's.

  feed_sink.py [--bytes-to FILE] -- CMD [ARGS...]
"""
import argparse
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading


def drain(listener, stop, counts):
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.1):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                counts["connections"] += 1
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
        t = threading.Thread(target=drain, args=(listener, stop, counts), daemon=True)
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
