#!/usr/bin/env python3
"""A gearshift trace (format v1, .jsonl.gz) as it would read at another measured power, or without its clock
samples: for `gearshift plan` figures of one trace under the conditions `run --auto` plans in (the untraced run's
power; no clock sample on the kernels before session 25). Writes a new file; the input is left as it is.

  python3 bench/trace_at_power.py TRACE OUT [--power-scale F] [--no-clocks]

--power-scale F  multiply every power sample ("p" records) by F, a number or A/B: `gearshift plan` calibrated
                 the trace to 612 W (its samples inside the steps), so 647/612 makes it 647 W
--no-clocks      zero the SM and memory clocks the tracer sampled, on the ops and the samples
"""
import argparse
import gzip
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--power-scale", default="1")
    ap.add_argument("--no-clocks", action="store_true")
    a = ap.parse_args()
    with gzip.open(a.trace, "rt") as f:
        lines = f.readlines()
    num, _, den = a.power_scale.partition("/")
    try:
        scale = float(num) / (float(den) if den else 1.0)
    except (ValueError, ZeroDivisionError):
        sys.exit(f"--power-scale {a.power_scale!r}: a number or A/B")
    if not scale > 0:
        sys.exit(f"--power-scale {a.power_scale!r}: must be positive")
    with gzip.open(a.out, "wt") as out:
        for l in lines:
            kind = l[:4]
            if kind == '["p"':
                r = json.loads(l)  # ["p", device, time_ns, sm_mhz, mem_mhz, power_mw]
                if r[5] >= 0:
                    r[5] = int(round(r[5] * scale))
                if a.no_clocks:
                    r[3] = r[4] = 0
                l = json.dumps(r, separators=(",", ":")) + "\n"
            elif a.no_clocks and kind in ('["k"', '["c"', '["s"'):
                r = json.loads(l)  # ops: fields 12 and 13 are the sampled SM and memory clocks
                r[12] = r[13] = 0
                l = json.dumps(r, separators=(",", ":")) + "\n"
            out.write(l)
    print(f"wrote {a.out}: power x {scale:.4f}{', clocks removed' if a.no_clocks else ''}")


if __name__ == "__main__":
    main()
