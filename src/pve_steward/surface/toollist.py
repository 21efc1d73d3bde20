"""tools/list answered from the wire form of an earlier answer for the same tools, per protocol version.

Every MCP session lists the tools before its first call (the SDK's client does it to validate results),
and the SDK answers each list by dumping the tool models, validating that dump against the protocol's
result model and dumping it again: about 15 ms of CPU for the granular list (259 KB). The answer is
decided by the registered tools alone (``OpsServer.list_tools`` compacts their schemas, nothing else),
and tools are built once per process for a configuration and shared by its servers (outputschema.py),
so the first answer for a set of tools is kept pickled (our own bytes, never another's) and each later
one, of any server with the same tools, is unpickled from it (2.3 ms for the granular list; parsing it as
JSON took 4.9 ms): an object of its own for each session (a client may change what it got; no other
session sees it). The two protocol versions differ in their envelope, so each has its own entry.

Not kept, and answered as the SDK answers them: a page after the first (``cursor``), and every list
``varies`` says may differ by request or must be built (a start that has not built its tools yet or
has not kept its first list, toolcache.py; a list narrowed by headers or by the caller's grants,
security/narrowing.py).
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

KEEP = 32  # tool sets kept; a server has one or two (granular or meta), a test process a few dozen
# (protocol version, the tools' ids) -> (the tools, held so that no id is reused while kept; the answer pickled)
_KEPT: OrderedDict[tuple[str, tuple[int, ...]], tuple[tuple[Any, ...], bytes]] = OrderedDict()
_LOCK = threading.Lock()  # servers of one process may run on event loops in several threads


class ToolListFromFirstAnswer:
    """Server middleware (innermost: the outer ones, tracing among them, still see every request)."""

    def __init__(
        self, tools: Callable[[], Sequence[Any]], varies: Callable[[ServerRequestContext[Any, Any]], bool]
    ) -> None:
        self._tools, self._varies = tools, varies

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/list" or (ctx.params or {}).get("cursor") is not None or self._varies(ctx):
            return await call_next(ctx)
        tools = tuple(self._tools())
        key = (ctx.protocol_version, tuple(map(id, tools)))
        with _LOCK:
            kept = _KEPT.get(key)
            if kept is not None:
                _KEPT.move_to_end(key)
        if kept is not None:
            return pickle.loads(kept[1])  # type: ignore[no-any-return]  # our own bytes, made below
        answer = await call_next(ctx)
        after = tuple(self._tools())
        if isinstance(answer, dict) and tuple(map(id, after)) == key[1]:  # the same tools (held: ids not reused)
            wire = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            with _LOCK:
                _KEPT[key] = (tools, wire)
                while len(_KEPT) > KEEP:
                    _KEPT.popitem(last=False)
        return answer
