"""A cheap call's precedence, shared with the diagnostics process through eight bytes of mapped memory.

In one process, heavy reads give way while a cheap call runs (urgency.Urgency). The diagnostics
process has its own request pool: its reads kept 16 requests in flight at PVE while a cheap call's
reads queued behind them there (issue 17, design record 261204-40). The front end writes the monotonic
time until which background work should wait (0: none); the child reads it before each request.
CLOCK_MONOTONIC is one clock for every process of a Linux host. The value is a hint, bounded by the
reader's grace, so a torn or stale read costs at most one grace.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile

_FORMAT = "d"
_SIZE = struct.calcsize(_FORMAT)


class UrgencyBoard:
    """The shared value: written by the front end (:meth:`create`), read by the child (:meth:`attach`).

    The memory has no name anywhere: the file it was made from is removed at once, and its descriptor
    is handed to each child it starts (``pass_fds``), so a killed server leaves nothing behind.
    """

    def __init__(self, fd: int | None, view: mmap.mmap) -> None:
        self.fd, self._view = fd, view  # fd: the creator's, kept open for the children it starts

    @classmethod
    def create(cls) -> UrgencyBoard:
        """A new board in shared memory (/dev/shm where the host has it), nobody waiting."""
        where = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, name = tempfile.mkstemp(prefix="pve-steward-urgency-", dir=where)
        try:
            os.unlink(name)
            os.write(fd, struct.pack(_FORMAT, 0.0))
            view = mmap.mmap(fd, _SIZE)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, view)

    @classmethod
    def attach(cls, fd: int) -> UrgencyBoard:
        """The board whose descriptor this process was handed, read-only here (the descriptor is closed)."""
        try:
            view = mmap.mmap(fd, _SIZE, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        return cls(None, view)

    def publish(self, until: float) -> None:
        struct.pack_into(_FORMAT, self._view, 0, until)

    def until(self) -> float:
        return float(struct.unpack_from(_FORMAT, self._view, 0)[0])

    def close(self) -> None:
        """Unmap it, and close the creator's descriptor (a child's mapping stays valid until it ends)."""
        with contextlib.suppress(ValueError, BufferError):
            self._view.close()
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
