"""gearshift: cut the GPU energy of LLM training without losing step time.

The package is a thin layer over gearshift's C++ core (``gearshift._core``, private):

- :class:`Monitor` / :class:`Measurement`: energy windows (``begin_window`` / ``end_window``), J and s.
- ``gearshift.torch``: ``step()`` marks a training step; ``enable()`` runs the online runtime in process.
- ``gearshift.pipeline``: ``instruction()`` hooks for pipeline schedules, Megatron-Core patch helper,
  per-stage profiles and the pipeline planner.
- ``gearshift.distributed``: planning across ranks over the job's own torch.distributed group.
- :func:`plan_ranks`: sync-aware slack across data-parallel ranks from their traces (modelled).

Errors are the classes of :mod:`gearshift._errors`, re-exported here (with ``FeedWarning``, a warning).
"""

from __future__ import annotations

import json
import math
from typing import List, Optional, Sequence

from ._errors import (
    AlreadyEnabledError,
    FeedWarning,
    GearshiftError,
    GpuBusyError,
    GpuPermissionError,
    ModelRefusedError,
    NoGpuError,
    NoIterationError,
    PlanError,
    ProfileError,
    TraceError,
    WindowError,
)
from ._native import core as _core
from .monitor import Measurement, Monitor, simulated_gpu_library

__version__: str = _core.__version__  # CMake's project(VERSION): one place for C++, the CLI and this package

__all__ = [
    "AlreadyEnabledError",
    "FeedWarning",
    "GearshiftError",
    "GpuBusyError",
    "GpuPermissionError",
    "Measurement",
    "ModelRefusedError",
    "Monitor",
    "NoGpuError",
    "NoIterationError",
    "PlanError",
    "ProfileError",
    "TraceError",
    "WindowError",
    "plan_ranks",
    "plan_trace",
    "simulated_gpu_library",
]


def plan_trace(trace: str, max_slowdown: float = 0.005, gpu: Optional[str] = None) -> dict:
    """``gearshift plan TRACE -o plan.json`` in process: the plan file's content (modelled figures).

    Args:
        trace: torch.profiler Chrome trace (.json/.json.gz) or gearshift trace of >= 2 training steps.
        max_slowdown: allowed step-time increase, fraction (0.005 = 0.5 %).
        gpu: GPU spec name (``gearshift gpus --spec all``); None: the GPU the trace names, else h200
            (``gearshift plan`` without ``--gpu``).

    Raises:
        TraceError (also: the trace's measured power is above the spec's power limit), NoIterationError,
        ModelRefusedError (the model cannot reproduce the trace's measured power),
        ValueError (unknown spec, or the trace names a GPU without one and ``gpu`` is None).
    """
    return json.loads(_core.plan_trace(str(trace), float(max_slowdown), "" if gpu is None else str(gpu)))


def plan_ranks(
    traces: Sequence[str],
    gpu: Optional[str] = None,
    strategy: str = "phase",
    switch_latency_ms: Optional[float] = None,
    calibrate: bool = True,
) -> dict:
    """Sync-aware slack across the data-parallel ranks of one job (``gearshift plan-ranks``), modelled.

    Every rank's wait at the gradient all-reduce is removed from its template, the deadline D is the
    slowest rank's wait-free step time (the straggler), and each faster rank is planned to arrive at D.

    Args:
        traces: one trace per rank, in rank order.
        gpu: GPU spec name; None: the GPU each trace names, else h200.
        strategy: "phase" (changes land ``switch_latency_ms`` later) or "kernel-global" (ideal switching).
        switch_latency_ms: the phase strategy's L, ms (>= 0); None: the GPU spec's estimate.
        calibrate: calibrate each rank's model to its trace's measured power (False: ``--no-calibrate``).

    Returns:
        ``{"report": {...deadline_s, straggler, job_step_time_before_s/after_s, ranks: [...]},
        "plans": [plan.json per rank]}``; times in s, energies in J per step.

    Raises:
        TraceError: unreadable trace, or ranks that do not run the same step. NoIterationError. ValueError.
        ModelRefusedError: a rank's calibration to its measured power is at a bound or impossible (as ``plan``).
    """
    paths: List[str] = [str(t) for t in traces]
    latency: Optional[float] = None  # None: the GPU spec's estimate
    if switch_latency_ms is not None:
        latency = float(switch_latency_ms)
        if not latency >= 0 or math.isinf(latency):
            # Before, any negative value silently became the GPU's estimate (as `--switch-latency-ms -1` did).
            raise ValueError(f"switch_latency_ms={switch_latency_ms!r}: the switch latency must be a number of ms >= 0")
    return json.loads(_core.plan_ranks(paths, "" if gpu is None else str(gpu), str(strategy), latency, bool(calibrate)))
