"""PVE's scalar values as its API writes them, read without raising: booleans as 1/0, "1"/"0", a JSON true or
on/off, yes/no; integers as numbers or strings, or missing."""

from __future__ import annotations

from typing import Any


def flag(value: Any) -> bool:
    """A PVE boolean (pve-common JSONSchema parse_boolean: 1, true, yes, on); anything else is false."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def integer(value: Any) -> int | None:
    """A PVE integer field; None when missing or not a number."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None
