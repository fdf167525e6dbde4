#!/usr/bin/env python3
"""Record torch.profiler Chrome traces of small training and inference jobs on one GPU, each a case where a step
detector can go wrong (record_step_traces.sh runs them all, one process per job).

  record_step_traces.py JOB --out DIR [--quick]        one job: DIR/JOB.json.gz (+ its variant), DIR/JOB.part.json
  record_step_traces.py merge --out DIR JOB=RC ...      DIR/manifest.json from the parts (RC: the job's exit status)
  record_step_traces.py list                            the jobs

Every job builds its model from a config (random weights, bf16, nothing downloaded; fused AdamW for training), runs
warm-up steps (cuBLAS heuristics, allocator, lazy module loading), then measures s/step and J/step over at least 10
untraced steps (synchronize before and after; energy from NVML's total-energy counter, read only, through ctypes),
then records the traced steps under torch.profiler (CPU + CUDA activity). The raw trace is filtered into
  kernels: `kernel`, `gpu_memcpy`, `gpu_memset` events only (like the shipped gpt2_h200 trace);
  markers: those, plus the CPU `ProfilerStep#N` annotations, the `gpu_user_annotation` ranges, and the
           `cuda_runtime`/`cuda_driver` calls that launched kept GPU work (args.correlation kept) or synchronized.
The true per-step facts in the manifest come from the raw trace: each GPU op is tied to the call that launched it by
its correlation id and counted in the CPU range (ProfilerStep#N, or this script's own gs.* ranges, which no written
file keeps) that holds the launch.

Never changes clocks, power limits or any other GPU setting.
"""
import argparse
import ctypes
import gzip
import json
import math
import os
import shlex
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

GPT2S = dict(model="gpt2", layers=6, hidden=768, heads=12, vocab=50257)
LLAMA = dict(model="llama", layers=8, hidden=1024, heads=16, kv_heads=8, ffn=2816, vocab=32000)
MIXTRAL = dict(model="mixtral", layers=4, hidden=512, heads=8, kv_heads=4, ffn=1024, experts=8, topk=2, vocab=32000)

# kind: train (profiler schedule, prof.step() once per optimizer step), infer / decode (schedule, one traced unit),
# cut (profiler started and stopped by hand, mid-step). variants: the first is JOB.json.gz, others JOB_<v>.json.gz.
JOBS = {
    "accum4_gpt2s": dict(GPT2S, kind="train", batch=8, seq=1024, accum=4, steps=3, variants=("markers", "kernels"),
                         true_step="one optimizer step = 4 micro-batches (H2D batch copy, forward, backward each) + "
                                   "fused AdamW step + zero_grad; a ProfilerStep#N spans one optimizer step"),
    "llama_1step": dict(LLAMA, kind="train", batch=8, seq=1024, steps=1, variants=("markers", "kernels"),
                        true_step="one optimizer step = H2D batch copy + forward + backward + fused AdamW + zero_grad; "
                                  "the trace holds exactly one (a detector must refuse: fewer than two steps)"),
    "llama_3steps": dict(LLAMA, kind="train", batch=8, seq=1024, steps=3, variants=("kernels",),
                         true_step="one optimizer step = H2D batch copy + forward + backward + fused AdamW + zero_grad"),
    "llama_infer_1fwd": dict(LLAMA, kind="infer", batch=8, seq=1024, variants=("kernels",),
                             true_step="no training step: one inference forward (torch.no_grad, no KV cache) of "
                                       "batch 8 x 1024 tokens; no optimizer"),
    "llama_decode_8tok": dict(LLAMA, kind="decode", batch=8, prompt=256, new_tokens=8, variants=("kernels",),
                              true_step="no training step: one greedy generation of 8 new tokens with a KV cache = "
                                        "1 prefill forward (256-token prompt, gives token 1) + 7 single-token decode "
                                        "forwards; the repeating unit is a decode forward"),
    "moe_3steps": dict(MIXTRAL, kind="train", batch=8, seq=1024, steps=3, variants=("kernels",),
                       true_step="one optimizer step = H2D batch copy + forward + backward (top-2 of 8 experts per "
                                 "token) + fused AdamW + zero_grad"),
    "ckpt_3steps": dict(LLAMA, kind="train", batch=8, seq=1024, steps=3, ckpt=True, variants=("kernels",),
                        true_step="one optimizer step = H2D batch copy + forward + backward with every decoder layer's "
                                  "forward recomputed (gradient checkpointing) + fused AdamW + zero_grad"),
    "gpt2s_1p5steps": dict(GPT2S, layers=12, kind="cut", batch=8, seq=1024, variants=("kernels",),
                           true_step="one optimizer step = H2D batch copy + forward + backward + fused AdamW + "
                                     "zero_grad; the trace holds one whole step, then the next step's H2D copy and "
                                     "forward (with loss), cut there (synchronize, profiler stopped by hand)"),
}


