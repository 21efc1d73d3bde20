"""Single-flight: callers asking the same thing at the same time share one run of it.

Used for identical PVE reads (readcache.py) and identical heavy operations (admission.py). The
shared run is a task of its own, so one caller's cancellation does not cancel it for the others;
it is cancelled (a queued read is then dropped, never sent) only when every caller is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _retrieve(task: asyncio.Task[object]) -> None:
    """Mark a shared run's error as seen even when every caller was cancelled meanwhile."""
    if not task.cancelled():
        task.exception()


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._running: dict[K, asyncio.Task[V]] = {}
        self._waiting: dict[asyncio.Task[V], int] = {}

    def __len__(self) -> int:
        return len(self._running)

    def __contains__(self, key: object) -> bool:
        """Whether a run for ``key`` is in flight (a later caller would join it)."""
        return key in self._running

    async def run(self, key: K, start: Callable[[], Awaitable[V]]) -> tuple[V, bool]:
        """The result of the run for ``key`` and whether this caller started it (``start`` runs once)."""
        task = self._running.get(key)
        first = task is None
        if task is None:
            task = asyncio.ensure_future(self._own(key, start))
            task.add_done_callback(_retrieve)
            self._running[key] = task
        self._waiting[task] = self._waiting.get(task, 0) + 1
        try:
            return await asyncio.shield(task), first
        finally:
            left = self._waiting.pop(task) - 1
            if left:
                self._waiting[task] = left
            elif not task.done():
                task.cancel()

    async def _own(self, key: K, start: Callable[[], Awaitable[V]]) -> V:
        try:
            return await start()
        finally:
            if self._running.get(key) is asyncio.current_task():
                del self._running[key]

    def forget(self) -> None:
        """Later callers start afresh; runs already going finish for the callers they have."""
        self._running.clear()
