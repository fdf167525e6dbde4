#!/usr/bin/env python3
"""The board power in short idle gaps between kernels (H200; reads NVML only, never changes a clock or limit).

gearshift's simulator charges every gap between kernels at the GPU's idle power (data/gpus/*.json: 122 W at the
default SM clock on an H200). This measures what a gap really costs: bf16 GEMMs of about 1.5 ms, back to back
and then each followed by a CPU-held gap of G µs (synchronize, then spin), the NVML energy counter read around
each ~3 s setting. With P_busy the back-to-back power and B the kernels' share of the time, the gap's power is
(P - B * P_busy) / (1 - B).

Usage: gap_power.py [--seconds S] [--gaps-us 20,100,500,2000,10000]
Prints one line per setting and a final JSON line (all figures MEASURED: NVML energy counter, wall clock).
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--gaps-us", default="20,100,500,2000,10000")
    p.add_argument("--n", type=int, default=8192)
    a = p.parse_args()
    read_j = nvml_energy()
    x = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):  # warm up cuBLAS and the clocks
        torch.mm(x, y)
    torch.cuda.synchronize()

    def run(gap_us):
        kernels = 0
        start, e0 = time.perf_counter(), read_j()
        while time.perf_counter() - start < a.seconds:
            if gap_us is None:
                for _ in range(20):
                    torch.mm(x, y)
                kernels += 20
                torch.cuda.synchronize()
            else:
                torch.mm(x, y)
                torch.cuda.synchronize()
                kernels += 1
                spin_us(gap_us)
        torch.cuda.synchronize()
        wall, e1 = time.perf_counter() - start, read_j()
        return kernels, wall, (e1 - e0) / wall

    read_j()
    time.sleep(2.0)  # the idle power, for reference
    e0, t0 = read_j(), time.perf_counter()
    time.sleep(3.0)
    idle_w = (read_j() - e0) / (time.perf_counter() - t0)
    n_busy, wall_busy, p_busy = run(None)
    t_kernel = wall_busy / n_busy
    print(f"idle {idle_w:.0f} W; back to back: {n_busy} GEMMs of {t_kernel * 1e3:.3f} ms, {p_busy:.0f} W")
    rows = []
    for g in [float(v) for v in a.gaps_us.split(",")]:
        n, wall, p_avg = run(g)
        busy = min(1.0, n * t_kernel / wall)
        gap_w = (p_avg - busy * p_busy) / (1 - busy) if busy < 1 else float("nan")
        rows.append(dict(gap_us=g, kernels=n, busy_share=busy, power_w=p_avg, gap_power_w=gap_w))
        print(f"gap {g:7.0f} us: {n} GEMMs, busy {busy * 100:5.1f} %, {p_avg:5.0f} W, gap power {gap_w:5.0f} W "
              f"(model: {idle_w:.0f} W idle)")
    print(json.dumps(dict(gpu=torch.cuda.get_device_name(0), idle_w=idle_w, kernel_ms=t_kernel * 1e3,
                          busy_w=p_busy, rows=rows)))


if __name__ == "__main__":
    main()