# ---------------------------------------------------------------------------------------------------------- NVML


class Nvml:
    """NVML through ctypes, read only: the total-energy counter (mJ) and the name of the GPU torch uses."""

    def __init__(self, torch_uuid=None):
        self.lib = self.handle = None
        self.error = None
        self.how = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            lib.nvmlInit_v2.restype = ctypes.c_int
            lib.nvmlDeviceGetHandleByIndex_v2.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
            lib.nvmlDeviceGetHandleByUUID.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
            lib.nvmlDeviceGetTotalEnergyConsumption.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong)]
            lib.nvmlDeviceGetName.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
            rc = lib.nvmlInit_v2()
            if rc != 0:
                raise OSError(f"nvmlInit_v2 returned {rc}")
            h = ctypes.c_void_p()
            if torch_uuid:
                u = torch_uuid if torch_uuid.startswith("GPU-") else "GPU-" + torch_uuid
                if lib.nvmlDeviceGetHandleByUUID(u.encode(), ctypes.byref(h)) == 0:
                    self.how = f"uuid {u}"
            if self.how is None:
                vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
                idx = int(vis) if vis.isdigit() else 0
                rc = lib.nvmlDeviceGetHandleByIndex_v2(idx, ctypes.byref(h))
                if rc != 0:
                    raise OSError(f"nvmlDeviceGetHandleByIndex_v2({idx}) returned {rc}")
                self.how = f"index {idx}"
            self.lib, self.handle = lib, h
            if self.energy_mj() is None:
                raise OSError("nvmlDeviceGetTotalEnergyConsumption failed")
        except (OSError, AttributeError) as e:
            self.lib = self.handle = None
            self.error = str(e)

    def energy_mj(self):
        if self.lib is None:
            return None
        v = ctypes.c_ulonglong()
        return v.value if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(v)) == 0 else None

    def name(self):
        if self.lib is None:
            return None
        buf = ctypes.create_string_buffer(96)
        return buf.value.decode(errors="replace") if self.lib.nvmlDeviceGetName(self.handle, buf, 96) == 0 else None


# ------------------------------------------------------------------------------------------------------ models


def make_config(cls, kwargs, optional):
    """cls(**kwargs); where that fails, again without the optional keys (set as attributes afterwards)."""
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        print(f"record_step_traces: {cls.__name__}({', '.join(optional)}=...) failed ({e}); retrying without",
              file=sys.stderr)
        cfg = cls(**{k: v for k, v in kwargs.items() if k not in optional})
        for k in optional:
            if k in kwargs:
                try:
                    setattr(cfg, "_" + k, kwargs[k])
                except Exception as e2:  # noqa: BLE001 - report and carry on with the library's default
                    print(f"record_step_traces: could not set {k}: {e2}", file=sys.stderr)
        return cfg


