"""Cheap calls first: background work gives way to the cheap calls in flight, for a bounded time.

The event loop, the interpreter lock and the API are shared by a server's cheap calls (``get_guest``)
and its heavy diagnostics; this module is how the heavy side yields (issue 17). The request pool
(requestpool.py) holds back background requests and answers, analysis threads wait at their
checkpoints, and heavy calls' steps on the event loop take turns (http.Precedence, server.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from pve_steward.pveio.urgencyboard import UrgencyBoard

__all__ = ["URGENCY", "HeavyStep", "Urgency"]

_HELD: ContextVar[int | None] = ContextVar("pve_urgent_call", default=None)  # this task's mark (Urgency)


class Urgency:
    """Cheap calls in flight; background work gives way to them at its checkpoints, for a bounded time.

    Priority queues order the requests, yet a cheap call still waited on the GIL and on the API
    behind the heavy work already running: JSON decoding in the workers, answers resuming on the
    event loop, analysis threads (``get_guest`` p99 6x its idle latency beside one health check,
    issue 17). While a cheap call runs, background requests are not started and their answers
    are not delivered; each cheap call holds that priority for ``grace`` seconds at most, so heavy
    work is slowed, never starved, and a slow "cheap" call loses its precedence. While cheap calls
    keep coming (:meth:`coming`), the pool also keeps fewer background requests in flight.
    """

    def __init__(self, grace: float = 0.1) -> None:
        self.grace = grace
        self._last_seen = 0.0  # the monotonic time a cheap call was last seen open (coming)
        self._open: dict[int, float] = {}  # cheap call -> the monotonic time its precedence ends
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._on_clear: list[Callable[[], None]] = []
        # heavy calls' starts and answers, one at a time (heavy_turn); a lock per event loop (tests run many)
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._shared: list[UrgencyBoard] = []  # where this process's cheap calls are published (share)
        self._followed: UrgencyBoard | None = None  # another process's cheap calls, given way to too (follow)

    def share(self, board: UrgencyBoard) -> None:
        """Publish this process's cheap calls on ``board`` (the front end, for its diagnostics process)."""
        with self._cond:
            self._shared.append(board)
            board.publish(self._latest())

    def unshare(self, board: UrgencyBoard) -> None:
        with self._cond:
            if board in self._shared:
                self._shared.remove(board)

    def follow(self, board: UrgencyBoard | None) -> None:
        """Give way to the cheap calls another process publishes on ``board`` as well (the diagnostics process)."""
        self._followed = board

    def _latest(self) -> float:
        """When the last open cheap call's precedence ends (0: none open); under the condition's lock."""
        return max(self._open.values(), default=0.0)

    def _publish(self) -> None:
        """Under the condition's lock: tell the processes that follow this one."""
        if self._shared:
            latest = self._latest()
            for board in self._shared:
                board.publish(latest)

    @contextlib.contextmanager
    def urgent(self) -> Iterator[None]:
        """Mark the enclosed work (this task's) as a cheap call that background work gives way to.

        Nested marks are one: an HTTP request marked on arrival stays one cheap call in its tool.
        """
        held = _HELD.get()
        if held is not None and held in self._open:
            yield
            return
        with self._cond:
            ident = next(self._ids)
            self._open[ident] = time.monotonic() + self.grace
            self._publish()
            self._last_seen = time.monotonic()
        token = _HELD.set(ident)
        try:
            yield
        finally:
            _HELD.reset(token)
            self._end(ident)

    def release(self) -> None:
        """This task's work turned out heavy (admission): it no longer holds background work back."""
        held = _HELD.get()
        if held is not None:
            self._end(held)

    def _end(self, ident: int) -> None:
        with self._cond:
            if self._open.pop(ident, None) is None:
                return
            self._last_seen = time.monotonic()
            self._publish()
            clear, callbacks = self._until() <= 0, self._on_clear
            if clear:
                self._on_clear = []
            self._cond.notify_all()
        if clear:
            for callback in callbacks:
                callback()

    def _until(self) -> float:
        """Seconds background work should still wait (0: none); under the condition's lock."""
        return self._latest() - time.monotonic() if self._open else 0.0

    def holding(self) -> bool:
        """Whether a cheap call is running (background work should give way); no lock, a hint."""
        return bool(self._open)

    def coming(self) -> bool:
        """Whether cheap calls are coming: one is open, or was within the last grace, in this process or
        the one it follows; no lock, a hint. The request pool then keeps fewer background requests in
        flight, so the next cheap call's reads find fewer heavy ones ahead of them at PVE."""
        now = time.monotonic()
        followed = self._followed
        if self._open or (followed is not None and followed.until() > now):
            self._last_seen = now
            return True
        return now - self._last_seen < self.grace

    def give_way(self) -> None:
        """In a background thread: wait while a cheap call holds precedence (at most its grace), this
        process's or, in the diagnostics process, the front end's (follow)."""
        followed = self._followed
        across = followed if followed is not None and followed.until() > time.monotonic() else None
        if across is None and not self._open:  # the common case, without the lock
            return
        self._last_seen = time.monotonic()  # seen open: cheap calls are coming (coming)
        latest = time.monotonic() + self.grace  # never longer than one grace in all, however many calls follow
        if across is not None:
            self._give_way_across(across, latest)
        if not self._open:
            return
        with self._cond:
            while (left := min(self._until(), latest - time.monotonic())) > 0:
                self._cond.wait(left)

    @staticmethod
    def _give_way_across(board: UrgencyBoard, latest: float) -> None:
        """Wait while another process's cheap calls hold precedence, until ``latest`` at most: polled (no
        condition crosses processes), 1 ms at a time."""
        while (left := min(board.until(), latest) - time.monotonic()) > 0:
            time.sleep(min(left, 0.001))

    @contextlib.contextmanager
    def heavy_request(self) -> Iterator[HeavyStep]:
        """Mark the enclosed work (an HTTP request's) as one that gives way: its steps hold the lane."""
        step = HeavyStep()
        token = _STEP.set(step)
        try:
            yield step
        finally:
            _STEP.reset(token)
            step.end()

    def parked(self) -> None:
        """This heavy call now waits on its run (the diagnostics process, or a slot): the lane is free."""
        step = _STEP.get()
        if step is not None:
            step.end()

    async def heavy_turn(self) -> None:
        """On the event loop, as a heavy call starts and before its answer goes out: let cheap calls in
        flight finish first (at most one grace), then take the lane, one heavy step at a time.

        Fifty callers of one shared run arrive at once and are answered at the same moment; starting
        them, and encoding and writing their answers (2 to 5 ms each, most of it the SDK's), ran
        interleaved, ahead of and between a cheap call's steps. A request marked by ``heavy_request``
        holds the lane until its call parks (``parked``) or its response is written (http.Precedence),
        at most one grace; other work lets the next go one loop iteration later.
        """
        step = _STEP.get()
        if step is not None and step.holding:
            return  # this request's step has the lane already
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.grace  # one grace in all, however many heavy calls queue here
        lane = self._turns.get(loop)
        if lane is None:
            lane = self._turns[loop] = asyncio.Lock()
        await lane.acquire()
        try:
            if self._open:
                clear: asyncio.Future[None] = loop.create_future()

                def settle() -> None:
                    with contextlib.suppress(RuntimeError):  # that event loop has closed meanwhile
                        loop.call_soon_threadsafe(_settle, clear)

                left = min(self.when_clear(settle), deadline - time.monotonic())
                if left > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(clear, left)
            if step is None:
                await asyncio.sleep(0)  # the previous answer's writing and any cheap call's step run first
        except BaseException:
            lane.release()
            raise
        if step is None:
            lane.release()
        else:
            step.hold(lane, loop.call_later(self.grace, step.end))  # never held longer than one grace

    def when_clear(self, callback: Callable[[], None]) -> float:
        """Run ``callback`` (thread-safe, cheap) once no cheap call holds precedence; 0 if clear now,
        else the longest wait, after which the caller must run it itself (it may then run twice)."""
        with self._cond:
            left = self._until()
            if left > 0:
                self._on_clear.append(callback)
                return left
        return 0.0


class HeavyStep:
    """A request's hold on its event loop's heavy lane while it does front-end work (Urgency.heavy_turn)."""

    __slots__ = ("_lane", "_timer")

    def __init__(self) -> None:
        self._lane: asyncio.Lock | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def holding(self) -> bool:
        return self._lane is not None

    def hold(self, lane: asyncio.Lock, timer: asyncio.TimerHandle) -> None:
        self._lane, self._timer = lane, timer

    def end(self) -> None:
        """Give the lane to the next step (once: later calls do nothing)."""
        lane, timer = self._lane, self._timer
        self._lane = self._timer = None
        if timer is not None:
            timer.cancel()
        if lane is not None:
            lane.release()


# the request of this task that gives way (http.Precedence): its steps hold the lane
_STEP: ContextVar[HeavyStep | None] = ContextVar("pve_heavy_step", default=None)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


URGENCY = Urgency()  # one per process, like the GIL it works around
