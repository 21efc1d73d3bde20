"""The worker threads that send PVE API requests, most urgent first, and hand the answers back.

proxmoxer is synchronous, so each request in flight holds a thread. Reads are CPU-bound on the
event loop's side as much as on the network (issue 17): a read awaits a plain asyncio future that a
worker resolves in batches, with no ``concurrent.futures.Future`` (a lock and a condition each) and
no event-loop wake-up per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context

from pve_steward.pveio.urgency import URGENCY, Urgency

__all__ = ["BACKGROUND", "REQUEST_PRIORITY", "URGENT", "RequestPool"]

# How urgent this task's requests are: cheap calls (URGENT) are served before the reads of heavy
# diagnostics (BACKGROUND) queued ahead of them (tools/admission.py sets it for heavy operations).
URGENT, BACKGROUND = 0, 1
REQUEST_PRIORITY: ContextVar[int] = ContextVar("pve_request_priority", default=URGENT)


class _Ticket:
    """An awaited request: where its outcome goes, and whether its caller has gone."""

    __slots__ = ("dropped", "loop", "priority", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any], priority: int) -> None:
        self.loop, self.waiter, self.priority, self.dropped = loop, waiter, priority, False

    def drop_if_cancelled(self, waiter: asyncio.Future[Any]) -> None:
        self.dropped = waiter.cancelled()  # a worker that has not started it skips it


_Target = Future[Any] | _Ticket
_Item = tuple[int, int, Callable[[], Any] | None, _Target | None]
_Answer = tuple[_Ticket, bool, Any]


class RequestPool:
    """``workers`` threads that take the most urgent queued request first, oldest first within a priority.

    A worker takes the next request as soon as it is free, without a round trip through the event
    loop (261202-9). A queued request whose caller was cancelled is skipped, never sent.
    """

    def __init__(self, workers: int, urgency: Urgency | None = None) -> None:
        self._urgency = urgency or URGENCY
        # background requests in flight while cheap calls come: half the workers (design record 261204-43)
        self.background_cap = max(1, workers // 2)
        self._background = 0
        self._slots = threading.Condition()
        self._queue: queue.PriorityQueue[_Item] = queue.PriorityQueue()
        self._order = itertools.count()
        self._answered: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
        self._held: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}  # background answers a cheap call holds
        self._answered_lock = threading.Lock()
        self._workers = [threading.Thread(target=self._work, name=f"pve-api-{i}", daemon=True) for i in range(workers)]
        for worker in self._workers:
            worker.start()

    @staticmethod
    def _job(fn: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[], Any]:
        caller = otel_context.get_current()  # the tool call's trace, carried into the worker thread

        def job() -> Any:
            token = otel_context.attach(caller)
            try:
                return fn(*args)
            finally:
                otel_context.detach(token)

        return job

    def submit(self, fn: Callable[..., Any], /, *args: Any, priority: int = URGENT) -> Future[Any]:
        """Queue ``fn(*args)``; its outcome is the future's (for callers outside the event loop, and writes)."""
        future: Future[Any] = Future()
        self._queue.put((priority, next(self._order), self._job(fn, args), future))
        return future

    async def run(self, fn: Callable[..., Any], /, *args: Any, priority: int = URGENT) -> Any:
        """Run ``fn(*args)`` on a worker and await its outcome; cancelling the caller drops it if not started."""
        loop = asyncio.get_running_loop()
        ticket = _Ticket(loop, loop.create_future(), priority)
        ticket.waiter.add_done_callback(ticket.drop_if_cancelled)
        self._queue.put((priority, next(self._order), self._job(fn, args), ticket))
        return await ticket.waiter

    def _work(self) -> None:
        while self._serve(self._queue.get()):
            pass

    def _serve(self, item: _Item) -> bool:
        """One request; False to stop. Its own frame: an idle worker must keep nothing of its last
        request (a loop's locals kept the ticket, its future and the answer: one 2 MB /cluster/resources
        per idle thread at 2,000 guests)."""
        priority, _, job, target = item
        if job is None or target is None:
            return False
        if priority == URGENT:
            return self._run(job, target)
        deadline = time.monotonic() + self._urgency.grace  # giving way and waiting for a slot: one grace in all
        self._urgency.give_way()
        self._take_slot(deadline)
        try:
            return self._run(job, target)
        finally:
            with self._slots:
                self._background -= 1
                self._slots.notify()

    def _take_slot(self, deadline: float) -> None:
        """Count a background request in flight; while cheap calls come, wait (until ``deadline`` at most)
        for one of the ``background_cap`` slots. Polled: another process's cheap calls signal nothing here."""
        with self._slots:
            while self._background >= self.background_cap and self._urgency.coming():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._slots.wait(min(left, 0.001))
            self._background += 1

    def _run(self, job: Callable[[], Any], target: _Target) -> bool:
        if isinstance(target, _Ticket):
            if not target.dropped:
                self._answer(target, job)
            return True
        if target.set_running_or_notify_cancel():
            try:
                target.set_result(job())
            except BaseException as exc:  # handed to the caller, who decides
                target.set_exception(exc)
        return True

    def _answer(self, ticket: _Ticket, job: Callable[[], Any]) -> None:
        try:
            outcome: _Answer = (ticket, True, job())
        except BaseException as exc:  # handed to the caller, who decides
            outcome = (ticket, False, exc)
        with self._answered_lock:
            batch = self._answered.setdefault(ticket.loop, [])
            batch.append(outcome)
            if len(batch) > 1:
                return  # a delivery is already scheduled and takes this answer too
        try:
            ticket.loop.call_soon_threadsafe(self._deliver, ticket.loop)
        except RuntimeError:  # the loop has closed: nobody waits any more, keep nothing for it
            self._forget(ticket.loop)

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the event loop: resolve every answer that arrived since the last delivery.

        Urgent callers resume first; background answers wait while a cheap call holds precedence
        (``Urgency``), so heavy work does not resume on the event loop the cheap call needs.
        """
        with self._answered_lock:
            batch = self._answered.pop(loop, [])
        batch.sort(key=lambda answer: answer[0].priority)  # a stable sort
        cut = len(batch)
        if self._urgency.holding():
            cut = next((i for i, answer in enumerate(batch) if answer[0].priority != URGENT), cut)
        self._resolve(batch[:cut])
        if cut == len(batch):
            return
        with self._answered_lock:
            held = self._held.setdefault(loop, [])
            scheduled = bool(held)  # a release is already on its way
            held += batch[cut:]
        if scheduled:
            return
        left = self._urgency.when_clear(functools.partial(self._release_soon, loop))
        if left > 0:
            loop.call_later(left, self._release, loop)
        else:
            self._release(loop)

    def _release_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.call_soon_threadsafe(self._release, loop)
        except RuntimeError:  # the loop has closed: nobody waits any more
            self._forget(loop)

    def _forget(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._answered_lock:
            self._answered.pop(loop, None)
            self._held.pop(loop, None)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Resolve the background answers held for a cheap call (once it ended, or its grace did)."""
        with self._answered_lock:
            held = self._held.pop(loop, [])
        self._resolve(held)

    @staticmethod
    def _resolve(answers: list[_Answer]) -> None:
        for ticket, ok, value in answers:
            if ticket.waiter.done():
                continue
            if ok:
                ticket.waiter.set_result(value)
            else:
                ticket.waiter.set_exception(value)

    def shutdown(self) -> None:
        """Cancel what is queued and let the workers end after their current request."""
        while True:
            try:
                _, _, _, target = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(target, Future):
                target.cancel()
            elif target is not None:
                with contextlib.suppress(RuntimeError):  # its loop has closed
                    target.loop.call_soon_threadsafe(target.waiter.cancel)
        for _ in self._workers:
            self._queue.put((-1, next(self._order), None, None))
