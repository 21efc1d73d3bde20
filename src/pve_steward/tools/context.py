"""What a tool handler receives: the process-wide app state and the per-call context."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pve_steward.client import ProxmoxClient
from pve_steward.config import Settings
from pve_steward.handlers import OperationView
from pve_steward.security.audit import AuditLog

if TYPE_CHECKING:
    from pve_steward.security.tokens import TokenSigner

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class AppContext:
    """Built once by the composition root (server.py) and shared by every call."""

    settings: Settings
    client: ProxmoxClient
    audit: AuditLog
    signer: TokenSigner
    clock: Callable[[], float] = time.time
    pve_version: str | None = None


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass
class ToolContext:
    """One tool call: the operation being run, progress reporting, who is calling, audit extras."""

    app: AppContext
    op: OperationView
    progress: Progress = _no_progress
    client_identity: str | None = None
    can_elicit: bool = False
    mcp_context: Any = None
    human: Any = None  # the elicitation outcome for writes (see security/confirm.py); None for reads
    audit_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def client(self) -> ProxmoxClient:
        return self.app.client

    @property
    def settings(self) -> Settings:
        return self.app.settings

    def now(self) -> float:
        return self.app.clock()
