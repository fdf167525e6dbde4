"""Loads the private C++ extension once, with a clear error when the package was not built."""

from ._errors import GearshiftError

try:
    from . import _core as core  # noqa: F401  (re-exported)
except ImportError as e:  # pragma: no cover - only on a broken install
    raise GearshiftError(
        "gearshift's C++ extension gearshift._core is missing: install with `pip install .` "
        "or build with `make test` and use PYTHONPATH=build/python"
    ) from e
