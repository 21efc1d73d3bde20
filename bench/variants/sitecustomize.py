"""A server without one of its mechanisms, for bench_mechanisms.py only (never shipped, never imported by it).

On PYTHONPATH, this runs in every Python process the bench starts (the diagnostics process too), before
the server imports anything. ``STEWARD_BENCH_WITHOUT`` names what to leave out, comma-separated
(outside the ``PVE_STEWARD_*`` names, which the server refuses unless they are settings):

- ``curl``: pycurl cannot be imported, so proxmoxer keeps requests' urllib3 transport (client.py's fallback);
- ``orjson``: orjson cannot be imported, so every answer is decoded by the standard library (pvejson.py);
- ``urgency``: cheap calls get no precedence (no giving way, no held answers, no lane, no background cap);
- ``priorities``: the request pool serves requests in arrival order (every request urgent).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

WITHOUT = {w.strip() for w in os.environ.get("STEWARD_BENCH_WITHOUT", "").split(",") if w.strip()}

for mechanism, module in (("curl", "pycurl"), ("orjson", "orjson")):
    if mechanism in WITHOUT:
        sys.modules[module] = None  # type: ignore[assignment]  # "import pycurl" raises ImportError

if "urgency" in WITHOUT:
    from pve_steward.pveio import urgency

    async def _no_turn(self: Any) -> None:
        return None

    urgency.Urgency.urgent = lambda self: contextlib.nullcontext()  # type: ignore[method-assign,assignment,return-value]
    urgency.Urgency.heavy_request = lambda self: contextlib.nullcontext(urgency.HeavyStep())  # type: ignore[method-assign,assignment,return-value]
    urgency.Urgency.heavy_turn = _no_turn  # type: ignore[method-assign]
    urgency.Urgency.give_way = lambda self: None  # type: ignore[method-assign]
    urgency.Urgency.holding = lambda self: False  # type: ignore[method-assign]
    urgency.Urgency.coming = lambda self: False  # type: ignore[method-assign]

if "priorities" in WITHOUT:
    from pve_steward.pveio import requestpool

    _run, _submit = requestpool.RequestPool.run, requestpool.RequestPool.submit

    async def _fifo_run(self: Any, fn: Any, /, *args: Any, priority: int = 0) -> Any:
        return await _run(self, fn, *args, priority=requestpool.URGENT)

    def _fifo_submit(self: Any, fn: Any, /, *args: Any, priority: int = 0) -> Any:
        return _submit(self, fn, *args, priority=requestpool.URGENT)

    requestpool.RequestPool.run = _fifo_run  # type: ignore[method-assign]
    requestpool.RequestPool.submit = _fifo_submit  # type: ignore[method-assign]
