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
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from opentelemetry import propagate
from pydantic import SecretStr

from pve_steward.config import Settings
from pve_steward.pveio.clusters import ClusterTarget
from pve_steward.pveio.urgency import URGENCY
from pve_steward.pveio.urgencyboard import UrgencyBoard
from pve_steward.serving.worker.frames import Sender, blob, load_shared, read_frame

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

    def __init__(self, settings: Settings, targets: list[ClusterTarget], urgency_board: int | None = None) -> None:
        self.settings = _plain(settings)
        self.targets = [dataclasses.replace(t, settings=_plain(t.settings)) for t in targets]
        self.urgency_board = urgency_board  # the descriptor of the front end's cheap calls (urgencyboard.py)


def _plain(settings: Settings) -> Settings:
    """The same values in the plain Settings class (load_settings' per-file subclass does not pickle), with
    the secrets read from their files now: the child uses what the front end uses, whatever the files say later."""
    values = dict(settings)
    if settings.token_secret_file is not None:
        values.update(token_secret=SecretStr(settings.secret() or ""), token_secret_file=None)
    if settings.pbs_token_secret_file is not None:
        values.update(pbs_token_secret=SecretStr(settings.pbs_secret() or ""), pbs_token_secret_file=None)
    return Settings.model_construct(_fields_set=settings.model_fields_set | set(values), **values)


class ProcessGone(ToolError):
    """The diagnostics process ended while a call waited on it."""


def revive(pickled: bytes, text: str) -> BaseException:
    """The child's exception, or a ToolError with its text if it cannot be rebuilt here."""
    try:
        exc = pickle.loads(pickled)
    except Exception:  # a class whose pickle does not round-trip: its words still reach the caller
        return ToolError(text)
    return exc if isinstance(exc, BaseException) else ToolError(text)


