"""Admission: heavy diagnostics share a budget, and their reads queue behind the reads of cheap calls.

Fifty concurrent health checks used to make a `get_guest` wait up to 108 s behind their reads,
and every caller waited silently. Now a caller asking what is already running (same operation, same
arguments but for the page or detail it wants) shares that run; at most ``heavy_calls`` different heavy operations
run at once; a caller that cannot get a slot within ``busy_wait`` seconds is told "busy, retry
in N s"; and the reads of a heavy operation are sent after the queued reads of cheap ones
(requestpool.py ``REQUEST_PRIORITY``), so a cheap call waits for a request, not for a queue.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from pve_steward.perobject import PerObject
from pve_steward.pveio.requestpool import BACKGROUND, REQUEST_PRIORITY
from pve_steward.pveio.singleflight import SingleFlight
from pve_steward.pveio.urgency import URGENCY

R = TypeVar("R")
KEPT_RUNS = 4  # paged results kept at once: a whole health report at 10,000 guests is some megabytes


class Busy(ToolError):
    """Every slot for heavy operations stayed taken for the whole wait."""


@dataclass
class Admission:
    """The shared budget of heavy operations (one per server process)."""

    limit: int = 4
    wait: float = 15.0
    running: int = 0
    typical_seconds: float = 5.0  # a moving average of how long a heavy operation takes
    joined: int = 0  # callers that shared a run already going instead of starting their own
    kept_seconds: float = 300.0  # how long a later page may still come from a paged run's result
    continued: int = 0  # later pages answered from a kept result
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    _slots: anyio.Semaphore | None = field(default=None, repr=False)
    _calls: SingleFlight[Hashable, Any] = field(default_factory=SingleFlight, repr=False)
    _kept: OrderedDict[Hashable, tuple[float, Any]] = field(default_factory=OrderedDict, repr=False)

    def _semaphore(self) -> anyio.Semaphore:
        if self._slots is None:  # made on first use, inside the event loop that serves the calls
            self._slots = anyio.Semaphore(self.limit)
        return self._slots

    def retry_after(self) -> int:
        return max(1, math.ceil(self.typical_seconds))

    async def run(self, name: str, key: Hashable, call: Callable[[], Awaitable[R]]) -> R:
        """Run ``call`` in a slot; a caller asking what is already running (same ``key``) shares that run."""
        result, first = await self._calls.run(key, lambda: self._admitted(name, call))
        if not first:
            self.joined += 1
        return result  # type: ignore[no-any-return]

    def keep(self, key: Hashable, result: Any) -> None:
        """Keep a paged run's whole result, so later pages continue the same ranking (the latest KEPT_RUNS)."""
        self._kept[key] = (self.clock(), result)
        self._kept.move_to_end(key)
        while len(self._kept) > KEPT_RUNS:
            self._kept.popitem(last=False)

    def kept(self, key: Hashable) -> Any | None:
        """The kept result of the run ``key`` names, if it ended at most ``kept_seconds`` ago and no newer
        run of it is going (a later page then joins that one, the latest)."""
        entry = self._kept.get(key)
        if key in self._calls:
            return None
        if entry is None or self.clock() - entry[0] > self.kept_seconds:
            return None
        self.continued += 1
        return entry[1]

    async def _admitted(self, name: str, call: Callable[[], Awaitable[R]]) -> R:
        slots = self._semaphore()
        admitted = False
        with anyio.move_on_after(self.wait):
            await slots.acquire()
            admitted = True
        if not admitted:
            raise Busy(
                f"busy: {self.running} heavy operations are running (at most {self.limit} at once) and none ended "
                f"within {self.wait:g} s; retry {name} in about {self.retry_after()} s"
            )
        self.running += 1
        started = time.monotonic()
        priority = REQUEST_PRIORITY.set(BACKGROUND)
        try:
            return await call()
        finally:
            REQUEST_PRIORITY.reset(priority)
            self.running -= 1
            self.typical_seconds = 0.8 * self.typical_seconds + 0.2 * (time.monotonic() - started)
            slots.release()


Handler = Callable[..., Awaitable[R]]
HEAVY: dict[str, Handler[Any]] = {}  # operation name -> its heavy wrapper (what the diagnostics process runs)
# A run's result -> each page of it as presented: the callers sharing a run that ask for the same page get
# one object, whose answer is then encoded once (answers.py); kept while the result lives.
PRESENTED: PerObject[Any] = PerObject()


@overload
def heavy(fn: Handler[R], /) -> Handler[R]: ...


@overload
def heavy(
    *,
    presentation: tuple[str, ...],
    present: Callable[[Any, R, dict[str, Any]], R],
    continues: Callable[[dict[str, Any]], bool] | None = None,
) -> Callable[[Handler[R]], Handler[R]]: ...


def heavy(
    fn: Handler[R] | None = None,
    /,
    *,
    presentation: tuple[str, ...] = (),
    present: Callable[[Any, R, dict[str, Any]], R] | None = None,
    continues: Callable[[dict[str, Any]], bool] | None = None,
) -> Handler[R] | Callable[[Handler[R]], Handler[R]]:
    """Mark a handler as heavy: it takes a slot of the shared budget and its reads yield to cheap calls.

    ``presentation`` names arguments that only choose what of the result a caller sees (a page, the
    detail): callers that differ only in them share one run, of the whole result (the handler is called
    without them, so with their defaults), and ``present(t, result, arguments)`` cuts each caller's answer
    (``arguments``: the call's, completed with the handler's defaults). With ``continues``, a call it says
    asks for a later page is answered from the same work's last result while ``Admission.kept_seconds``
    allow: the pages of one listing come from one run, and the next page costs no run.
    """

    def decorate(fn: Handler[R]) -> Handler[R]:
        defaults = {name: p.default for name, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}

        @functools.wraps(fn)
        async def wrapper(t: Any, /, **kwargs: Any) -> R:  # a ToolContext (not imported: context.py imports us)
            offload = getattr(t.app, "worker", None)
            if offload is not None:  # the diagnostics process runs it all: sharing, the budget, the pages (worker/)
                result: R = await offload.call(t, kwargs)
                return result
            admission: Admission = t.app.admission
            work = {k: v for k, v in kwargs.items() if k not in presentation}
            arguments = defaults | kwargs
            # The same call on another cluster is another run (the cluster is not among the handler's arguments).
            key = (t.app.cluster, t.op.name, tuple(sorted((k, repr(v)) for k, v in work.items())))
            kept = admission.kept(key) if continues is not None and continues(arguments) else None
            if kept is None:
                URGENCY.parked()  # it waits on its run now: the next step in the lane goes
                result = await admission.run(t.op.name, key, lambda: fn(t, **work))
            else:
                result = kept
            await URGENCY.heavy_turn()  # its answer, presented to written, is one step in the lane
            if continues is not None and kept is None:
                admission.keep(key, result)
            if present is None:
                return result
            shown = tuple(sorted((k, repr(arguments.get(k))) for k in presentation))
            if kept is not None:  # a later page of a kept run: not shared with callers waiting now, so not kept
                return present(t, result, arguments)
            shown_page: R = PRESENTED.get(result, (id(t.app), shown), lambda: present(t, result, arguments))
            return shown_page

        wrapper.__heavy__ = True  # type: ignore[attr-defined]
        HEAVY[fn.__name__] = wrapper
        return wrapper

    return decorate(fn) if fn is not None else decorate
