"""Read tool output the way the code sees it, whatever form the mark of cluster text takes on the wire.

Cluster text is marked once per object (design record 261206-57): an object names the fields whose
values are cluster text in ``untrusted_fields``, the values are plain; a table of the answer text
names its marked columns in ``untrusted_columns`` (``column.field`` inside a column of objects).
The earlier form, ``{"untrusted": true, "text": ...}`` around every value, is read too.
Tests read answers through these helpers, never through the wire form itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MARK = "untrusted_fields"
COLUMNS = "untrusted_columns"


def _wrapper(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"untrusted", "text"} and value["untrusted"] is True


def plain(value: Any) -> Any:
    """The answer without its marks: ``untrusted_fields`` dropped, wrappers unwrapped, recursively."""
    if isinstance(value, dict):
        if _wrapper(value):
            return value["text"]
        return {k: plain(v) for k, v in value.items() if k != MARK}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def marked_fields(obj: dict[str, Any]) -> list[str]:
    """The fields an object of an answer marks as cluster text."""
    names = obj.get(MARK)
    return list(names) if isinstance(names, list) else []


def is_marked(obj: dict[str, Any], field: str) -> bool:
    """Whether ``obj[field]`` is cluster text marked as such (either wire form)."""
    return field in marked_fields(obj) or _wrapper(obj.get(field))


def cluster_strings(value: Any, path: str = "$") -> Iterator[tuple[str, str, bool]]:
    """Every string value of a structured answer: (path, string, marked as cluster text).

    A string is marked when it sits, at any depth, in the value of a field its object names in
    ``untrusted_fields`` (or in a wrapper). Dict keys are not values: they are ours, PVE's, or
    identifiers whose grammar admits no free text (see test_untrusted_marking).
    """
    yield from _strings(value, path, False)


def _strings(value: Any, path: str, marked: bool) -> Iterator[tuple[str, str, bool]]:
    if isinstance(value, str):
        yield path, value, marked
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]", marked)
    elif isinstance(value, dict):
        if _wrapper(value):
            yield path, value["text"], True
            return
        names = set(marked_fields(value))
        for k, v in value.items():
            if k == MARK:
                continue
            yield from _strings(v, f"{path}.{k}", marked or k in names)


def text_strings(value: Any, path: str = "$") -> Iterator[tuple[str, str, bool]]:
    """Every string value of an answer's text (its JSON, tables included): (path, string, marked).

    Marked: inside a field its object names in ``untrusted_fields``, or in a column (or a column's
    ``column.field``) its table names in ``untrusted_columns``. A table's own keys and column names
    are structure, not values.
    """
    yield from _text(value, path, False)


def _text(value: Any, path: str, marked: bool) -> Iterator[tuple[str, str, bool]]:
    if isinstance(value, dict) and _table_shape(value):
        cols = value["columns"]
        marks = set(value.get(COLUMNS, []))
        for r, row in enumerate(value["rows"]):
            for column, cell in zip(cols, row, strict=True):
                where = f"{path}.rows[{r}].{column}"
                if column in marks:
                    yield from _text(cell, where, True)
                elif isinstance(cell, dict):
                    inner = {f[len(column) + 1 :] for f in marks if f.startswith(column + ".")}
                    yield from _text({MARK: sorted(inner), **cell} if inner else cell, where, marked)
                else:
                    yield from _text(cell, where, marked)
        return
    if isinstance(value, dict) and not _wrapper(value):
        names = set(marked_fields(value))
        for k, v in value.items():
            if k != MARK:
                yield from _text(v, f"{path}.{k}", marked or k in names)
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _text(v, f"{path}[{i}]", marked)
        return
    yield from _strings(value, path, marked)


def _table_shape(value: dict[str, Any]) -> bool:
    return set(value) in ({"columns", "rows"}, {"columns", COLUMNS, "rows"}) and isinstance(value["rows"], list)


def untabulate(node: Any) -> Any:
    """The inverse of the answer text's tables: what a client reading the text reconstructs."""
    if isinstance(node, list):
        return [untabulate(x) for x in node]
    if not isinstance(node, dict):
        return node
    if _table_shape(node):
        marks = list(node.get(COLUMNS, []))
        own = [m for m in marks if "." not in m]
        inner: dict[str, list[str]] = {}
        for m in marks:
            if "." in m:
                column, field = m.split(".", 1)
                inner.setdefault(column, []).append(field)
        own = [] if MARK in node["columns"] else own  # the rows keep their own lists in a column
        rows = []
        for row in node["rows"]:
            obj = {c: _cell(untabulate(v), inner.get(c)) for c, v in zip(node["columns"], row, strict=True)}
            rows.append({MARK: own, **obj} if own else obj)
        return rows
    return {k: untabulate(v) for k, v in node.items()}


def _cell(value: Any, fields: list[str] | None) -> Any:
    return {MARK: fields, **value} if fields and isinstance(value, dict) else value
