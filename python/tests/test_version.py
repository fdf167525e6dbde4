"""One version: CMakeLists.txt's project(VERSION) is what the package, the C++ core and the CLI report."""

import pathlib
import re
import subprocess

import gearshift

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cmake_version() -> str:
    m = re.search(r"project\(gearshift VERSION ([0-9][0-9.]*)", (ROOT / "CMakeLists.txt").read_text())
    assert m, "CMakeLists.txt has no project(gearshift VERSION ...)"
    return m.group(1)


def test_package_version_is_cmakes():
    assert gearshift.__version__ == _cmake_version()


def test_cli_version_is_cmakes():
    exe = pathlib.Path(gearshift._core.__file__).resolve().parents[2] / "src" / "cli" / "gearshift"
    if not exe.exists():  # an installed package has no build tree beside it
        return
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"gearshift {_cmake_version()}"
