"""gearshift.torch without torch or a GPU: step markers, the in-process runtime and its bad uses."""

import json
import os
import pathlib
import shutil
import tempfile
import time

import pytest

import gearshift
import gearshift.torch as gt


def _plan_file(tmp_path, names=("gemm_a", "gemm_b", "ncclAllReduce"), clocks=((1980, 3201), (1200, 3201), (1980, 3201))):
    positions, t = [], 0.0
    for name, (sm, mem) in zip(names, clocks):
        positions.append({"name": name, "kind": "kernel", "duration_us": 2000.0, "start_offset_us": t,
                          "sm_clock_mhz": sm, "mem_clock_mhz": mem})
        t += 2000.0
    plan = {"format": "gearshift-plan", "version": 1, "gpu": "h200", "switch_latency_us": 0.0,
            "period_us": t, "positions": positions}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    return str(p)


def _run_fake_job(write, steps, names=("gemm_a", "gemm_b", "ncclAllReduce"), dur_ns=2_000_000):
    """A stand-in job (like src/runtime/tests/fake_job.cpp): launches a step's kernels at once, then reports
    each kernel's completion when its simulated GPU time has passed (the runtime works in real time)."""
    from gearshift import _core

    corr = 0
    for _ in range(steps):
        t0 = _core.monotonic_ns()
        first = corr
        for name in names:
            write(f"L {_core.monotonic_ns()} {corr} {name}")
            corr += 1
        for i in range(len(names)):
            start, end = t0 + i * dur_ns, t0 + (i + 1) * dur_ns
            while _core.monotonic_ns() < end:
                time.sleep((end - _core.monotonic_ns()) / 1e9 if end > _core.monotonic_ns() else 0)
            write(f"C {first + i} {start} {end}")


@pytest.fixture(autouse=True)
def _always_disable():
    yield
    gt.disable()


def test_step_records_each_step_time():
    before = len(gt.step_times())
    for _ in range(3):
        with gt.step():
            pass
    times = gt.step_times()
    assert len(times) == min(before + 3, 256)
    assert all(t >= 0 for t in times[-3:])


def test_step_records_even_when_the_body_raises():
    n = len(gt.step_times())
    with pytest.raises(KeyError):
        with gt.step():
            raise KeyError("x")
    assert len(gt.step_times()) == min(n + 1, 256)


def test_enable_dry_run_follows_a_fed_launch_stream(tmp_path):
    log = tmp_path / "dry.jsonl"
    rt = gt.enable(plan=_plan_file(tmp_path), dry_run_log=str(log), launch_feed=False)
    assert gt.enabled()
    assert "GEARSHIFT_RUNTIME_FD" not in os.environ  # the pipe is this process's own: nothing to inherit
    assert rt.writes_clocks is False
    accepted = []
    _run_fake_job(lambda line: accepted.append(rt.feed_line(line)), steps=8)
    assert all(accepted)
    assert rt.feed_line("S 999 1 2") is True  # a synchronize line (docs/runtime.md's feed protocol)
    assert rt.feed_line("S 999 2 1") is False  # returned before it was entered
    assert rt.feed_line("M 5 10 20") is True  # a stream marker line
    assert rt.feed_line("M 5 20 10") is False  # seen before its previous poll
    assert rt.feed_line("Y 6 10 20 7 0 64 c Memcpy DtoD (Device -> Device)") is True  # a copy: for planning only
    assert rt.feed_line("Y 6 20 10 7 0 64 c Memcpy") is False  # ended before it started
    assert rt.feed_line("garbage") is False
    stats = gt.disable()
    assert not gt.enabled()
    assert stats["launches"] == 24
    assert stats["syncs"] == 1
    assert stats["markers"] == 1
    assert stats["steps"] >= 6
    assert stats["changes"] >= 4  # it lowered for gemm_b and raised after it, step after step
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert {x["sm_clock_mhz"] for x in lines} >= {1200}


def test_launch_feed_through_the_pipe(tmp_path):
    rt = gt.enable(plan=_plan_file(tmp_path), launch_feed=False)
    assert rt.feed_attached is False and rt.feed_error is None
    _run_fake_job(lambda line: os.write(rt.fd, (line + "\n").encode()), steps=3)
    stats = gt.disable()
    assert stats["launches"] == 9


def test_enable_twice_raises_already_enabled(tmp_path):
    gt.enable(plan=_plan_file(tmp_path), launch_feed=False)
    with pytest.raises(gearshift.AlreadyEnabledError):
        gt.enable(plan=_plan_file(tmp_path), launch_feed=False)
    assert gt.disable() is not None
    assert gt.disable() is None


def test_enable_without_plan_raises_plan_error(monkeypatch):
    monkeypatch.delenv("GEARSHIFT_PLAN", raising=False)
    with pytest.raises(gearshift.PlanError, match="plan=PATH"):
        gt.enable()
    assert not gt.enabled()


