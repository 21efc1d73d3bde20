"""The Proxmox VE releases pve-steward supports, declared once.

The server reads ``/version`` on the first call that needs the cluster (never before serving) and
refuses, through the tools, to work outside this range unless ``--disable-version-check`` is given.
pvesim presents several releases so the check is tested.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pve_steward.config import Settings
    from pve_steward.pveio.client import ProxmoxClient

SUPPORTED_MIN = (8, 0)  # inclusive
SUPPORTED_MAX = (10, 0)  # exclusive
SUPPORTED_TEXT = "Proxmox VE >= 8.0 and < 10.0"
log = logging.getLogger(__name__)


class UnsupportedVersion(RuntimeError):
    pass


def parse_release(version: str) -> tuple[int, int]:
    m = re.match(r"^\s*(\d+)\.(\d+)", version)
    if not m:
        raise UnsupportedVersion(f"cannot read the PVE version '{version}'")
    return int(m.group(1)), int(m.group(2))


def check_version(version: str) -> tuple[int, int]:
    release = parse_release(version)
    if release < SUPPORTED_MIN:  # a newer pve-steward would not help: the cluster is older than any supports
        raise UnsupportedVersion(
            f"Proxmox VE {version} is too old for pve-steward (supported: {SUPPORTED_TEXT}): upgrade the "
            f"cluster to {SUPPORTED_MIN[0]}.{SUPPORTED_MIN[1]} or later, or start with --disable-version-check at "
            "your own risk."
        )
    if release >= SUPPORTED_MAX:
        raise UnsupportedVersion(
            f"Proxmox VE {version} is newer than this pve-steward supports ({SUPPORTED_TEXT}): upgrade pve-steward, "
            "or start with --disable-version-check at your own risk."
        )
    return release


class VersionGate:
    """The version check, run on first use instead of before serving (issue 17).

    The server starts and lists its tools without touching the cluster; the first call that needs
    the cluster reads ``/version`` once (concurrent first calls share that read). A verdict (the
    version, or that it is unsupported) is kept; a failure to reach or trust the cluster is not,
    so a later call tries again. ``disabled`` (``--disable-version-check``) skips the check.
    """

    def __init__(self, url: str | None, read: Callable[[], Awaitable[Any]], *, disabled: bool = False) -> None:
        self._url = url
        self._read = read
        self._disabled = disabled
        self._lock: asyncio.Lock | None = None
        self.version: str | None = None
        self.refusal: str | None = None
        self.checked = disabled

    async def problem(self) -> str | None:
        """None when the cluster may be used; else one sentence to answer the caller with."""
        if self.checked:
            return self.refusal
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.checked:
                return self.refusal
            from pve_steward.errors import PveError, connection_problem

            try:
                answer = await self._read()
            except PveError as exc:
                return connection_problem(self._url, exc)
            self.version = str(answer.get("version", "?")) if isinstance(answer, dict) else "?"
            try:
                check_version(self.version)
            except UnsupportedVersion as exc:
                self.refusal = str(exc)
            self.checked = True
            return self.refusal


class ConnectionProblem(RuntimeError):
    """``check`` cannot use PVE (bad URL, token, TLS, unsupported version)."""


async def check_cluster(settings: Settings, client: ProxmoxClient) -> str:
    """Read /version and enforce the supported range (unless disabled); return the version.

    For ``check`` (here, so that ``check`` never imports the MCP SDK); the server itself never
    calls this before serving (see :class:`VersionGate`).
    """
    from pve_steward.errors import PveError, connection_problem
    from pve_steward.pveio.client import api_path

    try:
        version: dict[str, Any] = await client.get(api_path("version"))
    except PveError as exc:
        raise ConnectionProblem(connection_problem(settings.url, exc)) from None
    text = str(version.get("version", "?"))
    try:
        check_version(text)
    except UnsupportedVersion as exc:
        if not settings.disable_version_check:
            raise ConnectionProblem(str(exc)) from None
        log.warning("version check disabled: %s", exc)
    return text
