"""Frames between the front end and the diagnostics process: a length, then a pickle.

The socket is a private ``socketpair`` between this server's own two processes, opened before the
child runs; nothing else can write to it, so unpickling what arrives is unpickling what we wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import struct
import weakref
from typing import Any

_LENGTH = struct.Struct("!I")
MAX_FRAME = 512 * 1024 * 1024  # a whole plan at 10,000 guests is a few MB; this only stops a corrupt length


def blob(value: Any) -> bytes:
    """``value`` pickled: a frame, or a payload inside one that its receiver unpickles in its own task."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


_LOADED: weakref.WeakValueDictionary[bytes, Any] = weakref.WeakValueDictionary()


def load_shared(payload: bytes) -> Any:
    """``payload`` unpickled; equal payloads give the same object while it lives.

    The callers that shared one run in the child get one result object here too, as in-process, so
    its answer is encoded once (answers.py) instead of once per caller, all at the same moment.
    """
    value = _LOADED.get(payload)
    if value is None:
        value = pickle.loads(payload)
        with contextlib.suppress(TypeError):  # a dict or list cannot be held weakly: unpickled each time
            _LOADED[payload] = value
    return value


def encode(message: Any) -> bytes:
    payload = blob(message)
    return _LENGTH.pack(len(payload)) + payload


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message, or None when the other process closed its end."""
    try:
        head = await reader.readexactly(_LENGTH.size)
        (size,) = _LENGTH.unpack(head)
        if size > MAX_FRAME:
            raise ValueError(f"a frame of {size} bytes: the stream is corrupt")
        return pickle.loads(await reader.readexactly(size))
    except (asyncio.IncompleteReadError, ConnectionResetError):
        return None


class Sender:
    """Writes whole frames, one at a time (a frame is never interleaved with another)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._lock = asyncio.Lock()

    async def send(self, message: Any) -> None:
        data = encode(message)
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()

    def close(self) -> None:
        self.writer.close()