def test_enable_with_broken_plan_raises_plan_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "gearshift-plan", "version": 1}')
    with pytest.raises(gearshift.PlanError, match="gpu"):
        gt.enable(plan=str(bad))
    with pytest.raises(gearshift.PlanError, match="no such file"):
        gt.enable(plan=str(tmp_path / "missing.json"))
    # A position without its kind (plan-ranks wrote such plans; the runtime took copies for kernels), and clocks
    # the plan's GPU cannot set (plan/plan_file.hpp's checks, the same as `gearshift run --plan`'s).
    plan = json.loads(open(_plan_file(tmp_path)).read())
    del plan["positions"][1]["kind"]
    bad.write_text(json.dumps(plan))
    with pytest.raises(gearshift.PlanError, match=r"positions\[1\]: missing field 'kind'"):
        gt.enable(plan=str(bad))
    plan["positions"][1]["kind"] = "kernel"
    plan["positions"][1]["sm_clock_mhz"] = 5000
    bad.write_text(json.dumps(plan))
    with pytest.raises(gearshift.PlanError, match="SM 5000 MHz, memory 3201 MHz is not a clock pair of its GPU 'h200'"):
        gt.enable(plan=str(bad))
    assert not gt.enabled()


def test_enable_from_a_trace_that_is_not_one_raises_trace_error(tmp_path):
    junk = tmp_path / "trace.json"
    junk.write_text("{ not json")
    with pytest.raises(gearshift.TraceError):
        gt.enable(plan=str(junk))


def test_apply_without_gpu_raises_no_gpu_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GEARSHIFT_NVML_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(gearshift.NoGpuError):
        gt.enable(plan=_plan_file(tmp_path), apply=True)
    assert not gt.enabled()


def test_apply_on_the_simulated_gpu_locks_and_restores(simgpu, tmp_path):
    rt = gt.enable(plan=_plan_file(tmp_path), apply=True, launch_feed=False)
    assert rt.writes_clocks is True
    with pytest.raises(gearshift.GpuBusyError):  # one owner per GPU: a second runtime in this process
        gearshift.torch.Runtime(_plan_file(tmp_path), True, 0, "")
    gt.disable()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges in a child")
def test_apply_without_permission_raises_permission_error(simgpu, monkeypatch):
    # Files an unprivileged child can read: a plan and a lock folder under /tmp itself.
    plan_dir = pathlib.Path(tempfile.mkdtemp(prefix="gearshift-perm-", dir="/tmp"))
    plan = _plan_file(plan_dir)
    os.chmod(plan_dir, 0o755)
    os.chmod(plan, 0o644)
    locks = plan_dir / "locks"
    locks.mkdir(mode=0o777)
    os.chmod(locks, 0o777)
    monkeypatch.setenv("GEARSHIFT_LOCK_DIR", str(locks))
    monkeypatch.delenv("GEARSHIFT_SIMGPU_STATE")
    simgpu(fault="no-permission")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: an unprivileged user on a GPU whose NVML restricts clocks to root
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                gt.enable(plan=plan, apply=True, launch_feed=False)
                code = 1
            except gearshift.GpuPermissionError as e:
                code = 0 if "may not set GPU clocks" in str(e) and isinstance(e, PermissionError) else 2
            except BaseException as e:
                os.write(w, repr(e).encode())
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    detail = os.read(r, 4096).decode()
    os.close(r)
    shutil.rmtree(plan_dir, ignore_errors=True)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, detail


def test_apply_runs_measured_verification_blocks(simgpu, tmp_path):
    # The in-process runtime runs the same blocks as `gearshift run` (docs/verification.md): with apply=True they
    # alternate the plan and the baseline clocks in ABBA order, each block's steps and counter energy logged.
    log = tmp_path / "verify.jsonl"
    rt = gearshift.torch.Runtime(_plan_file(tmp_path), True, 0, "", verify=True, budget=0.02, verify_log=str(log),
                                 verify_block_steps=3, verify_block_s=0.3)
    _run_fake_job(rt.feed_line, steps=420)
    stats = rt.stop()
    assert "measured verification (applied" in stats["verification"]
    blocks = [json.loads(l) for l in log.read_text().splitlines()]
    arms = [b["arm"] for b in blocks if b["event"] == "block"]
    assert arms[:4] == ["plan", "baseline", "baseline", "plan"], stats["verification"]
    assert all(b["applied"] for b in blocks if b["event"] == "block")


def test_verification_off_says_nothing(simgpu, tmp_path):
    rt = gearshift.torch.Runtime(_plan_file(tmp_path), False, 0, "", verify=False)
    _run_fake_job(rt.feed_line, steps=5)
    assert rt.stop()["verification"] == ""
