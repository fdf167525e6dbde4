"""Exception types of the gearshift package (importable without the C++ core).

Every error gearshift raises is one of these (or a builtin ``ValueError``/``TypeError`` for bad arguments):

- ``GearshiftError`` (``RuntimeError``): base class.
- ``NoGpuError``: NVML cannot be loaded or initialised, no GPU, or a GPU index that does not exist.
- ``GpuPermissionError`` (also ``PermissionError``): this process may not do what was asked (lock clocks).
- ``GpuBusyError``: another gearshift already controls that GPU's clocks (one owner per GPU).
- ``WindowError`` (also ``ValueError``): ending a window that is not open, opening one whose name is open.
- ``AlreadyEnabledError``: ``gearshift.torch.enable()`` while the runtime is already running.
- ``PlanError``, ``TraceError``, ``NoIterationError``, ``ProfileError`` (also ``ValueError``): bad input files.
- ``ModelRefusedError``: the model cannot reproduce the trace's measurement (its power calibration ended at a
  bound), so no plan is made (the CLI's exit 7).

Warnings (``warnings.warn``, not raised unless the program turns them into errors):

- ``FeedWarning`` (``RuntimeWarning``): ``gearshift.torch.enable()`` could not attach the CUPTI launch feed, so
  its runtime sees no kernel launches.
"""


class GearshiftError(RuntimeError):
    """Base class of every gearshift error."""


class NoGpuError(GearshiftError):
    """No usable GPU: NVML missing or failing, no device, or an index out of range."""


class GpuPermissionError(GearshiftError, PermissionError):
    """The process lacks the right (root / CAP_SYS_ADMIN) for what was asked, e.g. locking clocks."""


class GpuBusyError(GearshiftError):
    """Another gearshift process holds this GPU's clock lock."""


class WindowError(GearshiftError, ValueError):
    """A measurement window misuse: end of an unknown name, or begin of a name already open."""


class AlreadyEnabledError(GearshiftError):
    """The in-process runtime is already enabled (call disable() first)."""


class PlanError(GearshiftError, ValueError):
    """plan.json is missing, unreadable or lacks a field."""


class TraceError(GearshiftError, ValueError):
    """A trace file is missing, unreadable or invalid; or ranks' traces do not belong to one job."""


class NoIterationError(GearshiftError, ValueError):
    """The trace holds no repeating training step (it needs at least two whole steps)."""


class ModelRefusedError(GearshiftError):
    """The model cannot reproduce the trace's measured power (calibration at its bound): no plan is made."""


class ProfileError(GearshiftError, ValueError):
    """A pipeline stage profile is invalid (e.g. a stage without forward and backward rows)."""


class FeedWarning(RuntimeWarning):
    """enable() runs, but no launch feed reaches its runtime (CUPTI missing, a profiler holds CUPTI, the
    injection library missing, or the gearshift tracer already runs in the process). The clocks then stay at
    their defaults. ``warnings.simplefilter("error", FeedWarning)`` makes enable() raise it instead."""