def build_model(spec, args, dev):
    import torch
    import transformers as tf

    m = spec["model"]
    extra = {"attn_implementation": args.attn}
    if m == "gpt2":
        kw = dict(n_layer=spec["layers"], n_embd=spec["hidden"], n_head=spec["heads"], vocab_size=spec["vocab"],
                  n_positions=max(1024, spec.get("seq", 0)), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cfg_cls, model_cls = tf.GPT2Config, tf.GPT2LMHeadModel
    elif m == "llama":
        kw = dict(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
                  num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                  num_key_value_heads=spec["kv_heads"], max_position_embeddings=2048)
        cfg_cls, model_cls = tf.LlamaConfig, tf.LlamaForCausalLM
    elif m == "mixtral":
        kw = dict(vocab_size=spec["vocab"], hidden_size=spec["hidden"], intermediate_size=spec["ffn"],
                  num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                  num_key_value_heads=spec["kv_heads"], num_local_experts=spec["experts"],
                  num_experts_per_tok=spec["topk"], max_position_embeddings=2048, output_router_logits=False)
        if args.moe_experts != "default":
            extra["experts_implementation"] = args.moe_experts
        cfg_cls, model_cls = tf.MixtralConfig, tf.MixtralForCausalLM
    else:
        raise ValueError(m)
    cfg = make_config(cfg_cls, {**kw, **extra}, tuple(extra))
    with torch.device(dev):  # initialised on the GPU
        model = model_cls(cfg).to(dtype=torch.bfloat16)
    facts = {"class": model_cls.__name__, "config": kw,
             "attn_implementation": getattr(model.config, "_attn_implementation", None),
             "experts_implementation": getattr(model.config, "_experts_implementation", None) if m == "mixtral"
             else None,
             "params": sum(t.numel() for t in model.parameters())}
    return model, facts


class Trainer:
    """Training steps on random token batches: each micro-batch is copied from pinned host memory (as a loader's
    batch would be), forward with labels, backward; then fused AdamW and zero_grad."""

    def __init__(self, model, spec, dev, seed):
        import torch

        self.torch = torch
        self.model, self.dev = model, dev
        self.accum = spec.get("accum", 1)
        g = torch.Generator().manual_seed(seed)
        self.pool = [torch.randint(0, spec["vocab"], (spec["batch"], spec["seq"]), generator=g).pin_memory()
                     for _ in range(4)]
        self.k = 0
        self.annotate = False  # gs.micro#j ranges around micro-batches (only while tracing)
        model.train()
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def forward_loss(self):
        ids = self.pool[self.k % len(self.pool)].to(self.dev, non_blocking=True)
        self.k += 1
        loss = self.model(input_ids=ids, labels=ids, use_cache=False).loss
        return loss / self.accum if self.accum > 1 else loss

    def micro(self, j):
        if self.annotate and self.accum > 1:
            with self.torch.profiler.record_function(f"gs.micro#{j}"):
                self.forward_loss().backward()
        else:
            self.forward_loss().backward()

    def finish(self, loss=None):
        """The rest of a step whose last micro-batch forward gave `loss` (None: no micro-batch done yet)."""
        if loss is not None:
            loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def step(self):
        for j in range(self.accum):
            self.micro(j)
        self.finish()


# ------------------------------------------------------------------------------------------- measure and trace


def sync():
    import torch

    torch.cuda.synchronize()


def warm_up(unit, n):
    """n untraced units; returns the last one's time (synchronized), an estimate for the measurement's length."""
    last = None
    for _ in range(max(1, n)):
        t0 = time.perf_counter()
        unit()
        sync()
        last = time.perf_counter() - t0
    return last


def measure(unit, nvml, est_s, args):
    n = max(args.min_measure, min(args.max_measure, math.ceil(args.measure_s / max(est_s, 1e-6))))
    sync()
    e0 = nvml.energy_mj()
    t0 = time.perf_counter()
    for _ in range(n):
        unit()
    sync()
    t1 = time.perf_counter()
    e1 = nvml.energy_mj()
    out = {"steps": n, "wall_s": t1 - t0, "s_per_iter": (t1 - t0) / n}
    if e0 is not None and e1 is not None:
        out.update(energy_J=(e1 - e0) / 1e3, J_per_iter=(e1 - e0) / 1e3 / n, avg_W=(e1 - e0) / 1e3 / (t1 - t0),
                   energy_method="NVML nvmlDeviceGetTotalEnergyConsumption, read before and after")
    else:
        out.update(J_per_iter=None, avg_W=None, energy_method=f"none ({nvml.error})")
    return out


def activities():
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def trace_scheduled(unit, n, raw_path, on_active=None):
    """torch.profiler with schedule(wait=0, warmup=1, active=n): one untraced profiler warm-up unit, then n traced
    units, prof.step() once after each (so ProfilerStep#1..#n span the traced units). Synchronizes before the first
    traced unit and after the last one; none in between."""
    import torch
    from torch.profiler import profile, schedule

    done = []

    def ready(p):
        p.export_chrome_trace(raw_path)
        done.append(raw_path)

    prof = profile(activities=activities(), schedule=schedule(wait=0, warmup=1, active=n, repeat=1),
                   on_trace_ready=ready)
    with prof:
        for i in range(n + 1):
            if on_active is not None:
                on_active(i >= 1)
            unit()
            if i == 0 or i == n:
                torch.cuda.synchronize()
            prof.step()
    if on_active is not None:
        on_active(False)
    if not done:
        raise RuntimeError("torch.profiler's schedule ended without a trace")


# ---------------------------------------------------------------------------------------------------- jobs


def run_train(spec, model, dev, args, nvml, raw_path):
    if spec.get("ckpt"):
        try:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:
            model.gradient_checkpointing_enable()
    tr = Trainer(model, spec, dev, args.seed)
    est = warm_up(tr.step, args.warmup)
    meas = measure(tr.step, nvml, est, args)
    meas["iter"] = "one optimizer step" + (f" ({tr.accum} micro-batches)" if tr.accum > 1 else "")

    def on_active(a):
        tr.annotate = a

    trace_scheduled(tr.step, spec["steps"], raw_path, on_active)
    info = {"steps_recorded": spec["steps"], "gradient_checkpointing": bool(spec.get("ckpt")),
            "gradient_checkpointing_active": bool(getattr(model, "is_gradient_checkpointing", False))}
    return meas, info


def run_cut(spec, model, dev, args, nvml, raw_path):
    import torch
    from torch.profiler import profile, record_function

    tr = Trainer(model, spec, dev, args.seed)
    est = warm_up(tr.step, args.warmup)
    meas = measure(tr.step, nvml, est, args)
    meas["iter"] = "one optimizer step"
    with profile(activities=activities()):  # throw-away: CUPTI and the profiler set up before the real window
        tr.step()
        torch.cuda.synchronize()
    prof = profile(activities=activities())
    torch.cuda.synchronize()
    prof.start()
    with record_function("ProfilerStep#0"):
        tr.step()
    with record_function("ProfilerStep#1"):
        loss = tr.forward_loss()
    torch.cuda.synchronize()
    prof.stop()
    tr.finish(loss)  # the cut step's backward and optimizer step, untraced
    torch.cuda.synchronize()
    prof.export_chrome_trace(raw_path)
    return meas, {"steps_recorded": 1.5, "cut": "after the forward (and loss) of the second step"}


def random_ids(spec, n_tokens, dev, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, spec["vocab"], (spec["batch"], n_tokens), generator=g).to(dev)


def run_infer(spec, model, dev, args, nvml, raw_path):
    import torch

    model.eval()
    ids = random_ids(spec, spec["seq"], dev, args.seed)

    def fwd():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    est = warm_up(fwd, args.warmup)
    meas = measure(fwd, nvml, est, args)
    meas["iter"] = "one inference forward"
    trace_scheduled(fwd, 1, raw_path)
    return meas, {"steps_recorded": None, "forwards_recorded": 1}


def run_decode(spec, model, dev, args, nvml, raw_path):
    import torch
    from torch.profiler import record_function

    model.eval()
    prompt = random_ids(spec, spec["prompt"], dev, args.seed)
    mask = torch.ones_like(prompt)
    new = spec["new_tokens"]
    state = {"impl": args.decode}

    def generate():
        return model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                              do_sample=False, use_cache=True, pad_token_id=0)

    def manual():  # greedy, DynamicCache made by the model: prefill gives token 1, then new-1 one-token forwards
        out = model(input_ids=prompt, attention_mask=mask, use_cache=True)
        past, tok, toks, m = out.past_key_values, out.logits[:, -1:].argmax(-1), [], mask
        toks.append(tok)
        for _ in range(new - 1):
            m = torch.cat([m, torch.ones_like(tok)], dim=1)
            out = model(input_ids=tok, attention_mask=m, past_key_values=past, use_cache=True)
            past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            toks.append(tok)
        return torch.cat([prompt] + toks, dim=1)

    def unit():
        with torch.no_grad():
            out = generate() if state["impl"] == "generate" else manual()
        state["out"] = out.sequences if hasattr(out, "sequences") else out

    if state["impl"] == "generate":
        try:
            unit()
            sync()
            if state["out"].shape[1] - prompt.shape[1] != new:
                raise RuntimeError(f"generate() made {state['out'].shape[1] - prompt.shape[1]} tokens, not {new}")
        except Exception as e:  # noqa: BLE001 - fall back to the hand-written loop and say so
            print(f"record_step_traces: model.generate failed ({type(e).__name__}: {e}); using a manual loop",
                  file=sys.stderr)
            state["impl"] = "manual"
    est = warm_up(unit, args.warmup)
    meas = measure(unit, nvml, est, args)
    meas["iter"] = f"one generation of {new} tokens ({state['impl']})"
    meas["s_per_token"] = meas["s_per_iter"] / new

    # gs.fwd#i around each forward of the model (generate() calls the module, so hooks see every forward)
    hooks, ranges, count = [], [], [0]

    def pre(mod, a, kw=None):
        r = record_function(f"gs.fwd#{count[0]}")
        r.__enter__()
        ranges.append(r)
        count[0] += 1

    def post(mod, a, o, kw=None):
        if ranges:
            ranges.pop().__exit__(None, None, None)

    def on_active(a):
        if a and not hooks:
            count[0] = 0
            hooks.append(model.register_forward_pre_hook(pre))
            hooks.append(model.register_forward_hook(post))
        elif not a:
            while hooks:
                hooks.pop().remove()

    trace_scheduled(unit, 1, raw_path, on_active)
    made = int(state["out"].shape[1] - prompt.shape[1])
    return meas, {"steps_recorded": None, "forwards_recorded": count[0] or None, "decode_impl": state["impl"],
                  "new_tokens_made": made}


