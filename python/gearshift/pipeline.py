"""Pipeline-parallel hooks without a fork of Megatron-LM.

Call :func:`instruction` around every forward and backward of a pipeline schedule (or apply
:func:`patch_megatron_core` once at start-up). Each call opens an NVTX range "gearshift.forward" /
"gearshift.backward" (when torch uses CUDA) and records the instruction's time, which :class:`Recorder`
turns into this stage's profile rows for the pipeline planner (``gearshift pipeline``, Perseus-style).

Megatron-Core call sites (``megatron/core/pipeline_parallel/schedules.py``): the module-level functions
``forward_step(forward_step_func, data_iterator, model, num_microbatches, input_tensor, forward_data_store,
config, ..., current_microbatch=None, ...)`` and ``backward_step(input_tensor, output_tensor,
output_tensor_grad, model_type, config)``. Every schedule in that module
(``forward_backward_no_pipelining``, ``forward_backward_pipelining_without_interleaving``,
``forward_backward_pipelining_with_interleaving``) calls them through the module's globals, so replacing
the two attributes of the module wraps every forward and backward of every schedule.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from ._errors import ProfileError

KINDS = ("forward", "backward", "recompute")


@dataclass
class InstructionRecord:
    """One executed instruction: kind, microbatch index, wall time (s) and start (perf_counter s)."""

    kind: str
    microbatch: int
    time_s: float
    start_s: float


class Recorder:
    """Collects this stage's instructions (thread-safe). One per process; :func:`recorder` returns it.

    Times are host wall times of the hooked calls: with ``sync=True`` in :func:`instruction` they include
    the GPU work (the call waits for it), otherwise they only bound the launch time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: List[InstructionRecord] = []

    def add(self, r: InstructionRecord) -> None:
        with self._lock:
            self.records.append(r)

    def clear(self) -> None:
        with self._lock:
            self.records.clear()

    def mean_times(self) -> Dict[str, Tuple[float, int]]:
        """Mean time per instruction kind, s, and how many were averaged."""
        out: Dict[str, Tuple[float, int]] = {}
        with self._lock:
            for k in KINDS:
                ts = [r.time_s for r in self.records if r.kind == k]
                if ts:
                    out[k] = (sum(ts) / len(ts), len(ts))
        return out

    def profile_rows(self, stage: int, sm_clock_mhz: int, power_w: float) -> List[str]:
        """This stage's rows of a gearshift pipeline profile (``stage,instruction,sm_clock_mhz,time_s,
        energy_j,samples``): mean measured time per instruction at the SM clock it ran at (MHz), energy =
        ``power_w`` (the stage GPU's measured average power while running, W) × time.

        Raises:
            ProfileError: no forward or no backward was recorded.
        """
        means = self.mean_times()
        if "forward" not in means or "backward" not in means:
            raise ProfileError(f"stage {stage}: recorded no forward or no backward instruction")
        return [
            f"{stage},{k},{int(sm_clock_mhz)},{t:.9g},{t * power_w:.9g},{n}" for k, (t, n) in means.items()
        ]


_recorder = Recorder()


def recorder() -> Recorder:
    """The process-wide :class:`Recorder` that :func:`instruction` writes to."""
    return _recorder


def _cuda():
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


@contextlib.contextmanager
def instruction(kind: str, microbatch: int = -1, sync: bool = False) -> Iterator[None]:
    """Marks one pipeline instruction of this stage.

    Args:
        kind: "forward", "backward" or "recompute".
        microbatch: index of the microbatch within the iteration (-1 unknown).
        sync: wait for the GPU at both ends (torch.cuda.synchronize) so the recorded time is the GPU's;
            costs the overlap of host and GPU, so use it while profiling, not in production.

    Raises:
        ValueError: unknown kind.
    """
    if kind not in KINDS:
        raise ValueError(f"instruction kind {kind!r}: one of {KINDS}")
    cuda = _cuda()
    if cuda is not None:
        if sync:
            cuda.synchronize()
        cuda.nvtx.range_push(f"gearshift.{kind}#{microbatch}")
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if cuda is not None:
            if sync:
                cuda.synchronize()
            cuda.nvtx.range_pop()
        t1 = time.perf_counter()
        _recorder.add(InstructionRecord(kind, int(microbatch), t1 - t0, t0))


