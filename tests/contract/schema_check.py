"""Check API responses against the ``returns`` part of PVE's published schema.

The schema under-documents responses (real rows carry more fields), so the rule is: every field
the schema marks required is present, and every documented field that is present has the
documented type. Extra fields are allowed.
"""

from __future__ import annotations

from typing import Any


def _type_ok(value: Any, ptype: str) -> bool:
    if ptype == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if ptype == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if ptype == "boolean":
        return isinstance(value, bool) or value in (0, 1)
    if ptype == "string":
        return isinstance(value, str)
    if ptype == "array":
        return isinstance(value, list)
    if ptype == "object":
        return isinstance(value, dict)
    if ptype == "null":
        return value is None
    return True


def check_object(obj: Any, schema: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    if not isinstance(obj, dict):
        return [f"{where}: expected object, got {type(obj).__name__}"]
    for name, prop in (schema.get("properties") or {}).items():
        if name.startswith("{") and name.endswith("}"):  # a map: "{id}" stands for every key (Ceph metadata)
            for key, value in obj.items():
                problems += check_object(value, prop, f"{where}.{key}") if prop.get("properties") else []
            continue
        if name not in obj:
            if not prop.get("optional"):
                problems.append(f"{where}: required field '{name}' missing")
            continue
        ptype = prop.get("type")
        if isinstance(ptype, str) and not _type_ok(obj[name], ptype):
            problems.append(f"{where}.{name}: expected {ptype}, got {obj[name]!r}")
        elif ptype == "object" and isinstance(obj[name], dict) and prop.get("properties"):
            problems += check_object(obj[name], prop, f"{where}.{name}")
    return problems


def check_response(data: Any, returns: dict[str, Any], where: str) -> list[str]:
    rtype = returns.get("type")
    if rtype == "array":
        if not isinstance(data, list):
            return [f"{where}: expected array, got {type(data).__name__}"]
        items = returns.get("items") or {}
        out: list[str] = []
        if items.get("type") == "object" or items.get("properties"):
            for i, row in enumerate(data):
                out += check_object(row, items, f"{where}[{i}]")
        return out
    if rtype == "object":
        return check_object(data, returns, where)
    if isinstance(rtype, str) and not _type_ok(data, rtype):
        return [f"{where}: expected {rtype}, got {data!r}"]
    return []
