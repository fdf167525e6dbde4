"""Windows over the simulated GPU (GEARSHIFT_NVML_LIBRARY -> libgearshift_simgpu.so): the same C++ sampler
as `gearshift monitor`."""

import time

import pytest

import gearshift


def test_two_second_window_at_300_w_reports_600_j(simgpu):
    with gearshift.Monitor() as mon:
        assert mon.gpu_indices == [0]
        mon.begin_window("train")
        time.sleep(2.0)
        m = mon.end_window("train")
    assert isinstance(m, gearshift.Measurement)
    assert set(m.energy_j) == {0}
    assert m.time_s == pytest.approx(2.0, abs=0.2)
    assert m.energy_j[0] == pytest.approx(300.0 * m.time_s, rel=0.03)
    assert m.energy_j[0] == pytest.approx(600.0, rel=0.03)
    assert m.approximate is False
    assert m.method[0] == "counter"
    assert m.avg_power_w[0] == pytest.approx(300.0, rel=0.03)


def test_context_manager_window_and_two_gpus(simgpu):
    simgpu(count=2, power_w=150)
    with gearshift.Monitor() as mon:
        with mon.window("w") as w:
            time.sleep(0.5)
    m = w.measurement
    assert set(m.energy_j) == {0, 1}
    for g in (0, 1):
        assert m.energy_j[g] == pytest.approx(150.0 * m.time_s, rel=0.05)
    assert m.total_energy_j == pytest.approx(sum(m.energy_j.values()))


def test_selected_gpu_only(simgpu):
    simgpu(count=2)
    with gearshift.Monitor(gpu_indices=[1]) as mon:
        assert mon.gpu_indices == [1]
        mon.begin_window("a")
        m = mon.end_window("a")
    assert set(m.energy_j) == {1}


def test_short_window_is_marked_approximate(simgpu):
    with gearshift.Monitor() as mon:
        mon.begin_window("short")
        time.sleep(0.02)
        m = mon.end_window("short")
    assert m.approximate is True
    assert m.energy_j[0] == pytest.approx(300.0 * m.time_s, rel=0.25)


def test_nested_and_overlapping_windows_of_different_names(simgpu):
    with gearshift.Monitor() as mon:
        mon.begin_window("outer")
        mon.begin_window("inner")
        time.sleep(0.3)
        inner = mon.end_window("inner")
        outer = mon.end_window("outer")
    assert outer.time_s >= inner.time_s
    assert outer.energy_j[0] >= inner.energy_j[0]


def test_end_of_unknown_window_raises_window_error(simgpu):
    with gearshift.Monitor() as mon:
        with pytest.raises(gearshift.WindowError, match="nope"):
            mon.end_window("nope")
        with pytest.raises(ValueError):  # WindowError is also a ValueError
            mon.end_window("nope")


def test_same_name_nested_raises_window_error(simgpu):
    with gearshift.Monitor() as mon:
        mon.begin_window("step")
        with pytest.raises(gearshift.WindowError, match="step"):
            mon.begin_window("step")
        mon.end_window("step")  # the first one is still usable


def test_closed_monitor_raises(simgpu):
    mon = gearshift.Monitor()
    mon.close()
    mon.close()
    with pytest.raises(gearshift.GearshiftError):
        mon.begin_window("x")


def test_no_nvml_library_raises_no_gpu_error(monkeypatch, tmp_path):
    monkeypatch.setenv("GEARSHIFT_NVML_LIBRARY", str(tmp_path / "libnvidia-ml-missing.so"))
    with pytest.raises(gearshift.NoGpuError, match="NVML"):
        gearshift.Monitor()


def test_zero_gpus_raises_no_gpu_error(simgpu):
    simgpu(count=0)
    with pytest.raises(gearshift.NoGpuError):
        gearshift.Monitor()


def test_gpu_index_out_of_range_raises_no_gpu_error(simgpu):
    with pytest.raises(gearshift.NoGpuError, match="index 3"):
        gearshift.Monitor(gpu_indices=[3])