class _Counter:
    """Microbatch numbering for call sites that do not pass one: forwards in call order, backwards in the
    same order (1F1B and GPipe run backwards first-in first-out per stage)."""

    def __init__(self) -> None:
        self.forward = 0
        self.backward = 0

    def reset(self) -> None:
        self.forward = self.backward = 0


def patch_megatron_core(module=None, sync: bool = False) -> Callable[[], None]:
    """Wraps Megatron-Core's ``forward_step`` and ``backward_step`` with :func:`instruction`.

    Args:
        module: the schedules module (default: import ``megatron.core.pipeline_parallel.schedules``);
            tests pass a stand-in with the same two functions.
        sync: passed to :func:`instruction`.

    Returns:
        A function that undoes the patch. Patching twice is a no-op (the same undo is returned).

    Raises:
        ImportError: Megatron-Core is not installed and no module was given.
        AttributeError: the module lacks forward_step or backward_step.
    """
    if module is None:
        module = importlib.import_module("megatron.core.pipeline_parallel.schedules")
    fwd, bwd = module.forward_step, module.backward_step
    if getattr(fwd, "_gearshift_undo", None) is not None:
        return fwd._gearshift_undo
    counter = _Counter()

    @functools.wraps(fwd)
    def forward_step(*args, **kwargs):
        mb = kwargs.get("current_microbatch")
        if mb is None:
            mb = counter.forward
        counter.forward += 1
        with instruction("forward", mb, sync):
            return fwd(*args, **kwargs)

    @functools.wraps(bwd)
    def backward_step(*args, **kwargs):
        mb = counter.backward
        counter.backward += 1
        with instruction("backward", mb, sync):
            return bwd(*args, **kwargs)

    def undo() -> None:
        module.forward_step, module.backward_step = fwd, bwd

    forward_step._gearshift_undo = undo  # type: ignore[attr-defined]
    forward_step._gearshift_counter = counter  # type: ignore[attr-defined]
    module.forward_step, module.backward_step = forward_step, backward_step
    return undo


def plan(
    profile_csv: str,
    stages: int,
    microbatches: int,
    straggler: float = 1.0,
    time_unit_ms: float = 1.0,
    blocking_power_w: float = 0.0,
) -> dict:
    """The pipeline planner (1F1B; ``gearshift pipeline``) on a profile's text, in process. Modelled.

    Args:
        profile_csv: Perseus (``stage,instruction,frequency,time,energy``) or gearshift profile text with
            every stage's forward and backward at the same set of SM clocks (MHz), times s, energies J.
        straggler: F >= 1: another pipeline (or data-parallel rank) takes F·T_min; the "straggler" plan
            deadlines this pipeline there.

    Returns:
        ``{"summary": {...t_min_s, points...}, "schedules": {"plans": [{name, deadline_s, ranks: [{rank,
        instructions: [{instruction, microbatch, duration_s, sm_clock_mhz}]}]}]}}``.

    Raises:
        ProfileError: invalid profile. ValueError: straggler < 1.
    """
    from ._native import core
    import json

    return json.loads(
        core.plan_pipeline(profile_csv, int(stages), int(microbatches), float(straggler), float(time_unit_ms),
                           float(blocking_power_w))
    )


PROFILE_HEADER = "# gearshift pipeline profile v1\nstage,instruction,sm_clock_mhz,time_s,energy_j,samples\n"


def rank_schedule(plan_result: dict, rank: int, point: str = "straggler") -> Optional[dict]:
    """Rank ``rank``'s instruction list of the plan point ``point`` ("no_slowdown", "slowdown_1pct",
    "straggler"), or None when the plan lacks it."""
    for p in plan_result["schedules"].get("plans", []):
        if p["name"] == point:
            for r in p["ranks"]:
                if r["rank"] == rank:
                    return {"name": p["name"], "deadline_s": p["deadline_s"], "instructions": r["instructions"]}
    return None
