"""The text of a tool answer: compact JSON, with long lists of like objects written as tables.

The SDK writes each result as indented JSON beside ``structuredContent`` (1.55x compact JSON,
and a list of guests repeats every key for every guest). The text is what a model reads, so
it is made small and stays lossless and parseable (issue 17, design record 261203-11):

- JSON with no spaces (``separators=(",", ":")``);
- a list of two or more objects with the same keys becomes ``{"columns": [...], "rows": [[...]]}``;
- a column whose every value is cluster text (``{"untrusted": true, "text": ...}``) or null is
  named in ``"untrusted_columns"`` and holds the bare text: still marked, without the wrapper
  on every row.

``structuredContent`` stays the full typed object, unchanged.

The tools build their answers here (:func:`answer`) rather than leave them to the SDK, which also
wrote the indented text that was then thrown away; an object that several callers share is
encoded once (design record 261204-36).
"""

from __future__ import annotations

import json
import weakref
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from pve_steward.perobject import PerObject

TABLE_KEYS = ("columns", "untrusted_columns", "rows")


def _untrusted(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"untrusted", "text"} and value["untrusted"] is True


def tabulate(node: Any) -> Any:
    """``node`` with every list of two or more like objects as a table (recursively)."""
    if isinstance(node, dict):
        return {key: tabulate(value) for key, value in node.items()}
    if not isinstance(node, list):
        return node
    if len(node) >= 2 and all(isinstance(x, dict) for x in node):
        columns = list(node[0])
        if columns and all(list(x) == columns for x in node):
            marked = [
                c
                for c in columns
                if any(x[c] is not None for x in node) and all(x[c] is None or _untrusted(x[c]) for x in node)
            ]
            rows = [
                [x[c]["text"] if c in marked and x[c] is not None else tabulate(x[c]) for c in columns] for x in node
            ]
            table: dict[str, Any] = {"columns": columns}
            if marked:
                table["untrusted_columns"] = marked
            table["rows"] = rows
            return table
    return [tabulate(x) for x in node]


def render(structured: Any) -> str:
    return json.dumps(tabulate(structured), separators=(",", ":"), ensure_ascii=False)


_ANSWERS: PerObject[CallToolResult] = PerObject()  # a handler's result -> its answer, while the result lives
# answers made by `answer` (compact already), by identity: pydantic models are not hashable
_BUILT: weakref.WeakValueDictionary[int, CallToolResult] = weakref.WeakValueDictionary()


def answer(result: BaseModel, action: str | None = None) -> CallToolResult:
    """The answer to a call whose handler returned ``result``: its JSON form as ``structuredContent``
    (wrapped as ``{"action", "result"}`` for a meta-tool's ``action``), its compact rendering as text.

    The same object (callers that shared one heavy run and asked for the same page) gets the same
    answer, encoded once.
    """
    return _ANSWERS.get(result, action, lambda: _build(result, action))


def _build(result: BaseModel, action: str | None) -> CallToolResult:
    # as the SDK dumped them: a granular tool's model by alias, a meta-tool's result (typed Any there) as is
    if action is None:
        structured = result.model_dump(mode="json", by_alias=True)
    else:
        structured = {"action": action, "result": result.model_dump(mode="json")}
    built = CallToolResult(content=[TextContent(type="text", text=render(structured))], structured_content=structured)
    _BUILT[id(built)] = built
    return built


def compact_answer(result: Any) -> Any:
    """A successful structured answer with its one text block rewritten by :func:`render`
    (an answer :func:`answer` made is compact already)."""
    if not isinstance(result, CallToolResult) or result.is_error or not isinstance(result.structured_content, dict):
        return result
    if _BUILT.get(id(result)) is result:
        return result
    if len(result.content) != 1 or not isinstance(result.content[0], TextContent):
        return result  # a tool that built its own content blocks keeps them
    text = render(result.structured_content)
    return result.model_copy(update={"content": [TextContent(type="text", text=text)]})
