"""The server's own log: stderr, set up before anything is built, so start-up alarms reach the operator.

Opening the audit log (a broken hash chain, writes with no recorded outcome), the used-token store (Redis
unreachable, no append-only file, a shared key on a store of its own) and the principals file log what an
operator must see. They run while the server is built, before the MCP SDK configures logging, and the
``pve_steward`` logger already has a handler (``clientlog``: records for the clients that ask), so Python's
last-resort handler stayed silent and the alarms went nowhere. ``serve`` and ``demo`` now install this
handler first; the SDK's own set-up then leaves it in place (``basicConfig`` adds nothing to a configured
root). One plain line per record on stderr: an MCP host shows a stdio server's stderr in its server log
(stdout carries the protocol), and over HTTP it is the process log.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "pve-steward: %(levelname)s: %(message)s"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """The server's handler (a class of its own, so ``configure`` can tell it is installed)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(FORMAT))


def configure(level: int = logging.WARNING) -> None:
    """Send the process's log records at ``level`` and above to stderr (once; later calls change nothing)."""
    root = logging.getLogger()
    if any(isinstance(h, _Stderr) for h in root.handlers):
        return
    root.addHandler(_Stderr())
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
