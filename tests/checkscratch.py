"""Register test-only checks without leaking them: the check catalogue is process-wide."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pve_steward.analysis import catalog
from pve_steward.analysis.thresholds import thresholds_model


@contextmanager
def scratch_catalog() -> Iterator[None]:
    """Checks, codes, areas and thresholds registered inside are gone afterwards."""
    catalog.load_checks()
    codes, checks, areas, origin = dict(catalog.CODES), dict(catalog.CHECKS), list(catalog.AREAS), dict(catalog._ORIGIN)
    thresholds_model.cache_clear()
    try:
        yield
    finally:
        catalog.CODES.clear()
        catalog.CODES.update(codes)
        catalog.CHECKS.clear()
        catalog.CHECKS.update(checks)
        catalog.AREAS[:] = areas
        catalog._ORIGIN.clear()
        catalog._ORIGIN.update(origin)
        thresholds_model.cache_clear()