RUNNERS = {"train": run_train, "cut": run_cut, "infer": run_infer, "decode": run_decode}


# ------------------------------------------------------------------------------------------- trace filtering

GPU_OPS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def corr(e):
    a = e.get("args")
    return a.get("correlation") if isinstance(a, dict) else None


def analyse(events):
    """Per CPU range (ProfilerStep#N, gs.*): the GPU ops whose launch call lies inside it."""
    launch_ts = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and corr(e) is not None:
            launch_ts.setdefault(corr(e), float(e["ts"]))
    ranges = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                     and str(e.get("name", "")).startswith(("ProfilerStep#", "gs."))), key=lambda e: float(e["ts"]))
    rows = [{"name": r["name"], "cpu_ts_us": float(r["ts"]), "cpu_dur_us": float(r.get("dur", 0)), "kernels": 0,
             "gpu_memcpy": 0, "gpu_memset": 0, "gpu_first_ts_us": None, "gpu_last_end_us": None,
             "gpu_op_time_us": 0.0} for r in ranges]
    total = {c: 0 for c in GPU_OPS}
    no_launch = outside = 0
    for e in events:
        cat = e.get("cat")
        if e.get("ph") != "X" or cat not in GPU_OPS:
            continue
        total[cat] += 1
        lt = launch_ts.get(corr(e))
        if lt is None:
            no_launch += 1
            continue
        hit = False
        ts, dur = float(e["ts"]), float(e.get("dur", 0))
        for row in rows:
            if row["cpu_ts_us"] <= lt <= row["cpu_ts_us"] + row["cpu_dur_us"]:
                hit = hit or row["name"].startswith("ProfilerStep#")
                row["kernels" if cat == "kernel" else cat] += 1
                row["gpu_op_time_us"] += dur
                row["gpu_first_ts_us"] = ts if row["gpu_first_ts_us"] is None else min(row["gpu_first_ts_us"], ts)
                end = ts + dur
                row["gpu_last_end_us"] = end if row["gpu_last_end_us"] is None else max(row["gpu_last_end_us"], end)
        outside += not hit
    return rows, total, no_launch, outside


