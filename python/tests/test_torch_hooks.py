"""gearshift.torch without torch or a GPU: step markers, the in-process runtime and its bad uses."""

import json
import os

import pytest

import gearshift
import gearshift.torch as gt


def _plan_file(tmp_path, names=("gemm_a", "gemm_b", "ncclAllReduce"), clocks=((1980, 4800), (1200, 4800), (1980, 4800))):
    positions, t = [], 0.0
    for name, (sm, mem) in zip(names, clocks):
        positions.append({"name": name, "duration_us": 1000.0, "start_offset_us": t, "sm_clock_mhz": sm,
                          "mem_clock_mhz": mem})
        t += 1000.0
    plan = {"format": "gearshift-plan", "version": 1, "gpu": "h200", "switch_latency_us": 0.0,
            "period_us": t, "positions": positions}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    return str(p)


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
    rt = gt.enable(plan=_plan_file(tmp_path), dry_run_log=str(log))
    assert gt.enabled()
    assert os.environ["GEARSHIFT_RUNTIME_FD"] == str(rt.fd)
    assert rt.writes_clocks is False
    t = 1_000_000_000
    corr = 0
    for step in range(6):
        for name in ("gemm_a", "gemm_b", "ncclAllReduce"):
            corr += 1
            assert rt.feed_line(f"L {t} {corr} {name}")
            assert rt.feed_line(f"C {corr} {t + 100_000} {t + 1_100_000}")
            t += 1_000_000
    assert rt.feed_line("garbage") is False
    stats = gt.disable()
    assert not gt.enabled()
    assert stats["launches"] == 18
    assert stats["steps"] >= 4
    assert stats["changes"] >= 2  # it lowered for gemm_b and raised after it, step after step
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert {x["sm_clock_mhz"] for x in lines} >= {1200}
    assert "GEARSHIFT_RUNTIME_FD" not in os.environ


def test_launch_feed_through_the_pipe(tmp_path):
    rt = gt.enable(plan=_plan_file(tmp_path))
    t, corr = 1_000_000_000, 0
    chunks = []
    for _ in range(3):
        for name in ("gemm_a", "gemm_b", "ncclAllReduce"):
            corr += 1
            chunks.append(f"L {t} {corr} {name}\nC {corr} {t + 1} {t + 900_000}\n")
            t += 1_000_000
    os.write(rt.fd, "".join(chunks).encode())
    stats = gt.disable()
    assert stats["launches"] == 9


def test_enable_twice_raises_already_enabled(tmp_path):
    gt.enable(plan=_plan_file(tmp_path))
    with pytest.raises(gearshift.AlreadyEnabledError):
        gt.enable(plan=_plan_file(tmp_path))
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
    rt = gt.enable(plan=_plan_file(tmp_path), apply=True)
    assert rt.writes_clocks is True
    with pytest.raises(gearshift.GpuBusyError):  # one owner per GPU: a second runtime in this process
        gearshift.torch.Runtime(_plan_file(tmp_path), True, 0, "")
    gt.disable()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges in a child")
def test_apply_without_permission_raises_permission_error(simgpu, tmp_path):
    simgpu(fault="no-permission")
    plan = _plan_file(tmp_path)
    os.chmod(tmp_path, 0o777)
    pid = os.fork()
    if pid == 0:  # child: an unprivileged user on a GPU whose NVML restricts clocks to root
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            try:
                gt.enable(plan=plan, apply=True)
                code = 1
            except gearshift.GpuPermissionError as e:
                code = 0 if "may not set GPU clocks" in str(e) and isinstance(e, PermissionError) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
