"""tools/list answered from the wire form of its first answer, for as long as a server's tools stay as built.

Every MCP session lists the tools before its first call (the SDK's client does it to validate results),
and the SDK answers each list by dumping the tool models, validating that dump against the protocol's
result model and dumping it again: about 40 ms for the granular list (259 KB), once per session. A
server's tools do not change once built, so the answer does not either, per protocol version (the two
versions differ in their envelope): the first answer is kept as JSON and each later one is parsed from
it (the standard library's parser: 5 ms for the granular list), an object of its own for each session (a
client may change what it got; no other session sees it).

Not kept, and answered as the SDK answers them: a page after the first (``cursor``), and every list
``varies`` says may differ by request (a start that has not built its tools yet; a list narrowed by
headers or by the caller's grants, security/narrowing.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext


class ToolListFromFirstAnswer:
    """Server middleware (innermost: the outer ones, tracing among them, still see every request)."""

    def __init__(self, varies: Callable[[ServerRequestContext[Any, Any]], bool]) -> None:
        self._varies = varies
        self._kept: dict[str, str] = {}  # protocol version -> the first answer's wire form, as JSON

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/list" or (ctx.params or {}).get("cursor") is not None or self._varies(ctx):
            return await call_next(ctx)
        kept = self._kept.get(ctx.protocol_version)
        if kept is not None:
            return json.loads(kept)  # type: ignore[no-any-return]
        answer = await call_next(ctx)
        if isinstance(answer, dict) and not self._varies(ctx):  # still as built once answered
            self._kept[ctx.protocol_version] = json.dumps(answer, separators=(",", ":"))
        return answer
