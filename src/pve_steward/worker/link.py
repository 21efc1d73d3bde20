"""The front end's side: start the diagnostics process with the server, hand it heavy calls, relay progress.

A call sends the operation's name, its arguments and what the child cannot know by itself (the
cluster, how texts name operations, the PVE version found by the front end's version check); the
child answers with progress notes and then the result or the error, each pickled by the child and
unpickled here by the caller's own task (never by the loop that reads the socket, so one odd answer
cannot stop the others). A caller that is cancelled cancels its run in the child. If the child dies,
every call waiting on it gets a clear error, and the next heavy call starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import pickle
import socket
import sys
import weakref
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry import propagate

from pve_steward.clusters import ClusterTarget
from pve_steward.config import Settings
from pve_steward.worker.frames import Sender, read_frame

log = logging.getLogger(__name__)
START_TIMEOUT = 60.0  # imports and the first settings check; a loaded 2-core machine takes a few seconds
LINKS: weakref.WeakSet[WorkerLink] = weakref.WeakSet()  # the live links, for /metrics (instruments.py)


@dataclass(frozen=True)
class Call:
    """One heavy call, as the child needs it."""

    cluster: str | None
    op: str
    arguments: dict[str, Any]
    naming: Any  # naming.Naming: how this server's texts name operations
    pve_version: str | None
    trace: dict[str, str]  # the tool call's trace context (W3C headers): the child's PVE spans join its trace


class Start:
    """What the child builds its contexts from: the front end's own settings (secrets included), as
    validated here; never read again from the environment or a file, which may have changed since."""

    def __init__(self, settings: Settings, targets: list[ClusterTarget]) -> None:
        self.settings = _plain(settings)
        self.targets = [dataclasses.replace(t, settings=_plain(t.settings)) for t in targets]


def _plain(settings: Settings) -> Settings:
    """The same values in the plain Settings class (load_settings' per-file subclass does not pickle)."""
    return Settings.model_construct(_fields_set=settings.model_fields_set, **dict(settings))


class ProcessGone(ToolError):
    """The diagnostics process ended while a call waited on it."""


def revive(blob: bytes, text: str) -> BaseException:
    """The child's exception, or a ToolError with its text if it cannot be rebuilt here."""
    try:
        exc = pickle.loads(blob)
    except Exception:  # a class whose pickle does not round-trip: its words still reach the caller
        return ToolError(text)
    return exc if isinstance(exc, BaseException) else ToolError(text)


class WorkerLink:
    """One diagnostics process for this server's heavy calls (started by ``warm``, or by the first one)."""

    def __init__(self, settings: Settings, targets: list[ClusterTarget]) -> None:
        self._start = Start(settings, targets)
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Queue[tuple[Any, ...]]] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._sender: Sender | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._warming: asyncio.Task[None] | None = None
        self.started = 0  # processes started (a restart after a crash counts again)
        LINKS.add(self)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    def warm(self) -> None:
        """Start the child now, in the background, so the first heavy call finds it ready (it reads nothing
        from a cluster until a call asks); a start that fails is logged, and the first heavy call retries."""

        async def start() -> None:
            try:
                await self._ready()
            except Exception as exc:
                log.warning("the diagnostics process did not start (%s); the first heavy call tries again", exc)

        self._warming = asyncio.get_running_loop().create_task(start())

    async def _ready(self) -> Sender:
        async with self._starting:
            if self._sender is None or self._proc is None or self._proc.returncode is not None:
                with anyio.move_on_after(START_TIMEOUT) as waited:
                    await self._spawn()
                if waited.cancelled_caught:
                    await self._ended()
                    raise ToolError(
                        f"the diagnostics process did not start within {START_TIMEOUT:g} s; nothing was sent to the "
                        "cluster. Retry, or run without --diagnostics-process"
                    )
            assert self._sender is not None
            return self._sender

    async def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "pve_steward.worker.child",
                str(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sys.stderr,  # stdout may be the MCP stdio channel: the child's output goes to the log
                start_new_session=True,  # a Ctrl-C to the front end does not reach it; it ends when we close
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=ours)
        self._sender = Sender(writer)
        await self._sender.send(("start", pickle.dumps(self._start, protocol=pickle.HIGHEST_PROTOCOL)))
        first = await read_frame(reader)
        if first is None or first[0] != "ready":
            problem = first[1] if first is not None and first[0] == "failed" else "it ended while starting"
            await self._ended()
            raise ToolError(f"the diagnostics process could not start: {problem}")
        self.started += 1
        self._reader_task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while (frame := await read_frame(reader)) is not None:
            queue = self._pending.get(frame[1])
            if queue is not None:
                queue.put_nowait(frame)
        await self._ended()

    async def _ended(self) -> None:
        """The child is gone: every waiting call hears it, the next call starts a new one."""
        proc, self._proc, sender, self._sender = self._proc, None, self._sender, None
        if sender is not None:
            sender.close()
        code = None
        if proc is not None:
            with anyio.move_on_after(5, shield=True):
                code = await proc.wait()
            if code is None:  # closed socket, still running: hung, so it does not get to linger
                proc.kill()
                code = await proc.wait()
        for call_id, queue in list(self._pending.items()):
            gone = ProcessGone(
                f"the diagnostics process ended (exit code {code}) before it answered; nothing was changed. "
                "Retry the call: a new process starts for it"
            )
            queue.put_nowait(("gone", call_id, gone))

    async def call(self, t: Any, arguments: dict[str, Any]) -> Any:
        """Run a heavy operation in the child: its result as the handler returns it, or its error raised here."""
        sender = await self._ready()
        call_id = next(self._ids)
        queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._pending[call_id] = queue
        answered = False
        try:
            app = t.app
            trace: dict[str, str] = {}
            propagate.inject(trace)
            call = Call(app.cluster, t.op.name, arguments, app.naming, app.pve_version, trace)
            await sender.send(("call", call_id, call))
            while True:
                frame = await queue.get()
                if frame[0] == "progress":
                    await t.progress(*frame[2:])
                    continue
                answered = True
                if frame[0] == "result":
                    return pickle.loads(frame[2])
                if frame[0] == "gone":
                    raise frame[2]
                raise revive(frame[2], frame[3])
        finally:
            del self._pending[call_id]
            if not answered and self._sender is sender:  # cancelled here: stop its run there
                with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                    await sender.send(("cancel", call_id))

    async def metrics(self) -> list[Any]:
        """The child's Prometheus families (its API requests, read cache, admission), or none if it is not running."""
        sender = self._sender
        if sender is None or self._proc is None or self._proc.returncode is not None:
            return []
        call_id = next(self._ids)
        queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._pending[call_id] = queue
        try:
            await sender.send(("metrics", call_id))
            with anyio.move_on_after(5):
                frame = await queue.get()
                return list(pickle.loads(frame[2])) if frame[0] == "metrics" else []
            log.warning("the diagnostics process did not send its metrics within 5 s")
            return []
        finally:
            del self._pending[call_id]

    async def close(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        proc, sender = self._proc, self._sender
        if sender is not None:
            sender.close()  # the child reads the end of its socket and exits
        if proc is not None and proc.returncode is None:
            with anyio.move_on_after(5, shield=True) as scope:
                await proc.wait()
            if scope.cancelled_caught:
                proc.kill()
                await proc.wait()
        if self._reader_task is not None:
            self._reader_task.cancel()
        LINKS.discard(self)
