"""The diagnostics process: ``python -m pve_steward.serving.worker.child FD`` (started by link.py, never by hand).

It builds the same per-cluster contexts as the server's lifespan (its own clients, read caches and
one admission budget) from the settings the front end sends, then runs each heavy call through the
operation's ``@heavy`` wrapper (admission.HEAVY): sharing identical runs, the budget, kept pages.
The guard and the audit stay in the front end, which checked and recorded the call before handing
it over; nothing here writes to a cluster (only read operations are heavy) or to the audit log.
It exits when the front end closes the socket, so it never outlives the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pickle
import socket
import sys
import time
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry import context as otel_context
from opentelemetry import propagate

from pve_steward.perobject import PerObject
from pve_steward.serving.worker.frames import Sender, blob, read_frame
from pve_steward.serving.worker.link import Call, Start

_PICKLED: PerObject[bytes] = PerObject()  # a result -> its pickle, while the result lives

log = logging.getLogger("pve_steward.serving.worker")


def _error_frame(call_id: int, exc: BaseException) -> tuple[Any, ...]:
    try:
        pickled = blob(exc)
    except Exception:  # an exception that does not pickle: its words still go back
        pickled = b""
    return ("error", call_id, pickled, str(exc) or type(exc).__name__)


class Child:
    """Runs the calls of one front end until its socket closes."""

    def __init__(self, sender: Sender, root: Any) -> None:
        self.sender = sender
        self.root = root  # the default AppContext (with .clusters when there are several)
        self.running: dict[int, asyncio.Task[None]] = {}

    def app_for(self, cluster: str | None) -> Any:
        if cluster is None or self.root.clusters is None:
            return self.root
        return self.root.clusters.get(cluster)

    async def run(self, call_id: int, call: Call) -> None:
        from pve_steward.pveio.admission import HEAVY
        from pve_steward.security.handlers import HANDLERS, spec_of
        from pve_steward.tools.context import ToolContext

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await self.sender.send(("progress", call_id, done, total, message))

        attached = otel_context.attach(propagate.extract(call.trace))  # its PVE spans join the caller's trace
        try:
            app = self.app_for(call.cluster)
            app.naming = call.naming
            if call.pve_version is not None:
                app.pve_version = call.pve_version
            handler, guarded = HEAVY.get(call.op), HANDLERS.get(call.op)
            spec = spec_of(guarded) if guarded is not None else None  # the operation as its handler declares it
            if handler is None or spec is None:
                raise LookupError(f"{call.op} is not a heavy operation")
            result = await handler(ToolContext(app=app, op=spec, progress=progress), **call.arguments)
            # callers that shared a run get one object: pickled once, and the front end unpickles it once
            frame: tuple[Any, ...] = ("result", call_id, _PICKLED.get(result, None, functools.partial(blob, result)))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return  # the front end's caller went away (its "cancel"): it expects no answer
            # a shared run its other callers gave up on just as this call joined it: this call still needs an answer
            frame = _error_frame(call_id, ToolError(f"{call.op} was stopped by its other callers; retry it"))
        except Exception as exc:
            if not _expected(exc):
                log.exception("heavy operation %s crashed in the diagnostics process", call.op)
            frame = _error_frame(call_id, exc)
        finally:
            otel_context.detach(attached)
        await self.sender.send(frame)

    def _done(self, call_id: int, _task: asyncio.Task[None]) -> None:
        self.running.pop(call_id, None)

    async def metrics(self, call_id: int) -> None:
        from pve_steward.observe import metrics

        families = list(metrics.REGISTRY.collect())
        await self.sender.send(("metrics", call_id, blob(families)))

    async def serve(self, reader: asyncio.StreamReader) -> None:
        from pve_steward.observe import metrics

        metrics.keep()  # the front end serves /metrics with this process's series added in
        for app in {id(a): a for a in [self.root, *getattr(self.root.clusters, "apps", {}).values()]}.values():
            metrics.APPS.track(app)  # their read caches and admission counters, for the front end's /metrics
        keep: set[asyncio.Task[None]] = set()
        while (frame := await read_frame(reader)) is not None:
            kind, call_id = frame[0], frame[1]
            if kind == "call":
                task = asyncio.create_task(self.run(call_id, frame[2]))
                self.running[call_id] = task
                task.add_done_callback(functools.partial(self._done, call_id))  # also a task that never started
            elif kind == "cancel" and call_id in self.running:
                self.running[call_id].cancel()
            elif kind == "metrics":
                task = asyncio.create_task(self.metrics(call_id))
                keep.add(task)
                task.add_done_callback(keep.discard)
        for task in list(self.running.values()):
            task.cancel()


def _expected(exc: Exception) -> bool:
    """Errors the guard turns into answers (refusals, PVE's errors, busy); anything else is logged here."""
    from pve_steward.errors import PveError
    from pve_steward.pve.ids import InvalidIdentifier
    from pve_steward.security.tokens import TokenRefused

    return isinstance(exc, ToolError | PveError | InvalidIdentifier | TokenRefused)


NICENESS = 10  # CPU priority below the front end's: a cheap call's few milliseconds go first


def lower_priority(priority: str) -> None:
    """Give the front end the CPU when it asks for it (settings.diagnostics_priority), before any thread starts
    (threads inherit it).

    At nice 10 the kernel (EEVDF) still let the child finish its slice before a woken front-end thread
    ran, at each of the many wake-ups of one cheap call; a SCHED_IDLE task is preempted at once
    (kernel/sched/fair.c check_preempt_wakeup_fair). Lowering one's own priority needs no privilege.
    """
    os.nice(NICENESS)
    if priority == "idle" and hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):  # a system that refuses it (not Linux) keeps nice 10
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def follow_front_end(start: Start) -> None:
    """This process's reads give way to the front end's cheap calls too (urgencyboard.py)."""
    if start.urgency_board is not None:
        from pve_steward.pveio.urgency import URGENCY
        from pve_steward.pveio.urgencyboard import UrgencyBoard

        URGENCY.follow(UrgencyBoard.attach(start.urgency_board))


