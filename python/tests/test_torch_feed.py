"""gearshift.torch.enable() attaching the CUPTI launch feed, against the fake CUPTI of the C++ tests
(src/cupti/tests/fake_cupti.cpp): no GPU, no torch.

The feed cases run in a fresh interpreter each: CUPTI is loaded once per process (the first attach decides
which libcupti), and this test process must never load a real one.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import pytest

import gearshift
import gearshift.torch as gt

# The CMake build holding this package (PYTHONPATH=build/python): not resolved, the .py files are links.
BUILD = pathlib.Path(os.path.abspath(gearshift.__file__)).parents[2]
FAKE_CUPTI = BUILD / "src" / "cupti" / "libgearshift_fake_cupti.so"
INJECT = BUILD / "src" / "cupti" / "libgearshift_inject.so"

needs_fake_cupti = pytest.mark.skipif(
    not (FAKE_CUPTI.exists() and INJECT.exists()),
    reason=f"needs the CMake build's fake CUPTI and injection library ({FAKE_CUPTI}, {INJECT}): "
    "build with CUPTI headers and tests (make test), PYTHONPATH=build/python",
)

CU_LAUNCH_KERNEL = 307  # CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel

# The job: the plan's template step, launched through the fake driver (launch callback + activity record).
JOB = textwrap.dedent(
    """
    import ctypes, json, sys, warnings
    import gearshift.torch as gt

    plan, fake, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cupti = ctypes.CDLL(fake)  # the same handle the injection library opens (GEARSHIFT_CUPTI_LIBRARY)
    cupti.fake_cupti_launch_named.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p]
    cupti.fake_cupti_add_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32]
    names = [b"gemm_a", b"gemm_b", b"ncclAllReduce"]
    corr = 1
    cupti.fake_cupti_launch_named({cbid}, corr, b"before_enable")  # CUDA already in use: not fed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt = gt.enable(plan=plan)
    out = {{"attached": rt.feed_attached, "feed_error": rt.feed_error,
           "warnings": [str(w.message) for w in caught if issubclass(w.category, gt.FeedWarning)],
           "callbacks": cupti.fake_cupti_enabled_callbacks()}}
    t = 10_000_000
    for _ in range(steps):
        for name in names:
            corr += 1
            cupti.fake_cupti_launch_named({cbid}, corr, name)
            cupti.fake_cupti_add_kernel(name, t, t + 2_000_000, corr)
            t += 2_000_000
    out["stats"] = gt.disable()
    out["attached_after"] = rt.feed_attached
    out["callbacks_after"] = cupti.fake_cupti_enabled_callbacks()
    print(json.dumps(out))
    """
).format(cbid=CU_LAUNCH_KERNEL)


def _plan_file(tmp_path):
    positions = [
        {"name": n, "kind": "kernel", "duration_us": 2000.0, "start_offset_us": 2000.0 * i, "sm_clock_mhz": sm,
         "mem_clock_mhz": 3201}
        for i, (n, sm) in enumerate((("gemm_a", 1980), ("gemm_b", 1200), ("ncclAllReduce", 1980)))
    ]
    plan = {"format": "gearshift-plan", "version": 1, "gpu": "h200", "switch_latency_us": 0.0,
            "period_us": 6000.0, "positions": positions}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    return str(p)


def _run_job(tmp_path, steps, mode="ok"):
    env = dict(os.environ)
    env.update(GEARSHIFT_CUPTI_LIBRARY=str(FAKE_CUPTI), GEARSHIFT_INJECT_LIBRARY=str(INJECT), FAKE_CUPTI_MODE=mode,
               GEARSHIFT_TRACE_QUIET="1")
    for k in ("GEARSHIFT_RUNTIME_SOCKET", "GEARSHIFT_TRACE_OUTPUT", "CUDA_INJECTION64_PATH"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-c", JOB, _plan_file(tmp_path), str(FAKE_CUPTI), str(steps)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


@pytest.fixture(autouse=True)
def _always_disable():
    yield
    gt.disable()


@needs_fake_cupti
def test_enable_attaches_the_feed_and_the_runtime_counts_the_launches(tmp_path):
    out, err = _run_job(tmp_path, steps=5)
    assert out["attached"] is True, err
    assert out["feed_error"] is None
    assert out["warnings"] == []
    assert out["callbacks"] == 16  # the 8 launch and 8 synchronize callbacks CUPTI was asked for
    assert out["stats"]["launches"] == 15  # 5 steps x 3 kernels; the launch made before enable() is not fed
    assert out["stats"]["steps"] >= 3
    assert out["attached_after"] is False
    assert out["callbacks_after"] == 0  # disable() released CUPTI
    assert "warning" not in err


@needs_fake_cupti
def test_enable_with_a_profiler_holding_cupti_warns_and_runs_without_launches(tmp_path):
    out, err = _run_job(tmp_path, steps=2, mode="multiple")
    assert out["attached"] is False
    assert "another CUPTI client" in out["feed_error"]
    assert len(out["warnings"]) == 1
    assert "will see no kernel launches" in out["warnings"][0] and "another CUPTI client" in out["warnings"][0]
    assert out["stats"]["launches"] == 0
    assert err.count("gearshift-trace: warning: launch feed not attached") == 1


def test_missing_injection_library_warns_once_and_the_runtime_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GEARSHIFT_INJECT_LIBRARY", str(tmp_path / "libgearshift_inject.so"))
    assert gt.inject_library_path() == str(tmp_path / "libgearshift_inject.so")
    with pytest.warns(gearshift.FeedWarning, match="does not exist") as caught:
        rt = gt.enable(plan=_plan_file(tmp_path))
    assert len(caught) == 1
    assert gt.enabled()
    assert rt.feed_attached is False
    assert "libgearshift_inject.so does not exist" in rt.feed_error
    assert rt.feed_line("L 1 1 gemm_a") is True  # fed by hand, it still works
    assert gt.disable()["launches"] == 1


def test_feed_warning_made_an_error_raises_and_leaves_nothing_enabled(tmp_path, monkeypatch):
    monkeypatch.setenv("GEARSHIFT_INJECT_LIBRARY", str(tmp_path / "missing.so"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", gearshift.FeedWarning)
        with pytest.raises(gearshift.FeedWarning, match="missing.so does not exist"):
            gt.enable(plan=_plan_file(tmp_path))
    assert not gt.enabled()


def test_injection_library_path_defaults_to_the_package_copy(monkeypatch):
    monkeypatch.delenv("GEARSHIFT_INJECT_LIBRARY", raising=False)
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)
    assert gt.inject_library_path() == os.path.join(os.path.dirname(os.path.abspath(gt.__file__)), gt.INJECT_LIBRARY)
    # The copy the driver was told to inject is the one to talk to (the same library instance).
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/x/libgearshift_inject.so")
    assert gt.inject_library_path() == "/opt/x/libgearshift_inject.so"
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/x/libother.so")
    assert gt.inject_library_path().endswith("/gearshift/" + gt.INJECT_LIBRARY)
