"""PVE's JSON answers decoded by orjson, with the standard library deciding whatever orjson refuses.

A health check at 10,000 guests decodes some 11,700 answers, nearly all of them small (a guest config
is about 500 bytes). orjson decodes those in less than half the time of ``json.loads``, and reuses one
string object per dict key across answers (its key cache) instead of one per answer (design record
261205-44). Large answers stay with the standard library (see ``FAST_MAX``).

Results equal the standard library's: orjson refuses NaN, Infinity, numbers out of float range, lone
surrogate escapes and a byte-order mark, and those go to ``json.loads`` (which accepts them, or fails
as before). One difference is left: an integer outside 64 bits comes back as a float. PVE's Perl
encoder cannot write one (its integers are 64-bit; larger numbers are written as floats anyway).
Where orjson has no wheel the standard library decodes everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

FAST: Callable[[bytes | str], Any] | None  # orjson.loads; it raises a ValueError for what it refuses
try:
    from orjson import loads as FAST
except ImportError:  # pragma: no cover - platforms without an orjson wheel
    FAST = None


# orjson builds the whole document in its parser first, and only then the Python objects: decoding a
# 3.2 MB answer raised the peak by 22 MiB against json's 14. Beside 50 health checks at 2,000 guests the
# server's peak went from 284 to 306 MiB (bench_heavy). The answers that matter for the CPU are the
# thousands of small ones (a config is about 500 bytes); the few large lists go to the standard library.
FAST_MAX = 64 * 1024


def fast(body: bytes | str) -> bool:
    """Whether orjson decodes this body: installed, and the body is small."""
    return FAST is not None and len(body) <= FAST_MAX


def loads(body: bytes | str) -> Any:
    """One JSON document, as ``json.loads`` would decode it."""
    if FAST is not None and fast(body):
        try:
            return FAST(body)
        except ValueError:
            pass  # what orjson refuses: the standard library decides, as before
    return json.loads(body)
