#!/usr/bin/env python3
"""Attach the runtime launch feed to a running PyTorch job on a real GPU (what gearshift.torch.enable()
does through ctypes): CUDA is initialised and some steps run first, then gearshift_feed_attach() subscribes
CUPTI; the launches of the following steps must arrive as L lines and their kernels as C lines; detach ends
the feed. Needs only libgearshift_inject.so (no Python extension). Prints one JSON line.

  python3 feed_attach_check.py BIN/libgearshift_inject.so [--steps 10]
"""
import ctypes
import json
import os
import sys
import threading

import torch


def main():
    lib = ctypes.CDLL(sys.argv[1])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--steps" else 10
    dev = torch.device("cuda")
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), fused=True)

    def step():
        x = torch.randn(512, 2048, device=dev)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):  # CUDA initialised, kernels launched before the feed exists
        step()
    torch.cuda.synchronize()
    r, w = os.pipe()
    chunks = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 1 << 16), b"")))
    reader.start()
    rc = lib.gearshift_feed_attach(w)
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    stopped = lib.gearshift_feed_detach()
    os.close(w)
    reader.join()
    lines = b"".join(chunks).decode().splitlines()
    launches = [l for l in lines if l.startswith("L ")]
    done = [l for l in lines if l.startswith("C ")]
    names = sorted({l.split(" ", 3)[3] for l in launches})
    print(json.dumps({"attach_rc": rc, "detach": stopped, "steps": steps, "launch_lines": len(launches),
                      "completion_lines": len(done), "distinct_kernels": len(names),
                      "first_names": [n[:80] for n in names[:4]]}))
    return 0 if rc == 0 and launches and done else 1


if __name__ == "__main__":
    sys.exit(main())