def filter_events(events, variant):
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_OPS]
    if variant == "kernels":
        return ops
    keep_corr = {corr(e) for e in ops if corr(e) is not None}
    out = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), str(e.get("name", ""))
        if cat in GPU_OPS:
            out.append(e)
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            out.append(e)
        elif cat == "gpu_user_annotation" and not name.startswith("gs."):
            out.append(e)
        elif cat in LAUNCH_CATS and (corr(e) in keep_corr or "ynchronize" in name):
            out.append(e)
    return out


def write_trace(path, events, raw, meta):
    doc = {"traceEvents": events}
    if raw.get("deviceProperties"):
        doc["deviceProperties"] = raw["deviceProperties"]
    doc["meta"] = meta
    with gzip.open(path, "wt", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))
    return os.path.getsize(path)


# ----------------------------------------------------------------------------------------------------- main


def run_job(name, args):
    import torch
    import transformers

    t_start = time.perf_counter()
    spec = dict(JOBS[name])
    for kv in args.set:
        k, v = kv.split("=", 1)
        if isinstance(spec.get(k), bool):
            spec[k] = v.lower() in ("1", "true", "yes")
        elif isinstance(spec.get(k), (int, float)):
            spec[k] = type(spec[k])(v)
        else:
            spec[k] = v
    if not torch.cuda.is_available():
        print("record_step_traces: no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    nvml = Nvml(str(getattr(props, "uuid", "") or "") or None)
    if nvml.error:
        print(f"record_step_traces: NVML unavailable ({nvml.error}); no energy figures", file=sys.stderr)
    model, mfacts = build_model(spec, args, dev)
    print(f"== {name}: {mfacts['class']} {mfacts['params'] / 1e6:.1f} M params, attn {mfacts['attn_implementation']}"
          + (f", experts {mfacts['experts_implementation']}" if spec["model"] == "mixtral" else ""), flush=True)

    tmp = tempfile.mkdtemp(prefix="gs_traces_")
    raw_path = os.path.join(tmp, f"{name}.raw.json")
    meas, info = RUNNERS[spec["kind"]](spec, model, dev, args, nvml, raw_path)
    print(f"   measured: {meas['s_per_iter']:.5f} s/iter, "
          + (f"{meas['J_per_iter']:.2f} J/iter, {meas['avg_W']:.0f} W" if meas.get("J_per_iter") is not None
             else "no energy") + f" over {meas['steps']} untraced iterations", flush=True)

    with open(raw_path, "rb") as f:
        raw = json.loads(f.read().decode("utf-8", errors="replace"), strict=False)
    events = raw["traceEvents"] if isinstance(raw, dict) else raw
    raw = raw if isinstance(raw, dict) else {}
    cats = {}
    for e in events:
        c = str(e.get("cat"))
        cats[c] = cats.get(c, 0) + 1
    rows, total, no_launch, outside = analyse(events)
    steps = [r for r in rows if r["name"].startswith("ProfilerStep#")]
    micro = [r for r in rows if r["name"].startswith("gs.micro#")]
    fwds = [r for r in rows if r["name"].startswith("gs.fwd#")]
    if args.keep_raw:
        with open(raw_path, "rb") as f, gzip.open(os.path.join(args.out, f"{name}.raw.json.gz"), "wb") as g:
            g.write(f.read())
    os.remove(raw_path)
    os.rmdir(tmp)

    shape = {k: spec[k] for k in ("batch", "seq", "accum", "prompt", "new_tokens") if k in spec}
    versions = {"gpu": torch.cuda.get_device_name(0), "nvml_gpu": nvml.name(), "nvml_device": nvml.how,
                "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__}
    files = {}
    variants = list(spec["variants"])
    if args.both_variants:
        variants += [v for v in ("markers", "kernels") if v not in variants]
    for i, variant in enumerate(variants):
        fname = f"{name}.json.gz" if i == 0 else f"{name}_{variant}.json.gz"
        kept = filter_events(events, variant)
        meta = {"model": spec["model"], "params": mfacts["params"], **shape,
                "s_per_iter": meas["s_per_iter"], "J_per_iter": meas.get("J_per_iter"), "avg_W": meas.get("avg_W"),
                "iter": meas["iter"], "measured_iters": meas["steps"], "job": name, "variant": variant,
                "cats": cats, "kept": len(kept), **versions}
        size = write_trace(os.path.join(args.out, fname), kept, raw, meta)
        kc = {}
        for e in kept:
            kc[e["cat"]] = kc.get(e["cat"], 0) + 1
        files[variant] = {"file": fname, "bytes": size, "events": kc}
        flag = "  WARNING: over 3 MB" if size > 3_000_000 else ""
        print(f"   wrote {fname}: {len(kept)} events, {size / 1e3:.0f} kB{flag}", flush=True)

    part = {
        "name": name, "status": "ok", "kind": spec["kind"], "files": files,
        "model": mfacts["class"], "model_config": mfacts["config"], "params": mfacts["params"],
        "attn_implementation": mfacts["attn_implementation"],
        "experts_implementation": mfacts["experts_implementation"],
        "shape": shape, "dtype": "bfloat16", "optimizer": "AdamW(fused=True)" if spec["kind"] in ("train", "cut")
        else None,
        "true_step": spec["true_step"], **info,
        "kernels_per_step": [r["kernels"] for r in steps] if spec["kind"] in ("train", "cut") else None,
        "ops_per_step": [r["kernels"] + r["gpu_memcpy"] + r["gpu_memset"] for r in steps]
        if spec["kind"] in ("train", "cut") else None,
        "kernels_per_microbatch": [r["kernels"] for r in micro] or None,
        "kernels_per_forward": [r["kernels"] for r in fwds] or None,
        "kernels_per_traced_unit": [r["kernels"] for r in steps] if spec["kind"] in ("infer", "decode") else None,
        "kernels_in_trace": total["kernel"], "ops_in_trace": sum(total.values()),
        "ops_launched_outside_steps": outside, "ops_without_launch_event": no_launch,
        "ranges": rows, "measured": meas, "warmup_iters": args.warmup,
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        **versions, "elapsed_s": round(time.perf_counter() - t_start, 1),
    }
    if spec["kind"] == "cut":
        part["kernels_per_step_note"] = ("first entry: the whole step; second: the cut step's H2D copy + forward "
                                         "(and loss) only")
    with open(os.path.join(args.out, f"{name}.part.json"), "w") as f:
        json.dump(part, f, indent=1)
    ks = part["kernels_per_step"] or part["kernels_per_traced_unit"]
    print(f"   kernels per step/unit {ks}, per micro-batch {part['kernels_per_microbatch']}, per forward "
          f"{part['kernels_per_forward']}; {total['kernel']} kernels in trace, {outside} ops launched outside "
          f"steps, {no_launch} without a launch event; {part['elapsed_s']} s", flush=True)
    return 0


def merge(args):
    jobs = []
    for item in args.results:
        name, _, rc = item.partition("=")
        p = os.path.join(args.out, f"{name}.part.json")
        if os.path.exists(p):
            with open(p) as f:
                part = json.load(f)
            if rc not in ("", "0"):
                part["status"] = f"files written, but exit status {rc}"
            os.remove(p)
        else:
            part = {"name": name, "status": "failed" if rc not in ("skipped",) else "skipped", "rc": rc,
                    "true_step": JOBS.get(name, {}).get("true_step")}
        jobs.append(part)
    manifest = {"what": "torch.profiler Chrome traces of small jobs for step-detector cases (record_step_traces.py)",
                "variants": {"kernels": "kernel, gpu_memcpy, gpu_memset events only",
                             "markers": "those + CPU ProfilerStep#N annotations, gpu_user_annotation ranges, "
                                        "cuda_runtime/cuda_driver calls that launched kept GPU work or synchronized"},
                "counting": "kernels per step: GPU ops tied to their launch call by correlation id, counted in the "
                            "CPU range (ProfilerStep#N) holding the launch, from the unfiltered trace",
                "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "wrapper_command": os.environ.get("RST_WRAPPER_CMD"), "jobs": jobs}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for j in jobs:
        files = ", ".join(f"{v['file']} ({v['bytes'] / 1e3:.0f} kB)" for v in j.get("files", {}).values())
        print(f"{j['name']:<20} {j['status']:<10} {files}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("job", choices=sorted(JOBS) + ["merge", "list"])
    p.add_argument("results", nargs="*", help="merge: JOB=RC for each job run")
    p.add_argument("--out", default=".", help="output folder")
    p.add_argument("--quick", action="store_true", help="fewer warm-up and measured iterations")
    p.add_argument("--warmup", type=int, help="untraced warm-up iterations (default 3; --quick 2)")
    p.add_argument("--min-measure", type=int, help="least measured iterations (default 10; --quick 5)")
    p.add_argument("--max-measure", type=int, default=200, help="most measured iterations")
    p.add_argument("--measure-s", type=float, help="aim the measurement at this many seconds (default 2; --quick 0.5)")
    p.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="attn_implementation")
    p.add_argument("--moe-experts", default="eager",
                   help="Mixtral experts_implementation: eager (loop over hit experts), grouped_mm, batched_mm, or "
                        "default (the library's choice)")
    p.add_argument("--decode", default="generate", choices=["generate", "manual"],
                   help="decode with model.generate (falls back to manual on failure) or a hand-written loop")
    p.add_argument("--both-variants", action="store_true", help="write the markers and kernels variants of every job")
    p.add_argument("--keep-raw", action="store_true", help="also write the unfiltered trace, JOB.raw.json.gz")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a job setting (batch, seq, layers, hidden, steps, ...)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_intermixed_args()
    if a.job == "list":
        for k, v in JOBS.items():
            print(f"{k:<20} {v['kind']:<7} {v['true_step']}")
        return 0
    os.makedirs(a.out, exist_ok=True)
    if a.job == "merge":
        return merge(a)
    a.warmup = a.warmup if a.warmup is not None else (2 if a.quick else 3)
    a.min_measure = a.min_measure if a.min_measure is not None else (5 if a.quick else 10)
    a.measure_s = a.measure_s if a.measure_s is not None else (0.5 if a.quick else 2.0)
    return run_job(a.job, a)


if __name__ == "__main__":
    sys.exit(main())