async def main(fd: int) -> int:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    sender = Sender(writer)
    first = await read_frame(reader)
    if first is None or first[0] != "start":
        return 2
    try:
        start: Start = pickle.loads(first[1])
        lower_priority(start.settings.diagnostics_priority)
        follow_front_end(start)
        life = _lifespan(start)
        from pve_steward.observe.telemetry import setup_tracing

        setup_tracing(start.settings.otel_endpoint, start.settings.otel_service_name)
    except Exception as exc:  # settings the child cannot use: the front end says why
        await sender.send(("failed", f"{type(exc).__name__}: {exc}"))
        return 1
    from pve_steward.serving.listen import settle_heap

    settle_heap()
    async with life(None) as root:
        await sender.send(("ready", 0))
        await Child(sender, root).serve(reader)
    with contextlib.suppress(OSError):
        sender.close()
    return 0


def _lifespan(start: Start) -> Any:
    """The server's own lifespan, without what only the front end does: audit, tokens, the version check."""
    from pve_steward.security.audit import NoAudit
    from pve_steward.security.tokens import TokenSigner
    from pve_steward.serving.lifespan import Lifespan
    from pve_steward.serving.readiness import Readiness
    from pve_steward.tools import load_all

    load_all()  # every @heavy handler registers itself (admission.HEAVY)
    settings = start.settings.model_copy(update={"diagnostics_process": False})  # no grandchild
    return Lifespan(settings, start.targets, NoAudit(), TokenSigner(), Readiness(), time.time, check_version=False)


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="pve-steward diagnostics process: %(levelname)s %(message)s"
    )
    sys.exit(asyncio.run(main(int(sys.argv[1]))))
