#!/usr/bin/env python3
"""Write a large torch.profiler-style Chrome trace (default 1 GiB, plain JSON) for the import memory benchmark.

It repeats the kernel/memset events of a real trace (shifted in time) and pads each step with CPU-op events,
as real traces are mostly CPU events. Usage: make_big_trace.py SOURCE.json.gz OUT.json [SIZE_GIB]
"""
import gzip
import json
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    target = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    events = [e for e in json.load(gzip.open(src))["traceEvents"] if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] + e["dur"] for e in events) - t0 + 1000
    pad = {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "dur": 3.5,
           "args": {"External id": 1, "Sequence number": 2, "Fwd thread id": 0, "Ev Idx": 3}}
    written = 0
    with open(out, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        rep = 0
        first = True
        while written < target * (1 << 30):
            shift = rep * span
            chunk = []
            for e in events:
                e2 = dict(e)
                e2["ts"] = round(e["ts"] - t0 + shift, 3)
                chunk.append(json.dumps(e2))
                p = dict(pad)
                p["ts"] = e2["ts"]
                chunk.append(json.dumps(p))
                chunk.append(json.dumps(p))
            text = (",\n" if not first else "") + ",\n".join(chunk)
            first = False
            f.write(text)
            written += len(text)
            rep += 1
        f.write("\n]}\n")
    print(f"wrote {written / (1 << 30):.2f} GiB, {rep} repeats of {len(events)} GPU events")


if __name__ == "__main__":
    main()
