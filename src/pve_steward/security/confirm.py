"""Human confirmation through MCP elicitation, when the client supports it.

Every write tool gets a hidden resolver parameter. On the execution call (a confirmation token is
present) and when the client declared elicitation, the resolver asks the human to confirm the
previewed action (described from the token's signed payload). Otherwise it does not ask: the
token round trip is the confirmation. A declined or cancelled question refuses the write.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, Elicit
from pydantic import BaseModel, Field

from pve_steward.security.sanitise import one_line
from pve_steward.security.tokens import TokenSigner


class Confirm(BaseModel):
    """What the human is asked (flat, as elicitation schemas must be)."""

    confirm: bool = Field(description="Carry out this action on the Proxmox VE cluster?")


class NotAsked(BaseModel):
    """The resolver did not ask (preview call, no elicitation support, or an invalid token)."""

    reason: str


def describe(signer: TokenSigner, token: str) -> str | None:
    """A one-line description of a token's action, if its signature is valid."""
    payload = signer.peek(token)
    if payload is None:
        return None
    summary = payload.get("sum")
    return one_line(summary if summary else f"{payload.get('op')} on {payload.get('t')}")


async def confirm_resolver(confirm_token: str | None, ctx: Context[Any]) -> Confirm | NotAsked | Elicit[Confirm]:
    if not confirm_token:
        return NotAsked(reason="preview call")
    caps = ctx.client_capabilities
    if caps is None or caps.elicitation is None:
        return NotAsked(reason="the client does not support elicitation; the confirmation token is the confirmation")
    app = ctx.request_context.lifespan_context
    summary = describe(app.signer, confirm_token)
    if summary is None:
        return NotAsked(reason="invalid token (it will be refused)")
    return Elicit(f"Confirm on Proxmox VE: {summary}", Confirm)
