"""`pip install .` into a clean virtualenv, then the 600 J check through the installed package.

It compiles the C++ core a second time (minutes on 2 cores), so it runs only when asked:
GEARSHIFT_TEST_PIP_INSTALL=1 pytest python/tests/test_pip_install.py (make pip-check)."""

import os
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHECK = r"""
import os, time, gearshift
os.environ["GEARSHIFT_NVML_LIBRARY"] = gearshift.simulated_gpu_library()
os.environ["GEARSHIFT_SIMGPU_POWER_W"] = "300"
with gearshift.Monitor() as mon:
    mon.begin_window("w"); time.sleep(2.0); m = mon.end_window("w")
print(gearshift.__file__)
print(m.energy_j[0], m.time_s, m.approximate)
"""


@pytest.mark.skipif(os.environ.get("GEARSHIFT_TEST_PIP_INSTALL") != "1", reason="set GEARSHIFT_TEST_PIP_INSTALL=1")
def test_pip_install_in_clean_venv_then_600_j(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", str(ROOT)], check=True, cwd=tmp_path)
    out = subprocess.run([py, "-c", CHECK], check=True, cwd=tmp_path, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout.split("\n")
    assert str(env_dir) in out[0]  # the installed package, not the source tree
    energy, time_s, approximate = out[1].split()
    assert float(energy) == pytest.approx(600.0, rel=0.03)
    assert approximate == "False"
