"""The text of a tool answer: compact JSON, with long lists of like objects written as tables.

The SDK writes each result as indented JSON beside ``structuredContent`` (1.55x compact JSON,
and a list of guests repeats every key for every guest). The text is what a model reads, so
it is made small and stays lossless and parseable (issue 17, design record 261203-11):

- JSON with no spaces (``separators=(",", ":")``);
- a list of two or more objects with the same keys becomes ``{"columns": [...], "rows": [[...]]}``;
- cluster text stays marked once per table (design record 261206-57): the rows' common
  ``untrusted_fields`` become the table's ``"untrusted_columns"``, and a column of objects that all
  name the same ``untrusted_fields`` is marked there as ``column.field`` (``subject.name``), the
  cells then without their own list. Rows that mark differently (never in our models) keep their
  lists in an ``untrusted_fields`` column, and the table marks every column any of them marks.

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

from pve_steward.models import MARK
from pve_steward.perobject import PerObject

TABLE_KEYS = ("columns", "untrusted_columns", "rows")
COLUMNS_MARK = "untrusted_columns"


def _marks(value: Any) -> list[str] | None:
    """The ``untrusted_fields`` an object names, or None (not an object, or it names none)."""
    if isinstance(value, dict):
        names = value.get(MARK)
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return names
    return None


def _same_marks(values: list[Any]) -> list[str] | None:
    """The ``untrusted_fields`` every non-null value of a column names alike (None: not so)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    first = _marks(present[0])
    if first is None or any(_marks(v) != first for v in present[1:]):
        return None
    return first


def _unmarked(value: Any) -> Any:
    return value if value is None else {k: v for k, v in value.items() if k != MARK}


def tabulate(node: Any) -> Any:
    """``node`` with every list of two or more like objects as a table (recursively)."""
    if isinstance(node, dict):
        return {key: tabulate(value) for key, value in node.items()}
    if not isinstance(node, list):
        return node
    if len(node) >= 2 and all(isinstance(x, dict) for x in node):
        columns = list(node[0])
        if columns and all(list(x) == columns for x in node):
            return _table(node, columns)
    return [tabulate(x) for x in node]


def _table(node: list[dict[str, Any]], columns: list[str]) -> dict[str, Any]:
    marked: list[str] = []
    if MARK in columns:
        own = _same_marks(node)
        if own is not None:
            columns = [c for c in columns if c != MARK]
            marked = list(own)
        else:  # rows that mark differently keep their lists; the table marks every column any row marks
            marked = list(dict.fromkeys(f for x in node for f in (_marks(x) or ()) if f in columns))
    hoisted = {
        c: fields
        for c in columns
        if c not in marked and "." not in c and (fields := _same_marks([x[c] for x in node])) is not None
    }
    marked += [f"{c}.{f}" for c, fields in hoisted.items() for f in fields]
    rows = [[tabulate(_unmarked(x[c]) if c in hoisted else x[c]) for c in columns] for x in node]
    table: dict[str, Any] = {"columns": columns}
    if marked:
        table[COLUMNS_MARK] = marked
    table["rows"] = rows
    return table


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
