"""PyTorch hooks: step markers and the in-process online runtime.

``with gearshift.torch.step():`` wraps one training step in an NVTX range named "gearshift.step" (what
gearshift's tracer, importer and runtime recognise as a step) and records the step's wall time (s), which
``gearshift.distributed`` all-gathers for the straggler factor. Without torch or CUDA the range is skipped
and only the time is recorded.

``enable()`` runs the online runtime in this process and feeds it this process's kernel launches: it loads
gearshift's CUPTI injection library (libgearshift_inject.so, shipped next to the extension) and attaches its
launch feed to the runtime's pipe; ``disable()`` detaches it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from typing import Deque, Iterator, Optional

from ._errors import AlreadyEnabledError, FeedWarning, PlanError
from ._native import core

STEP_RANGE = "gearshift.step"
INJECT_LIBRARY = "libgearshift_inject.so"
# Results of gearshift_feed_attach (src/cupti/inject_api.h).
_FEED_ATTACHED = 0

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


_inject_lock = threading.Lock()
_inject_libs: dict = {}  # path -> ctypes.CDLL; never unloaded (CUPTI keeps pointers to its callbacks)


def inject_library_path() -> str:
    """Path of the CUPTI injection library that :func:`enable` loads (it may not exist).

    In order: ``$GEARSHIFT_INJECT_LIBRARY``; the library the CUDA driver was told to inject
    (``$CUDA_INJECTION64_PATH`` when it names libgearshift_inject.so: the same copy, so that enable() sees
    the tracer that already runs); the copy installed with the package (in a CMake build tree:
    ``build/python/gearshift``).
    """
    override = os.environ.get("GEARSHIFT_INJECT_LIBRARY")
    if override:
        return override
    injected = os.environ.get("CUDA_INJECTION64_PATH", "")
    if os.path.basename(injected) == INJECT_LIBRARY:
        return injected
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), INJECT_LIBRARY)


def _inject_library() -> ctypes.CDLL:
    """The loaded injection library; OSError (with the reason) when it cannot be loaded."""
    path = inject_library_path()
    with _inject_lock:
        lib = _inject_libs.get(path)
        if lib is not None:
            return lib
        if not os.path.exists(path):
            raise OSError(
                f"{path} does not exist (gearshift built without CUPTI headers?); set GEARSHIFT_INJECT_LIBRARY "
                "to libgearshift_inject.so"
            )
        lib = ctypes.CDLL(path)
        try:
            lib.gearshift_feed_attach.argtypes = [ctypes.c_int]
            lib.gearshift_feed_attach.restype = ctypes.c_int
            lib.gearshift_feed_detach.argtypes = []
            lib.gearshift_feed_detach.restype = ctypes.c_int
            lib.gearshift_feed_error.argtypes = []
            lib.gearshift_feed_error.restype = ctypes.c_char_p
        except AttributeError as e:
            raise OSError(f"{path} has no gearshift_feed_attach (an older gearshift?)") from e
        _inject_libs[path] = lib
        return lib


class Runtime:
    """The online runtime running in this process (returned by :func:`enable`).

    Launch events reach it from the CUPTI launch feed (:meth:`attach_feed`, done by :func:`enable`), through
    :meth:`feed_line` (protocol of docs/runtime.md: ``L <cpu_ns> <corr> <name>`` / ``C <corr> <gpu_start_ns>
    <gpu_end_ns>``, CLOCK_MONOTONIC ns) or through the pipe whose write end is :attr:`fd` (in this process only:
    other processes of a job reach ``gearshift run`` through its socket, not this runtime).
    """

    def __init__(
        self,
        plan_path: str,
        apply: bool,
        gpu_index: int,
        dry_run_log: str,
        *,
        verify: bool = True,
        budget: float = 0.005,
        verify_log: str = "",
        verify_block_steps: int = 5,
        verify_block_s: float = 0.0,
    ) -> None:
        watchdog = (shutil.which("gearshift") or "") if apply else ""
        self._rt = core._Runtime(
            plan_path,
            bool(apply),
            int(gpu_index),
            dry_run_log,
            watchdog,
            bool(verify),
            float(budget),
            verify_log,
            int(verify_block_steps),
            float(verify_block_s),
        )
        self.plan_path = plan_path
        self.apply = bool(apply)
        self.dry_run_log = dry_run_log
        self.stats: Optional[dict] = None
        self._feed_lib: Optional[ctypes.CDLL] = None  # set while the CUPTI feed writes into our pipe
        # Why the CUPTI launch feed is not attached (None when it is, or when it was never asked for).
        self.feed_error: Optional[str] = None

    @property
    def feed_attached(self) -> bool:
        """True while the CUPTI launch feed writes this process's launches into the runtime's pipe."""
        return self._feed_lib is not None

    def attach_feed(self) -> bool:
        """Attaches the CUPTI launch feed (this process's kernel launches from now on) to the runtime's pipe.

        Returns True when attached (or already attached); False when it cannot be, with the reason in
        :attr:`feed_error` (one ``gearshift-trace: warning:`` line on stderr too). Never raises for a missing
        library or CUPTI: the program runs on, the runtime sees no launches.
        """
        if self._feed_lib is not None:
            return True
        if self.stats is not None:
            self.feed_error = "the runtime is stopped"
            return False
        try:
            lib = _inject_library()
        except OSError as e:
            self.feed_error = f"cannot load the CUPTI injection library: {e}"
            return False
        rc = lib.gearshift_feed_attach(self.fd)
        if rc != _FEED_ATTACHED:
            self.feed_error = (lib.gearshift_feed_error() or b"").decode(errors="replace") or f"code {rc}"
            return False
        self._feed_lib, self.feed_error = lib, None
        return True

    def detach_feed(self) -> None:
        """Detaches the CUPTI launch feed: CUPTI flushed, its last launches and completions written, CUPTI
        released (torch.profiler may subscribe again). No-op when not attached."""
        lib, self._feed_lib = self._feed_lib, None
        if lib is not None:
            lib.gearshift_feed_detach()

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
        """Detaches the launch feed, stops the runtime and restores default clocks.

        Returns its counts: ``launches`` (launch events received, fed or from CUPTI), ``syncs`` (device/stream
        synchronizes received: GPU progress), ``markers`` (stream markers received: idem), ``steps``, ``changes``
        (clock changes), ``dropped``, ``prediction_accuracy`` and ``in_time_fraction`` (fractions),
        ``dry_run_changes``, and ``verification``: the measured verification's summary lines (blocks of whole
        steps alternating the plan and the baseline clocks with apply=True, the measured step time and energy
        per step saving with their 95 % intervals; docs/verification.md), "" when it was off. Calling it again
        returns the same dict.
        """
        if self.stats is None:
            # First: the feed's last lines must reach the pipe, and its end must close, before the runtime
            # reads to the end of the pipe.
            self.detach_feed()
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
    launch_feed: bool = True,
    verify: bool = True,
    verify_log: Optional[str] = None,
) -> Runtime:
    """Starts the online runtime in this process (the in-process form of ``gearshift run``).

    With ``launch_feed`` (default) it attaches gearshift's CUPTI launch feed: every kernel launch of this
    process from now on, and each kernel's GPU start and end, reach the runtime; nothing else in the program
    changes. CUDA may already be initialised. While attached, gearshift is this process's CUPTI client, so
    torch.profiler (also one) cannot profile until :func:`disable`.

    When the feed cannot be attached, enable() still returns the running Runtime, with
    ``feed_attached == False`` and the reason in ``feed_error``, and warns once with :class:`FeedWarning`:
    the libgearshift_inject.so library is missing (see :func:`inject_library_path`), CUPTI is missing or
    older than CUDA 12, another CUPTI client (torch.profiler, Nsight) holds CUPTI, or the gearshift tracer
    already runs in this process (the job was started by ``gearshift trace`` / ``gearshift run``, whose own
    feed or trace goes on; use one runtime or the other). A job that must not run without the feed turns the
    warning into an error: ``warnings.simplefilter("error", gearshift.FeedWarning)`` makes enable() raise it
    (the runtime is then stopped and not enabled).

    Args:
        plan: plan.json path, or a trace of this job (planned now under ``max_slowdown``); None reads
            ``$GEARSHIFT_PLAN``.
        max_slowdown: allowed step-time increase, fraction: the budget a trace is planned for, and the one the
            measured verification keeps.
        apply: lock GPU clocks through NVML (needs root / CAP_SYS_ADMIN). False = dry run: the intended
            changes are only logged (``dry_run_log``, JSON lines) and the GPU is never touched.
        gpu_index: NVML index to control; default ``$LOCAL_RANK`` or 0.
        launch_feed: attach the CUPTI launch feed. False: launches come only from :meth:`Runtime.feed_line`
            or the pipe :attr:`Runtime.fd` (a program with its own launch hook; tests).
        verify: measure the plan on the job (docs/verification.md): with apply=True, blocks of whole steps
            alternate the plan and the baseline clocks and the step-time budget ``max_slowdown`` is kept as
            measured (the plan scaled back, or the baseline); in a dry run the blocks only measure the job's noise
            floor. Its summary is in :meth:`Runtime.stop`'s ``verification``.
        verify_log: one JSON line per verification block and decision, to this file.

    Returns:
        The :class:`Runtime`; :func:`disable` stops it (also at interpreter exit).

    Raises:
        AlreadyEnabledError: enable() twice without disable().
        PlanError, TraceError, NoIterationError: bad plan or trace.
        NoGpuError: apply=True without a usable GPU.
        GpuPermissionError: apply=True without the right to set clocks.
        GpuBusyError: apply=True while another gearshift controls that GPU.
        FeedWarning: only when the program made that warning an error (see above).
    """
    global _runtime
    with _lock:
        if _runtime is not None:
            raise AlreadyEnabledError("gearshift.torch.enable() was already called; call disable() first")
        path = _resolve_plan(plan, max_slowdown)
        if gpu_index is None:
            gpu_index = int(os.environ.get("LOCAL_RANK", "0"))
        rt = Runtime(
            path, apply, gpu_index, dry_run_log or "", verify=verify, budget=max_slowdown, verify_log=verify_log or ""
        )
        try:
            if launch_feed and not rt.attach_feed():
                warnings.warn(
                    f"gearshift.torch.enable(): the runtime will see no kernel launches and keep the default "
                    f"clocks: {rt.feed_error}",
                    FeedWarning,
                    stacklevel=2,
                )
        except BaseException:
            rt.stop()  # the warning made an error (or interrupted): leave nothing running
            raise
        _runtime = rt
    return rt


def disable() -> Optional[dict]:
    """Detaches the launch feed, stops the in-process runtime and restores default clocks.

    Returns its counts (:meth:`Runtime.stop`; ``launches`` counts the launches the runtime received), or None
    when it was not enabled.
    """
    global _runtime
    with _lock:
        rt, _runtime = _runtime, None
    if rt is None:
        return None
    return rt.stop()


def enabled() -> bool:
    """True while the in-process runtime runs."""
    return _runtime is not None


atexit.register(disable)
