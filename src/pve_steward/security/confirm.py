"""Human confirmation through MCP elicitation, when the client supports it.

Every write tool gets a hidden resolver parameter, built per tool by :func:`make_resolver` so it
sees the call's own arguments. On the execution call (a confirmation token is present) and when
the client declared elicitation, the resolver first checks that the token is valid for exactly
this call (signature, cluster, operation, a digest of these arguments, expiry, not yet used) and
only then asks the human, with a question that describes this call. A token that does not fit
asks nothing (the write is then refused by the same checks in the runner). A declined or
cancelled question refuses the write. Without elicitation the token round trip is the confirmation.
A caller whose grants do not allow the write on that cluster (``authority``) is not asked either.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, Elicit
from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from pve_steward.security import authority
from pve_steward.security.sanitise import one_line
from pve_steward.security.tokens import TokenRefused, TokenSigner

# Arguments that do not change what the write does: they may differ between preview and execution.
NOT_BOUND = frozenset({"confirm_token", "wait", "wait_timeout", "action"})


class Confirm(BaseModel):
    """What the human is asked (flat, as elicitation schemas must be)."""

    confirm: bool = Field(description="Carry out this action on the Proxmox VE cluster?")


class NotAsked(BaseModel):
    """The resolver did not ask (preview call, no elicitation support, or a token not valid for this call)."""

    reason: str
    call: str | None = Field(None, description="digest of this call's arguments (bound into a preview's token)")
    valid: bool = Field(True, description="False when the token does not fit this call")


def call_digest(op: str, args: dict[str, Any]) -> str:
    """The call's identity: operation + every argument that shapes the effect (None means not given)."""
    bound = {k: v for k, v in args.items() if k not in NOT_BOUND and v is not None}
    body = json.dumps({"op": op, "args": to_jsonable_python(bound)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def describe_call(op: str, args: dict[str, Any], summary: str) -> str:
    """The question's text: the signed summary of the resolved target, then this call's own arguments."""
    shown = ", ".join(
        f"{k}={json.dumps(to_jsonable_python(v))}"
        for k, v in sorted(args.items())
        if k not in NOT_BOUND and v is not None
    )
    return f"Confirm on Proxmox VE: {one_line(summary)} [{op}({shown})]"  # the summary carries cluster names


async def token_problem(
    signer: TokenSigner, token: str, op: str, call: str, now: float
) -> tuple[dict[str, Any] | None, str]:
    """(payload, "") when the token is valid for exactly this call, else (None, why not)."""
    payload = signer.peek(token)
    if payload is None:
        return None, "the token is malformed, altered or from another key"
    if payload.get("op") != op:
        return None, f"the token was issued for '{payload.get('op')}', not '{op}'"
    if payload.get("c") != call:
        return None, "the token was issued for a call with other arguments"
    if now > float(payload.get("exp", 0)):
        return None, "the token expired"
    try:
        if await signer.is_used(payload):
            return None, "the token was already used"
    except TokenRefused as exc:
        return None, str(exc)
    return payload, ""


def make_resolver(arg_names: list[str], op_of: Callable[[dict[str, Any]], str | None]) -> Callable[..., Any]:
    """A resolver that receives ``arg_names`` by name (plus the context) and asks about exactly this call.

    ``op_of`` names the operation from the arguments (fixed for a granular tool, the ``action``
    of a meta-tool).
    """

    async def resolver(**kwargs: Any) -> Confirm | NotAsked | Elicit[Confirm]:
        ctx: Context[Any] = kwargs.pop("ctx")
        op = op_of(kwargs)
        call = call_digest(op or "", kwargs)
        token = kwargs.get("confirm_token")
        if not token:
            return NotAsked(reason="preview call", call=call)
        caps = ctx.client_capabilities
        if caps is None or caps.elicitation is None:
            return NotAsked(
                reason="the client does not support elicitation; the confirmation token is the confirmation", call=call
            )
        app = ctx.request_context.lifespan_context
        cluster = kwargs.get("cluster") or app.cluster
        refused = authority.refusal(op, authority.tier_of(op), cluster)
        if refused:  # the guard refuses the call; the human is not asked about what this caller may not do
            return NotAsked(reason=f"not asked: {refused}", call=call, valid=False)
        payload, problem = await token_problem(app.signer, str(token), op or "", call, app.clock())
        if payload is None:
            return NotAsked(reason=f"not asked: {problem}", call=call, valid=False)
        return Elicit(describe_call(op or "", kwargs, str(payload.get("sum") or op)), Confirm)

    params = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=Any) for n in arg_names]
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    resolver.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=Confirm | NotAsked | Elicit[Confirm]
    )
    resolver.__annotations__ = dict.fromkeys(arg_names, Any) | {
        "ctx": Context,
        "return": Confirm | NotAsked | Elicit[Confirm],
    }
    return resolver