class WorkerLink:
    """One diagnostics process for this server's heavy calls (started by ``warm``, or by the first one)."""

    def __init__(self, settings: Settings, targets: list[ClusterTarget]) -> None:
        # the child's reads give way to this process's cheap calls, as the pool's do here (design 261204-40)
        self._board = UrgencyBoard.create()
        URGENCY.share(self._board)
        self._drop_board = weakref.finalize(self, _drop_board, self._board)  # at close, or when collected
        self._start = Start(settings, targets, self._board.fd)
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Queue[tuple[Any, ...]], Sender]] = {}  # call -> its queue, its child
        self._proc: asyncio.subprocess.Process | None = None
        self._sender: Sender | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._warming: asyncio.Task[None] | None = None
        self._closed = False
        self.started = 0  # processes started (a restart after a crash counts again)
        LINKS.add(self)

    def warm(self) -> None:
        """Start the child now, in the background, so the first heavy call finds it ready (it reads nothing
        from a cluster until a call asks); a start that fails is logged, and the first heavy call retries."""

        async def start() -> None:
            try:
                await self._ready()
            except Exception as exc:
                log.warning("the diagnostics process did not start (%s); the first heavy call tries again", exc)

        self._warming = asyncio.get_running_loop().create_task(start())

    def _running(self) -> bool:
        proc, reading = self._proc, self._reader_task is not None
        return reading and self._sender is not None and proc is not None and proc.returncode is None

    async def _ready(self) -> Sender:
        """The running child's sender; one start at a time, and every waiter within one START_TIMEOUT."""
        if self._closed:
            raise ProcessGone("the server is stopping; nothing was sent to the cluster")
        with anyio.move_on_after(START_TIMEOUT):
            async with self._starting:
                if not self._running():
                    await self._spawn()
                assert self._sender is not None
                return self._sender
        raise ToolError(
            f"the diagnostics process did not start within {START_TIMEOUT:g} s; nothing was sent to the cluster. "
            "Retry, or run without --diagnostics-process"
        )

    async def _spawn(self) -> None:
        """Start a child and wait for its "ready"; whatever stops the start (an error, a cancelled caller,
        the timeout) leaves no child and no half-set link behind."""
        ours, theirs = socket.socketpair()
        proc: asyncio.subprocess.Process | None = None
        sender: Sender | None = None
        try:
            try:
                proc = self._proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "pve_steward.serving.worker.child",
                    str(theirs.fileno()),
                    pass_fds=(theirs.fileno(), *([self._board.fd] if self._board.fd is not None else [])),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=sys.stderr,  # stdout may be the MCP stdio channel: the child's output goes to the log
                    start_new_session=True,  # a Ctrl-C to the front end does not reach it; it ends when we close
                )
            finally:
                theirs.close()
            reader, writer = await asyncio.open_connection(sock=ours)
            sender = self._sender = Sender(writer)
            await sender.send(("start", blob(self._start)))
            first = await read_frame(reader)
            if first is None or first[0] != "ready":
                problem = first[1] if first is not None and first[0] == "failed" else "it ended while starting"
                raise ToolError(f"the diagnostics process could not start: {problem}")
        except BaseException:
            if sender is None:  # else closing the sender closes the socket
                ours.close()
            await _unstoppable(self._ended(proc, sender))
            raise
        self.started += 1
        self._reader_task = asyncio.create_task(self._read(reader, proc, sender))

    async def _read(self, reader: asyncio.StreamReader, proc: asyncio.subprocess.Process, sender: Sender) -> None:
        try:
            while (frame := await read_frame(reader)) is not None:
                waiting = self._pending.get(frame[1])
                if waiting is not None:  # a call that went away meanwhile: its answer is dropped
                    waiting[0].put_nowait(frame)
        except Exception:
            log.exception("the diagnostics process sent what this server cannot read; it is stopped")
        finally:
            await _unstoppable(self._ended(proc, sender))

    async def _ended(self, proc: asyncio.subprocess.Process | None, sender: Sender | None) -> None:
        """A child is gone: the calls sent to it hear it, and the next call starts a new one (a child started
        meanwhile, and its calls, are not touched)."""
        if self._proc is proc:
            self._proc = self._sender = self._reader_task = None
        waiting = [(call_id, queue) for call_id, (queue, to) in self._pending.items() if to is sender]
        if sender is not None:
            sender.close()
        code = None
        if proc is not None:
            with anyio.move_on_after(5):
                code = await proc.wait()
            if code is None:  # its socket is closed and it still runs: hung, so it does not get to linger
                proc.kill()
                code = await proc.wait()
        for call_id, queue in waiting:
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
        self._pending[call_id] = (queue, sender)
        answered = False
        try:
            app = t.app
            trace: dict[str, str] = {}
            propagate.inject(trace)
            try:
                call = Call(app.cluster, t.op.name, arguments, app.naming, app.pve_version, trace)
                await sender.send(("call", call_id, call))
            except OSError:
                answered = True
                raise ProcessGone(
                    "the diagnostics process ended before the call reached it; nothing was changed. Retry the call"
                ) from None
            URGENCY.parked()  # it waits on the child now: the next step in the lane goes
            while True:
                frame = await queue.get()
                if frame[0] == "progress":
                    await t.progress(*frame[2:])
                    continue
                answered = True
                if frame[0] == "result":
                    # unpickled before its turn: the callers of one run waiting in the lane share one object
                    result = load_shared(frame[2])
                    await URGENCY.heavy_turn()  # its answer, encoded and written, is one step in the lane
                    return result
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
        if sender is None or not self._running():
            return []
        call_id = next(self._ids)
        queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._pending[call_id] = (queue, sender)
        try:
            await sender.send(("metrics", call_id))
            with anyio.move_on_after(5):
                frame = await queue.get()
                return list(pickle.loads(frame[2])) if frame[0] == "metrics" else []
            log.warning("the diagnostics process did not send its metrics within 5 s")
            return []
        except OSError:  # it has just ended: the next scrape has the new one's
            return []
        finally:
            del self._pending[call_id]

    async def close(self) -> None:
        """Stop the child with the server: it reads the end of its socket and exits (or is killed after 5 s);
        a call still waiting hears that it ended, and no later call starts another."""
        self._closed = True
        LINKS.discard(self)
        self._drop_board()
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warming
        reader = self._reader_task
        if self._sender is not None:
            self._sender.close()
        if reader is not None:
            with anyio.CancelScope(shield=True):
                await asyncio.wait({reader}, timeout=15)  # its end reaps the child and answers the waiting calls
        for call_id, (queue, _to) in list(self._pending.items()):
            queue.put_nowait(("gone", call_id, ProcessGone("the server is stopping; nothing was changed")))


def _drop_board(board: UrgencyBoard) -> None:
    URGENCY.unshare(board)
    board.close()


async def _unstoppable(step: Awaitable[None]) -> None:
    """Run ``step`` to its end even if the caller is cancelled meanwhile (the caller still sees its cancel)."""
    await asyncio.shield(asyncio.ensure_future(step))
