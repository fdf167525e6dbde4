"""Planning across the ranks of one job over its own torch.distributed process group (no extra server).

Pattern: every rank contributes what it measured (``all_gather_object``), rank ``src`` plans, and each rank
receives its own schedule (``scatter_object_list``). ``dist`` is the ``torch.distributed`` module by
default; anything with the same four functions (``get_rank``, ``get_world_size``, ``all_gather_object``,
``scatter_object_list``, same signatures) works, which is how the tests run without torch.
"""

from __future__ import annotations

import os
import tempfile
from typing import List, Optional, Sequence

from . import pipeline as _pipeline


def _dist(dist):
    if dist is None:
        import torch.distributed as dist  # noqa: PLC0415 - only when the user has torch

    return dist


def straggler_factors(step_times_s: Sequence[float]) -> List[float]:
    """Per rank: the slowest rank's step time / this rank's (>= 1). Every rank's deadline is the slowest's.

    Args:
        step_times_s: one step time per rank, s (> 0).

    Raises:
        ValueError: empty, or a time <= 0.
    """
    ts = [float(t) for t in step_times_s]
    if not ts or min(ts) <= 0:
        raise ValueError("straggler_factors needs one positive step time (s) per rank")
    slowest = max(ts)
    return [slowest / t for t in ts]


def gather_step_times(step_time_s: float, dist=None, group=None) -> List[float]:
    """All-gathers every rank's step time, s (rank order)."""
    d = _dist(dist)
    out: List[Optional[float]] = [None] * d.get_world_size(group)
    d.all_gather_object(out, float(step_time_s), group=group)
    return [float(t) for t in out]  # type: ignore[arg-type]


def _scatter_from(d, src: int, group, items: Optional[list]):
    box: list = [None]
    d.scatter_object_list(box, items if d.get_rank(group) == src else None, src=src, group=group)
    return box[0]


def plan_data_parallel(trace_path: str, dist=None, group=None, src: int = 0, **plan_options) -> dict:
    """Sync-aware slack for a data-parallel job: every rank hands its own trace (the file's bytes, so no
    shared file system is needed), rank ``src`` runs :func:`gearshift.plan_ranks`, and every rank gets
    ``{"plan": <its plan.json>, "report": <the job's report>}``. Modelled figures.

    Raises (on every rank, re-raised from ``src``): TraceError, NoIterationError, ValueError, ModelRefusedError.
    """
    d = _dist(dist)
    rank, world = d.get_rank(group), d.get_world_size(group)
    with open(trace_path, "rb") as f:
        blob = f.read()
    suffix = ".json.gz" if trace_path.endswith(".gz") else os.path.splitext(trace_path)[1] or ".json"
    blobs: list = [None] * world
    d.all_gather_object(blobs, (suffix, blob), group=group)
    items = None
    if rank == src:
        from . import plan_ranks

        with tempfile.TemporaryDirectory(prefix="gearshift-ranks-") as tmp:
            paths = []
            for r, (sfx, data) in enumerate(blobs):
                p = os.path.join(tmp, f"rank{r}{sfx}")
                with open(p, "wb") as f:
                    f.write(data)
                paths.append(p)
            try:
                res = plan_ranks(paths, **plan_options)
                items = [{"plan": res["plans"][r], "report": res["report"]} for r in range(world)]
            except Exception as e:  # every rank must leave the collective, then raise the same error
                items = [e] * world
    mine = _scatter_from(d, src, group, items)
    if isinstance(mine, BaseException):
        raise mine
    return mine


def plan_pipeline_stages(
    stage: int,
    stages: int,
    microbatches: int,
    sm_clock_mhz: int,
    power_w: float,
    step_time_s: float,
    dist=None,
    group=None,
    src: int = 0,
    recorder: Optional[_pipeline.Recorder] = None,
    extra_profile_rows: Sequence[str] = (),
    time_unit_ms: float = 1.0,
) -> dict:
    """Pipeline planning over the job's process group: each rank contributes its stage's profile rows
    (:meth:`Recorder.profile_rows`) and its step time; rank ``src`` computes the straggler factor
    F = slowest step time / fastest, runs the pipeline planner, and scatters to each rank its own
    instruction schedule at the "straggler" point (deadline F·T_min).

    Args:
        stage: this rank's pipeline stage; stages, microbatches: the pipeline's shape.
        sm_clock_mhz, power_w: the clock the profile was recorded at (MHz) and the stage GPU's average power (W).
        step_time_s: this rank's measured iteration time, s.
        extra_profile_rows: rows at other clocks (e.g. from earlier profiling runs at locked clocks).

    Returns:
        ``{"schedule": {name, deadline_s, instructions: [...]}, "straggler_factor": F, "summary": {...}}``.

    Raises (on every rank): ProfileError, ValueError.
    """
    d = _dist(dist)
    rank, world = d.get_rank(group), d.get_world_size(group)
    rec = recorder or _pipeline.recorder()
    try:
        rows = rec.profile_rows(stage, sm_clock_mhz, power_w) + list(extra_profile_rows)
        mine_in = (stage, rows, float(step_time_s), None)
    except Exception as e:  # still join the collective so no rank hangs
        mine_in = (stage, [], float(step_time_s), e)
    gathered: list = [None] * world
    d.all_gather_object(gathered, mine_in, group=group)
    items = None
    if rank == src:
        try:
            for g in gathered:
                if g[3] is not None:
                    raise g[3]
            factor = max(straggler_factors([g[2] for g in gathered]))
            text = _pipeline.PROFILE_HEADER + "\n".join(r for g in gathered for r in g[1]) + "\n"
            res = _pipeline.plan(text, stages, microbatches, straggler=factor, time_unit_ms=time_unit_ms)
            items = [
                {"schedule": _pipeline.rank_schedule(res, gathered[r][0]), "straggler_factor": factor,
                 "summary": res["summary"]}
                for r in range(world)
            ]
        except Exception as e:
            items = [e] * world
    mine = _scatter_from(d, src, group, items)
    if isinstance(mine, BaseException):
        raise mine
    return mine
