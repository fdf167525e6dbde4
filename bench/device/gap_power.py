#!/usr/bin/env python3
"""The energy a short idle gap between kernels costs above the idle power (H200; reads NVML only, never changes a
clock or limit).

gearshift's simulator charges every gap between kernels at the GPU's idle power (data/gpus/*.json: 122 W at the
default SM clock on an H200). This measures what a gap really costs. For each kind of kernel burst (a bf16 GEMM
burst that runs at the power limit, a bf16 GEMM burst below it, a memory copy burst) it runs the burst back to back,
then each burst followed by a CPU-held gap of G µs (synchronize, then spin). CUDA events around each burst give
the GPU's busy time B exactly; the NVML energy counter over each ~S s setting gives the energy E over the wall
time T. With P_b the back-to-back power and P_idle the idle power, each gap's energy above idle is
    E_x = (E - P_b·B - P_idle·(T - B)) / gaps,
and H = E_x / (P_b - P_idle) is how long the board would hold the burst's power into the gap.

Usage: gap_power.py [--seconds S] [--gaps-us 100,300,1000,3000,10000] [--kinds gemm_cap,gemm,copy]
Prints one line per setting and a final JSON line (all figures MEASURED: NVML energy counter, CUDA events, wall
clock).
"""
import argparse
import ctypes
import json
import time

import torch


def nvml_energy():
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    assert lib.nvmlInit_v2() == 0, "nvmlInit failed"
    dev = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0, "no GPU 0"

    def read_j():
        mj = ctypes.c_ulonglong()
        assert lib.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(mj)) == 0, "no energy counter"
        return mj.value / 1000.0

    return read_j


def spin_us(us):
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def burst_fn(kind):
    """A burst of about 2 ms of one kind of kernel."""
    if kind == "gemm_cap":  # 8192³ bf16: at the power limit back to back (measured 703 W)
        x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.mm(x, x)
    if kind == "gemm":  # 2048³ bf16, 16 in a row: small tiles, below the power limit
        x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
        return lambda: [torch.mm(x, x) for _ in range(16)]
    if kind == "copy":  # 2 × 1 GiB copies: memory bound
        a = torch.empty(1 << 29, device="cuda", dtype=torch.float16)
        b = torch.empty_like(a)
        return lambda: (b.copy_(a), a.copy_(b))
    raise SystemExit(f"unknown kind {kind}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--gaps-us", default="100,300,1000,3000,10000")
    p.add_argument("--kinds", default="gemm_cap,gemm,copy")
    a = p.parse_args()
    read_j = nvml_energy()

    def run(burst, gap_us):
        """Bursts for about a.seconds: (bursts, wall s, busy s, energy J)."""
        n, busy = 0, 0.0
        pairs = []
        torch.cuda.synchronize()
        start, e0 = time.perf_counter(), read_j()
        while time.perf_counter() - start < a.seconds:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            burst()
            e.record()
            pairs.append((s, e))
            n += 1
            if gap_us is not None:
                torch.cuda.synchronize()
                spin_us(gap_us)
            elif n % 8 == 0:
                e.synchronize()  # keep the queue short: the bursts still run back to back
        torch.cuda.synchronize()
        wall, e1 = time.perf_counter() - start, read_j()
        busy = sum(s.elapsed_time(e) for s, e in pairs) * 1e-3
        return n, wall, busy, e1 - e0

    time.sleep(2.0)
    e0, t0 = read_j(), time.perf_counter()
    time.sleep(3.0)
    idle_w = (read_j() - e0) / (time.perf_counter() - t0)
    print(f"idle {idle_w:.1f} W (measured: NVML energy counter over 3 s)")
    out = dict(gpu=torch.cuda.get_device_name(0), idle_w=idle_w, kinds={})
    for kind in a.kinds.split(","):
        burst = burst_fn(kind)
        for _ in range(20):
            burst()
        n, wall, busy, e = run(burst, None)
        p_b = e / wall  # back to back: the busy power (the gaps between bursts are µs)
        print(f"{kind}: back to back {n} bursts of {busy / n * 1e3:.3f} ms, busy {busy / wall * 100:.1f} %, "
              f"{p_b:.0f} W")
        rows = []
        for g in [float(v) for v in a.gaps_us.split(",")]:
            n, wall, busy, e = run(burst, g)
            e_x = (e - p_b * busy - idle_w * (wall - busy)) / n
            hold_ms = e_x / (p_b - idle_w) * 1e3
            gap_ms = (wall - busy) / n * 1e3
            rows.append(dict(gap_us=g, bursts=n, burst_ms=busy / n * 1e3, gap_ms=gap_ms, power_w=e / wall,
                             excess_j=e_x, hold_ms=hold_ms))
            print(f"  gap {g:6.0f} us (GPU idle {gap_ms:.3f} ms per gap): {n} bursts of {busy / n * 1e3:.3f} ms, "
                  f"{e / wall:5.0f} W; energy above idle per gap {e_x * 1e3:7.2f} mJ = {hold_ms:.3f} ms at "
                  f"the burst's power")
        out["kinds"][kind] = dict(busy_w=p_b, rows=rows)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
