"""``@guarded(...)``: every tool handler runs through it, and declares what the handler is.

The decorator's arguments (toolset, tier, destructive, idempotent) are the operation's write-ness,
fixed in code (see ``handlers.py``); the wrapper checks policy against them, never against a file.
It refuses an operation the configuration does not allow (defence in depth behind registration),
maps our errors to ``ToolError`` messages with the fix, times the call and writes exactly one
audit record per call, whatever the outcome. A handler that is not guarded cannot be
registered (the registry refuses to load it).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError

from pve_steward.errors import MALFORMED_VALUE_ERRORS, PveError, advice
from pve_steward.observe import metrics
from pve_steward.pve.ids import InvalidIdentifier
from pve_steward.pveio.admission import Busy
from pve_steward.security import authority
from pve_steward.security.audit import redact_params
from pve_steward.security.handlers import HANDLERS, SEVERAL_CLUSTERS, SPEC_ATTRIBUTE, HandlerSpec
from pve_steward.security.narrowing import header_refusal, request_headers
from pve_steward.security.tiers import Tier
from pve_steward.security.tokens import TokenRefused
from pve_steward.tools.context import ToolContext

log = logging.getLogger(__name__)
R = TypeVar("R")
__all__ = ["HANDLERS", "Refused", "guarded", "policy_refusal", "refusal"]


class Refused(ToolError):
    """A deliberate refusal (not an error in PVE): precondition failed, policy, invalid input."""


def policy_refusal(t: ToolContext, op: HandlerSpec) -> str | None:
    """Refuse by the handler's own declaration; a context naming another operation is refused too."""
    settings = t.settings
    if t.op.name != op.name:
        return f"handler {op.name} was called as {t.op.name}; an operation name cannot be re-bound"
    if op.is_write and settings.read_only:
        return f"{op.name} is a write and this server runs read-only"
    if op.is_write and not settings.tier.allows(op.tier):
        return f"{op.name} needs tier {op.tier.value}; this server is configured for {settings.tier.value}"
    ceiling, cluster = t.app.max_tier, t.app.cluster
    if op.is_write and ceiling is not None and not ceiling.allows(op.tier):
        return (
            f"{op.name} needs tier {op.tier.value}; cluster '{cluster}' allows at most {ceiling.value} "
            f"(max_tier of [clusters.{cluster}]); nothing was sent to it"
        )
    return None


def refusal(t: ToolContext, op: HandlerSpec) -> str | None:
    """Everything that refuses a call before it runs: the server's policy, the caller's grants
    (``authority.refusal``, on the call's cluster) and this request's narrowing headers. The tool layer asks
    it before any cluster I/O of its own (version check, node names); the guard asks it again and audits."""
    cluster = authority.EVERY_CLUSTER if op.name in SEVERAL_CLUSTERS else t.app.cluster
    return (
        policy_refusal(t, op)
        or authority.refusal(op.name, op.tier, cluster)
        or header_refusal(request_headers(t.mcp_context), op.name, op.toolset, op.tier, op.is_write)
    )


def guarded(
    *,
    toolset: str,
    tier: Tier = Tier.READ_ONLY,
    destructive: bool = False,
    idempotent: bool = True,
    open_world: bool = False,
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
    """Declare a handler: a read by default; ``tier=`` operator or admin makes it a write."""

    def decorate(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]:
        spec = HandlerSpec(fn.__name__, toolset, tier, destructive, idempotent, open_world)
        spec.check()
        return _wrap(fn, spec)

    return decorate


def _wrap(fn: Callable[..., Awaitable[R]], op: HandlerSpec) -> Callable[..., Awaitable[R]]:
    name = op.name

    @functools.wraps(fn)
    async def wrapper(t: ToolContext, /, **kwargs: Any) -> R:
        metrics.APPS.track(t.app)
        metrics.IN_FLIGHT.inc()
        started = time.monotonic()
        try:
            return await _run(t, kwargs, started)
        finally:
            metrics.IN_FLIGHT.dec()
            metrics.TOOL_LATENCY.labels(operation=name).observe(time.monotonic() - started)

    async def _run(t: ToolContext, kwargs: dict[str, Any], started: float) -> R:
        base: dict[str, Any] = {
            "event": "tool_call",
            "tool": op.name,
            "write": op.is_write,
            "tier": op.tier.value,
            "server_tier": t.settings.tier.value,
            "pve_token": t.settings.token_id,  # the id only; the secret never reaches the log
            "params": redact_params(kwargs),
        }
        if t.client_identity:
            base["client"] = t.client_identity
        principal = authority.current()
        if principal is not None:  # the identified caller (HTTP with identity on): in every record
            base["principal"] = principal.id
        if t.app.cluster is not None:
            base["cluster"] = t.app.cluster

        async def audit(outcome: str, **extra: Any) -> None:
            metrics.TOOL_CALLS.labels(operation=name, outcome=outcome).inc()
            if op.is_write or t.settings.audit_reads or outcome not in ("ok",):
                record = {
                    **base,
                    **t.audit_fields,
                    "outcome": outcome,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                    **extra,
                }
                await t.app.audit.record(record)

        refused = refusal(t, op)
        if refused:
            await audit("denied", reason=refused)
            raise Refused(refused)
        if op.is_write and t.app.audit.required:  # before any request: the write's records must leave the box
            undelivered = await anyio.to_thread.run_sync(t.app.audit.delivery_problem)
            if undelivered:
                await audit("refused", reason=undelivered)
                raise Refused(undelivered + "; nothing was sent to the cluster")
        try:
            result = await fn(t, **kwargs)
        except TokenRefused as exc:
            metrics.TOKENS.labels(event="refused", reason=exc.kind).inc()
            await audit("refused", reason=str(exc))
            raise Refused(f"confirmation refused: {exc}") from None
        except Refused as exc:
            await audit("refused", reason=str(exc))
            raise
        except InvalidIdentifier as exc:
            await audit("invalid", reason=str(exc))
            raise Refused(str(exc)) from None
        except PveError as exc:
            hint = advice(exc)
            await audit("failed", error=exc.message, error_type=type(exc).__name__)
            raise ToolError(exc.message + (f". Fix: {hint}" if hint else "")) from None
        except Busy as exc:
            metrics.BUSY.labels(operation=name).inc()
            await audit("busy", error=str(exc))
            raise
        except ToolError as exc:
            await audit("failed", error=str(exc))
            raise
        except MALFORMED_VALUE_ERRORS as exc:
            log.exception("tool %s crashed", op.name)
            await audit("crashed", error_type=type(exc).__name__)
            raise ToolError(
                f"{op.name} stopped on an unexpected {type(exc).__name__}: a value of unexpected type or form in "
                "the cluster's answer, or a bug. The server log has the traceback."
                + (" Check the guest's state before repeating a write." if op.is_write else "")
            ) from None
        except Exception:
            log.exception("tool %s crashed", op.name)
            await audit("crashed")
            raise
        # A write whose PVE task failed is a failed call in the audit trail, even though the tool answered.
        await audit("task_failed" if t.audit_fields.get("task_state") == "failed" else "ok")
        metrics.count_findings(result)
        return result

    wrapper.__guarded__ = True  # type: ignore[attr-defined]
    setattr(wrapper, SPEC_ATTRIBUTE, op)
    if name in HANDLERS and HANDLERS[name] is not wrapper:
        raise RuntimeError(f"two tool handlers are named {name}")
    HANDLERS[name] = wrapper
    return wrapper
