"""Energy measurement windows (Zeus-style) over gearshift's C++ sampler thread.

NVML is only called on the sampler's own thread (an energy-counter read took ~4 ms on an H200), so
``begin_window`` returns at once; ``end_window`` waits until the counter's next update after the window's
end (at most one update period, ~100 ms on H200) to place both edges precisely.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, Optional

from ._native import core


@dataclass(frozen=True)
class Measurement:
    """One window's result.

    Attributes:
        time_s: window duration, s.
        energy_j: energy per GPU over the window, J, keyed by NVML GPU index.
        approximate: True when any GPU's energy came from power samples or plain counter differences
            (window shorter than the counter period, no counter, GPU lost) instead of located counter ticks.
        avg_power_w: energy / time per GPU, W.
        method: per GPU, "counter", "power" or "counter-reads".
    """

    time_s: float
    energy_j: Dict[int, float]
    approximate: bool
    avg_power_w: Dict[int, float] = field(default_factory=dict)
    method: Dict[int, str] = field(default_factory=dict)

    @property
    def total_energy_j(self) -> float:
        """Sum over GPUs, J."""
        return float(sum(self.energy_j.values()))


def _cuda_synchronize() -> None:
    # Only when torch is already imported by the user: gearshift never imports torch itself here.
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Monitor:
    """Measures time and GPU energy of named windows.

    Args:
        gpu_indices: NVML indices of the GPUs to measure; None = every GPU NVML sees.

    Raises:
        NoGpuError: NVML cannot be loaded/initialised (no driver; ``GEARSHIFT_NVML_LIBRARY`` names a missing
            file) or an index does not exist.
        GpuPermissionError: NVML refuses this user.

    Windows may nest and overlap when their names differ. Use as a context manager to stop the sampler
    thread on exit (``close()`` does the same).
    """

    def __init__(self, gpu_indices: Optional[Iterable[int]] = None) -> None:
        idx = None if gpu_indices is None else [int(i) for i in gpu_indices]
        self._m = core._Monitor(idx)
        self._closed = False

    @property
    def gpu_indices(self) -> list:
        """NVML indices measured, in order."""
        return list(self._m.gpu_indices)

    def begin_window(self, name: str, sync: bool = True) -> None:
        """Opens window ``name``. With ``sync``, waits for queued CUDA work first (if torch uses CUDA).

        Raises:
            WindowError: a window of that name is already open.
        """
        self._check()
        if sync:
            _cuda_synchronize()
        self._m.begin(str(name))

    def end_window(self, name: str, sync: bool = True) -> Measurement:
        """Closes window ``name`` and returns its Measurement (blocks up to ~one counter period, 100 ms on H200).

        Raises:
            WindowError: no window of that name is open.
        """
        self._check()
        if sync:
            _cuda_synchronize()
        d = self._m.end(str(name))
        return Measurement(
            time_s=float(d["time_s"]),
            energy_j={int(k): float(v) for k, v in d["energy_j"].items()},
            approximate=bool(d["approximate"]),
            avg_power_w={int(k): float(v) for k, v in d["avg_power_w"].items()},
            method={int(k): str(v) for k, v in d["method"].items()},
        )

    def window(self, name: str, sync: bool = True) -> "_Window":
        """Context manager: ``with mon.window("step") as w: ...`` then ``w.measurement``."""
        return _Window(self, name, sync)

    def close(self) -> None:
        """Stops the sampler thread. Idempotent."""
        if not self._closed:
            self._closed = True
            self._m.close()

    def _check(self) -> None:
        if self._closed:
            from ._errors import GearshiftError

            raise GearshiftError("this Monitor is closed")

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Window:
    def __init__(self, monitor: Monitor, name: str, sync: bool) -> None:
        self._mon, self._name, self._sync = monitor, name, sync
        self.measurement: Optional[Measurement] = None

    def __enter__(self) -> "_Window":
        self._mon.begin_window(self._name, self._sync)
        return self

    def __exit__(self, *exc) -> None:
        self.measurement = self._mon.end_window(self._name, self._sync)


def simulated_gpu_library() -> str:
    """Path of the simulated GPU shipped with the package (libgearshift_simgpu.so).

    Point ``GEARSHIFT_NVML_LIBRARY`` at it before creating a Monitor to measure a simulated GPU
    (``GEARSHIFT_SIMGPU_POWER_W``, ``GEARSHIFT_SIMGPU_COUNT``, ``GEARSHIFT_SIMGPU_FAULT``: docs/monitor.md).
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgearshift_simgpu.so")
