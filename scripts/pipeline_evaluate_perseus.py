#!/usr/bin/env python3
"""`gearshift pipeline --evaluate` against the measured Perseus plans (issue 47 item 1, docs/pipeline.md).

For each model of ../shared/data/perseus_measured (4 x A100 PCIe, Merak synchronous 1F1B, PP = 4), every plan's
sched.json is evaluated by `gearshift pipeline PROFILE --evaluate` (MODELLED) and compared with what that plan
MEASURED (N.prof.json: iteration time and per-rank NVML energy; the first iteration of each plan dropped as
warm-up). No stage profile of these runs was published, so the profile is a stand-in: the A100-SXM profile of
../shared/data/perseus (another GPU, 400 W SXM, and another model, 8 stages of a 176B model) cut to 4 stages
(stages 0-2 <- its middle stage 0, stage 3 <- its last stage 7). Only relative figures are compared: each plan's
time and energy over the all-1410 MHz plan's (plan 0 modelled; plans 0 and 1 measured, averaged).

Usage: scripts/pipeline_evaluate_perseus.py [GEARSHIFT_BINARY]   (default build/src/cli/gearshift)
"""
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data")
MEASURED = os.path.join(SHARED, "perseus_measured", "perseus", "A100")
SXM = os.path.join(SHARED, "perseus", "stage_profile")
MODELS = ["bert-huge-uncased", "bloom-3b", "t5-3b"]
PROXIES = ["bloom", "gpt3-175b"]
BLOCKING_W = 83.64  # the A100-SXM blocking power of ../perseus/README.md §3; the PCIe runs' own is not published


def proxy_profile(name, path):
    """4-stage stand-in: the SXM profile's stage 0 rows as stages 0-2, its stage 7 rows as stage 3."""
    with open(os.path.join(SXM, f"{name}+a100_sxm_bf16.csv")) as f:
        header, *rows = [line.rstrip("\n") for line in f if line.strip()]
    out = [header]
    for row in rows:
        stage, rest = row.split(",", 1)
        if stage == "0":
            out += [f"{s},{rest}" for s in (0, 1, 2)]
        elif stage == "7":
            out.append(f"3,{rest}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def spearman(a, b):
    """Rank correlation (ties broken by position): does the model order the plans as they measured?"""
    def ranks(v):
        r = [0] * len(v)
        for k, i in enumerate(sorted(range(len(v)), key=lambda i: v[i])):
            r[i] = k
        return r
    ra, rb, n = ranks(a), ranks(b), len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def measured(model, n):
    """(iteration time s, energy J of the 4 GPUs) of plan n, first iteration dropped."""
    with gzip.open(os.path.join(MEASURED, model, f"{n}.prof.json.gz"), "rt") as f:
        ranks = json.load(f)
    time = statistics.mean(statistics.mean(r["iter_time"][1:]) for r in ranks)
    energy = sum(statistics.mean(r["iter_energy"][1:]) for r in ranks)
    return time, energy


def modelled(binary, profile, model, n):
    out = subprocess.run([binary, "pipeline", profile, "--evaluate",
                          os.path.join(MEASURED, model, f"{n}.sched.json.gz"),
                          "--blocking-power-w", str(BLOCKING_W), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"gearshift failed on {model} plan {n}: {out.stdout}{out.stderr}")
    plan = json.loads(out.stdout)["plans"][0]
    return plan["iteration_time_s"], plan["energy_j"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "src", "cli", "gearshift")
    if not os.path.isdir(MEASURED):
        sys.exit(f"measured Perseus plans not found at {MEASURED}")
    tmp = tempfile.mkdtemp()
    print(f"blocking power {BLOCKING_W} W/GPU; relative to the all-1410 MHz plan; "
          "modelled = gearshift --evaluate on a stand-in profile (A100-SXM, another model), measured = the plan's run")
    for model in MODELS:
        plans = sorted(int(f.split(".")[0]) for f in os.listdir(os.path.join(MEASURED, model))
                       if f.endswith(".sched.json.gz"))
        m0 = [measured(model, n) for n in (0, 1)]
        base_t = statistics.mean(t for t, _ in m0)
        base_e = statistics.mean(e for _, e in m0)
        print(f"\n{model}: {len(plans)} plans; measured baseline {base_t:.3f} s, {base_e:.0f} J per iteration "
              f"(plans 0 and 1 differ by {100 * abs(m0[0][0] / m0[1][0] - 1):.2f} % time, "
              f"{100 * abs(m0[0][1] / m0[1][1] - 1):.2f} % energy)")
        rows = {}
        for proxy in PROXIES:
            prof = os.path.join(tmp, f"{proxy}4.csv")
            proxy_profile(proxy, prof)
            t0, e0 = modelled(binary, prof, model, 0)
            for n in plans:
                t, e = modelled(binary, prof, model, n)
                rows.setdefault(n, {})[proxy] = (t / t0, e / e0)
        hdr = "  plan  measured_time  measured_energy"
        for proxy in PROXIES:
            hdr += f"  modelled_time[{proxy}]  modelled_energy[{proxy}]"
        print(hdr)
        err = {p: ([], []) for p in PROXIES}
        pairs = {p: ([], [], [], []) for p in PROXIES}  # measured t, modelled t, measured e, modelled e
        for n in plans:
            t, e = measured(model, n)
            line = f"  {n:>4}  {t / base_t:>13.4f}  {e / base_e:>15.4f}"
            for proxy in PROXIES:
                mt, me = rows[n][proxy]
                line += f"  {mt:>{len('modelled_time[]') + len(proxy)}.4f}  {me:>{len('modelled_energy[]') + len(proxy)}.4f}"
                if n >= 2:
                    err[proxy][0].append(mt - t / base_t)
                    err[proxy][1].append(me - e / base_e)
                    for lst, v in zip(pairs[proxy], (t, mt, e, me)):
                        lst.append(v)
            print(line)
        for proxy in PROXIES:
            dt, de = err[proxy]
            print(f"  plans 2+, stand-in {proxy}: modelled - measured relative time: mean {100 * statistics.mean(dt):+.1f} pp "
                  f"(range {100 * min(dt):+.1f} .. {100 * max(dt):+.1f}); energy: mean {100 * statistics.mean(de):+.1f} pp "
                  f"(range {100 * min(de):+.1f} .. {100 * max(de):+.1f}); plan order (Spearman) time "
                  f"{spearman(pairs[proxy][0], pairs[proxy][1]):.2f}, energy {spearman(pairs[proxy][2], pairs[proxy][3]):.2f}")


if __name__ == "__main__":
    main()
