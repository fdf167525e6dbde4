#!/usr/bin/env python3
"""A `gearshift run --auto` log of train_families.py, split by what gearshift did to the job: its 10-step
intervals (`TRAIN_AT` lines, printed as each ends) before the plan ran ("warm-up": every kernel recorded, then the
untraced step measured), while the plan ran with the launch feed on ("live"), and after the injection library
said "gearshift run turned the launch feed off" ("off"). Lines of the job's two streams fall in the order they
were written, so each interval lands in the phase it ended in (one interval each side of a change may hold both).

A plain run of the same job (its log given with --plain) is split at the same interval indices, so that the job's
own drift over its run (a MoE's steps shorten by 10-20 % over its first minute) can be told from gearshift's part.

  feed_off_split.py AUTO.log [AUTO2.log ...] [--plain PLAIN.log ...]

Prints, per log, each phase's interval count and median ms per step; with --plain, the plain runs' median over
the same intervals beside it (medians across the plain logs' intervals at each index).
"""
import argparse
import re
import statistics

AT = re.compile(r"^TRAIN_AT step=(\d+) ms_per_step=([0-9.]+)")


def intervals(path):
    """[(phase, ms_per_step)] in order; phase is warm-up, live or off."""
    phase, out = "warm-up", []
    with open(path, errors="replace") as f:
        for line in f:
            if "applying the plan from now on" in line:
                phase = "live"
            elif "turned the launch feed off" in line:
                phase = "off"
            m = AT.match(line)
            if m:
                out.append((phase, float(m.group(2))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("auto", nargs="+")
    ap.add_argument("--plain", nargs="*", default=[])
    a = ap.parse_args()
    plain = [[ms for _, ms in intervals(p)] for p in a.plain]
    for path in a.auto:
        iv = intervals(path)
        if not iv:
            print(f"{path}: no TRAIN_AT lines (a train_families.py from before session 22?)")
            continue
        parts = []
        for phase in ("warm-up", "live", "off"):
            idx = [i for i, (p, _) in enumerate(iv) if p == phase]
            if not idx:
                continue
            mine = statistics.median(iv[i][1] for i in idx)
            text = f"{phase} {len(idx)} intervals {mine:.1f} ms"
            same = [run[i] for run in plain for i in idx if i < len(run)]
            if same:
                ref = statistics.median(same)
                text += f" (plain {ref:.1f} ms, {100 * (mine / ref - 1):+.2f} %)"
            parts.append(text)
        print(f"{path}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
