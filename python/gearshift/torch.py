"""PyTorch hooks: step markers and the in-process online runtime.

``with gearshift.torch.step():`` wraps one training step in an NVTX range named "gearshift.step" (what
gearshift's tracer, importer and runtime recognise as a step) and records the step's wall time (s), which
``gearshift.distributed`` all-gathers for the straggler factor. Without torch or CUDA the range is skipped
and only the time is recorded.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Deque, Iterator, Optional

from ._errors import AlreadyEnabledError, PlanError
from ._native import core

STEP_RANGE = "gearshift.step"

_step_times: Deque[float] = deque(maxlen=256)  # s, most recent last
_lock = threading.Lock()
_runtime: Optional["Runtime"] = None


def _nvtx():
    # Use torch only if the user's program already imported it (gearshift never pulls torch in).
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.nvtx


@contextlib.contextmanager
def step(name: str = STEP_RANGE) -> Iterator[None]:
    """Marks one training step: an NVTX range ``name`` (default "gearshift.step") around the body.

    Records the body's wall time (s) in :func:`step_times`. Nesting steps is allowed but pointless.
    """
    nvtx = _nvtx()
    if nvtx is not None:
        nvtx.range_push(name)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        if nvtx is not None:
            nvtx.range_pop()
        with _lock:
            _step_times.append(dt)


def step_times() -> list:
    """Wall times of the most recent steps (up to 256), s, oldest first."""
    with _lock:
        return list(_step_times)


class Runtime:
    """The online runtime running in this process (returned by :func:`enable`).

    Launch events reach it through :meth:`feed_line` (protocol of docs/runtime.md: ``L <cpu_ns> <corr>
    <name>`` / ``C <corr> <gpu_start_ns> <gpu_end_ns>``, CLOCK_MONOTONIC ns) or through the pipe whose write
    end is :attr:`fd` (also exported as ``GEARSHIFT_RUNTIME_FD`` for an in-process launch hook).
    """

    def __init__(self, plan_path: str, apply: bool, gpu_index: int, dry_run_log: str) -> None:
        watchdog = (shutil.which("gearshift") or "") if apply else ""
        self._rt = core._Runtime(plan_path, bool(apply), int(gpu_index), dry_run_log, watchdog)
        self.plan_path = plan_path
        self.apply = bool(apply)
        self.dry_run_log = dry_run_log
        self.stats: Optional[dict] = None

    @property
    def fd(self) -> int:
        """Write end of the launch-feed pipe."""
        return int(self._rt.fd)

    @property
    def writes_clocks(self) -> bool:
        """True while it locks clocks through NVML (apply=True and permitted)."""
        return bool(self._rt.writes_clocks)

    def feed_line(self, line: str) -> bool:
        """Hands one launch-feed event to the runtime; False when the line is not a valid event."""
        return bool(self._rt.feed_line(line))

    def stop(self) -> dict:
        """Stops the runtime, restores default clocks; returns counts (launches, steps, changes, ...)."""
        if self.stats is None:
            self.stats = dict(self._rt.stop())
        return self.stats


def _resolve_plan(plan: Optional[str], max_slowdown: float) -> str:
    if plan is None:
        plan = os.environ.get("GEARSHIFT_PLAN")
    if plan is None:
        raise PlanError(
            "enable() needs plan=PATH: a plan.json (`gearshift plan TRACE -o plan.json`) or a trace of this "
            "job (planned here with max_slowdown); planning online without a trace is not implemented"
        )
    plan = os.fspath(plan)
    if not os.path.exists(plan):
        raise PlanError(f"{plan}: no such file")
    if not plan.endswith(".gz"):
        try:
            with open(plan, "rb") as f:
                head = f.read(4096)
            if b'"gearshift-plan"' in head:
                return plan
        except OSError as e:
            raise PlanError(f"{plan}: {e}") from e
    # A trace: plan it now (modelled), like `gearshift plan TRACE --max-slowdown X -o plan.json`.
    from . import plan_trace

    content = plan_trace(plan, max_slowdown=max_slowdown)
    fd, path = tempfile.mkstemp(prefix="gearshift-plan-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(content, f)
    return path


def enable(
    plan: Optional[str] = None,
    max_slowdown: float = 0.005,
    apply: bool = False,
    gpu_index: Optional[int] = None,
    dry_run_log: Optional[str] = None,
) -> Runtime:
    """Starts the online runtime in this process (the in-process form of ``gearshift run``).

    Args:
        plan: plan.json path, or a trace of this job (planned now under ``max_slowdown``); None reads
            ``$GEARSHIFT_PLAN``.
        max_slowdown: allowed step-time increase when planning from a trace, fraction.
        apply: lock GPU clocks through NVML (needs root / CAP_SYS_ADMIN). False = dry run: the intended
            changes are only logged (``dry_run_log``, JSON lines) and the GPU is never touched.
        gpu_index: NVML index to control; default ``$LOCAL_RANK`` or 0.

    Returns:
        The :class:`Runtime`; :func:`disable` stops it (also at interpreter exit).

    Raises:
        AlreadyEnabledError: enable() twice without disable().
        PlanError, TraceError, NoIterationError: bad plan or trace.
        NoGpuError: apply=True without a usable GPU.
        GpuPermissionError: apply=True without the right to set clocks.
        GpuBusyError: apply=True while another gearshift controls that GPU.
    """
    global _runtime
    with _lock:
        if _runtime is not None:
            raise AlreadyEnabledError("gearshift.torch.enable() was already called; call disable() first")
        path = _resolve_plan(plan, max_slowdown)
        if gpu_index is None:
            gpu_index = int(os.environ.get("LOCAL_RANK", "0"))
        rt = Runtime(path, apply, gpu_index, dry_run_log or "")
        os.environ["GEARSHIFT_RUNTIME_FD"] = str(rt.fd)
        _runtime = rt
    return rt


def disable() -> Optional[dict]:
    """Stops the in-process runtime and restores default clocks; returns its counts (None if not enabled)."""
    global _runtime
    with _lock:
        rt, _runtime = _runtime, None
    if rt is None:
        return None
    os.environ.pop("GEARSHIFT_RUNTIME_FD", None)
    return rt.stop()


def enabled() -> bool:
    """True while the in-process runtime runs."""
    return _runtime is not None


atexit.register(disable)
